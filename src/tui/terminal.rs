//! The real terminal: raw mode, alternate screen, bracketed paste and mouse
//! reporting on the way in; all of it undone on the way out, whether we
//! leave normally, by error, by panic or by signal.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ratatui::DefaultTerminal;
use ratatui::crossterm::event::{
    self, DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    Event,
};
use ratatui::crossterm::execute;
use tokio::sync::mpsc;

/// Restores the terminal when dropped.
pub struct TerminalGuard {
    mouse: bool,
}

impl TerminalGuard {
    /// Takes over the terminal. ratatui's init installs a panic hook that
    /// restores raw mode and the screen; ours adds the input modes.
    pub fn enter(mouse: bool) -> std::io::Result<(TerminalGuard, DefaultTerminal)> {
        let terminal = ratatui::try_init()?;
        let guard = TerminalGuard { mouse };
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            disable_input_modes(mouse);
            previous(info);
        }));
        let mut out = std::io::stdout();
        execute!(out, EnableBracketedPaste)?;
        if mouse {
            execute!(out, EnableMouseCapture)?;
        }
        Ok((guard, terminal))
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        disable_input_modes(self.mouse);
        ratatui::restore();
    }
}

fn disable_input_modes(mouse: bool) {
    let mut out = std::io::stdout();
    if mouse {
        let _ = execute!(out, DisableMouseCapture);
    }
    let _ = execute!(out, DisableBracketedPaste);
    let _ = out.flush();
}

/// Rings the real terminal's bell.
pub fn bell() {
    let mut out = std::io::stdout();
    let _ = out.write_all(b"\x07");
    let _ = out.flush();
}

/// Puts `text` on the clipboard of the terminal we run in (OSC 52, as tmux
/// does; tmux itself passes it on with `set-clipboard on`).
pub fn copy_to_clipboard(text: &str) {
    let mut out = std::io::stdout();
    let _ = out.write_all(osc52(text).as_bytes());
    let _ = out.flush();
}

pub fn osc52(text: &str) -> String {
    format!(
        "\x1b]52;c;{}\x07",
        crate::protocol::b64_encode(text.as_bytes())
    )
}

/// Reads terminal events on a thread of its own (crossterm's reader blocks).
/// It checks `stop` between polls so it does not eat keys after we leave.
pub fn spawn_event_reader(stop: Arc<AtomicBool>) -> mpsc::Receiver<Event> {
    let (tx, rx) = mpsc::channel(1024);
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match event::poll(Duration::from_millis(200)) {
                Ok(true) => match event::read() {
                    Ok(ev) => {
                        if tx.blocking_send(ev).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                },
                Ok(false) => {}
                Err(_) => break,
            }
        }
    });
    rx
}

/// Moves what is already queued on `rx` into `out` (up to `limit` items), so a
/// burst of keys or server lines becomes one update and one frame.
pub fn drain_queued<T, A, I: IntoIterator<Item = A>>(
    rx: &mut mpsc::Receiver<T>,
    out: &mut Vec<A>,
    limit: usize,
    mut map: impl FnMut(T) -> I,
) {
    while out.len() < limit {
        match rx.try_recv() {
            Ok(item) => out.extend(map(item)),
            Err(_) => break,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn clipboard_text_goes_out_as_osc_52() {
        assert_eq!(super::osc52("hi\n"), "\x1b]52;c;aGkK\x07");
    }
}
