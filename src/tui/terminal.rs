//! The real terminal: raw mode, alternate screen, bracketed paste and mouse
//! reporting on the way in; all of it undone on the way out, whether we
//! leave normally, by error, by panic or by signal.

use std::collections::VecDeque;
use std::io::Write;
use std::time::Duration;

use ratatui::DefaultTerminal;
use ratatui::crossterm::event::{
    self, DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    Event,
};
use ratatui::crossterm::execute;
use tokio::io::unix::AsyncFd;

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

/// Terminal events, read on the event loop's own thread whenever the
/// terminal has input: a key reaches the loop without a reader thread handing
/// it over (one wake-up less between a keystroke and its echo). crossterm
/// still reads and parses; this only waits for its input, and for SIGWINCH,
/// which crossterm turns into resize events.
pub struct TerminalEvents {
    input: AsyncFd<std::os::fd::OwnedFd>,
    resized: tokio::signal::unix::Signal,
    queued: VecDeque<Event>,
}

impl TerminalEvents {
    pub fn new() -> std::io::Result<TerminalEvents> {
        let input = input_fd()?;
        // SAFETY: an OwnedFd gives the same descriptor for as long as it
        // lives, and the AsyncFd owns it: it stays open while registered.
        let input =
            unsafe { AsyncFd::register_with_interest(input, tokio::io::Interest::READABLE) }
                .map_err(std::io::Error::from)?;
        Ok(TerminalEvents {
            input,
            resized: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())?,
            queued: VecDeque::new(),
        })
    }

    /// The next event: waits for input or a resize.
    pub async fn next(&mut self) -> std::io::Result<Event> {
        use std::os::fd::AsRawFd;
        let fd = self.input.get_ref().as_raw_fd();
        loop {
            if let Some(event) = self.queued.pop_front() {
                return Ok(event);
            }
            tokio::select! {
                ready = self.input.readable() => {
                    let mut ready = ready?;
                    take_available(fd, &mut self.queued)?;
                    // Input that comes after this is a new readiness event:
                    // clearing cannot lose it.
                    ready.clear_ready();
                }
                _ = self.resized.recv() => take_available(fd, &mut self.queued)?,
            }
        }
    }

    /// An event already read, without waiting.
    pub fn try_next(&mut self) -> Option<Event> {
        self.queued.pop_front()
    }
}

/// Everything crossterm can read now, without blocking; an error once the
/// terminal `fd` hung up (crossterm itself would spin on it for ever,
/// retrying a read that fails).
fn take_available(fd: std::os::fd::RawFd, queued: &mut VecDeque<Event>) -> std::io::Result<()> {
    if hung_up(fd) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the terminal hung up",
        ));
    }
    while event::poll(Duration::ZERO)? {
        queued.push_back(event::read()?);
    }
    Ok(())
}

/// The terminal crossterm reads: stdin when it is one, else /dev/tty.
pub fn input_fd() -> std::io::Result<std::os::fd::OwnedFd> {
    use std::io::IsTerminal;
    use std::os::fd::AsFd;
    if std::io::stdin().is_terminal() {
        std::io::stdin().as_fd().try_clone_to_owned()
    } else {
        Ok(std::fs::File::open("/dev/tty")?.into())
    }
}

/// Waits up to `wait` for an event on the terminal `fd` (for loops that
/// block rather than run on tokio); an error once the terminal hung up.
pub fn poll_input(fd: std::os::fd::RawFd, wait: Duration) -> std::io::Result<bool> {
    let hung_up_error =
        || std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the terminal hung up");
    if hung_up(fd) {
        return Err(hung_up_error());
    }
    // Events crossterm already read come first.
    if event::poll(Duration::ZERO)? {
        return Ok(true);
    }
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one pollfd, valid for the call.
    if unsafe { libc::poll(&mut poll, 1, ms) } < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    if hung_up(fd) {
        return Err(hung_up_error());
    }
    event::poll(Duration::ZERO)
}

/// Whether the terminal behind `fd` is gone (its other side closed).
fn hung_up(fd: std::os::fd::RawFd) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, valid for the call; a zero timeout never blocks.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
}

/// Moves what is already queued (`next` gives it without waiting) into
/// `out`, up to `limit` items, so a burst of keys or server lines becomes
/// one update and one frame.
pub fn drain_queued<T, A, I: IntoIterator<Item = A>>(
    mut next: impl FnMut() -> Option<T>,
    out: &mut Vec<A>,
    limit: usize,
    mut map: impl FnMut(T) -> I,
) {
    while out.len() < limit {
        match next() {
            Some(item) => out.extend(map(item)),
            None => break,
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
