//! The real terminal: raw mode, alternate screen, bracketed paste and mouse
//! reporting on the way in; all of it undone on the way out, whether we
//! leave normally, by error, by panic or by signal.

use std::collections::VecDeque;
use std::io::Write;
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{
    self, DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    Event,
};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{EnterAlternateScreen, enable_raw_mode};
use tokio::io::unix::AsyncFd;

/// Restores the terminal when dropped.
pub struct TerminalGuard {
    mouse: bool,
}

impl TerminalGuard {
    /// Takes over the terminal: raw mode, the alternate screen, and a
    /// panic hook that gives all of it back before the panic is reported.
    pub fn enter(mouse: bool) -> std::io::Result<(TerminalGuard, Screen)> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            disable_input_modes(mouse);
            ratatui::restore();
            previous(info);
        }));
        let guard = TerminalGuard { mouse };
        enable_raw_mode()?;
        let mut out = std::io::stdout();
        execute!(out, EnterAlternateScreen)?;
        let terminal = Terminal::new(CrosstermBackend::new(FrameOut::new()?))?;
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

/// The terminal a UI draws on: everything a frame writes (its cells, the
/// cursor's place and look) goes out in one write.
pub type Screen = Terminal<CrosstermBackend<FrameOut>>;

/// A frame's bytes, held until `commit`. ratatui flushes its backend
/// several times a frame (after the cells, after each cursor command), and
/// Rust's stdout writes whatever passes through it in lines of at most
/// 1 KiB: a 200×50 frame went out in five or more writes, each a wake-up
/// of the terminal reading them (tmux redrew half frames), and a key's
/// echo in two. Holding them makes a frame one write, seen whole.
pub struct FrameOut {
    out: std::fs::File,
    held: Vec<u8>,
}

/// Held bytes are written at once past this (a frame is far smaller).
const FRAME_OUT_LIMIT: usize = 4 << 20;

impl FrameOut {
    /// Writes to this process's stdout (its own descriptor of it, so that
    /// Rust's line buffer is not in the way).
    pub fn new() -> std::io::Result<FrameOut> {
        use std::os::fd::AsFd;
        let out = std::io::stdout().as_fd().try_clone_to_owned()?;
        Ok(FrameOut::to(out.into()))
    }

    /// Writes to `out`.
    pub fn to(out: std::fs::File) -> FrameOut {
        FrameOut {
            out,
            held: Vec::new(),
        }
    }

    /// Writes what the frame held.
    pub fn commit(&mut self) -> std::io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let written = self.out.write_all(&self.held);
        self.held.clear();
        written
    }
}

impl Write for FrameOut {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.held.extend_from_slice(bytes);
        if self.held.len() > FRAME_OUT_LIMIT {
            self.commit()?;
        }
        Ok(bytes.len())
    }

    /// Holds on: the frame is written by `commit`.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for FrameOut {
    fn drop(&mut self) {
        // The terminal's last words (showing the cursor again).
        let _ = self.commit();
    }
}

/// Writes what the last frame drew.
pub fn show(terminal: &mut Screen) -> std::io::Result<()> {
    terminal.backend_mut().writer_mut().commit()
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
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;

    #[test]
    fn clipboard_text_goes_out_as_osc_52() {
        assert_eq!(super::osc52("hi\n"), "\x1b]52;c;aGkK\x07");
    }

    /// A screen writing into a pipe, and the pipe's other end (not blocking).
    fn piped_screen(width: u16, height: u16) -> (Screen, std::io::PipeReader) {
        let (reader, writer) = std::io::pipe().unwrap();
        crate::sandbox::sys::set_nonblocking(reader.as_fd(), true).unwrap();
        let out = FrameOut::to(std::fs::File::from(std::os::fd::OwnedFd::from(writer)));
        let viewport = ratatui::Viewport::Fixed(ratatui::layout::Rect::new(0, 0, width, height));
        let terminal = Terminal::with_options(
            CrosstermBackend::new(out),
            ratatui::TerminalOptions { viewport },
        )
        .unwrap();
        (terminal, reader)
    }

    /// One read of what is in the pipe now (empty when nothing is).
    fn one_read(reader: &mut std::io::PipeReader) -> Vec<u8> {
        let mut buf = vec![0u8; 1 << 20];
        match reader.read(&mut buf) {
            Ok(n) => buf.truncate(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => buf.clear(),
            Err(e) => panic!("{e}"),
        }
        buf
    }

    #[test]
    fn a_frame_goes_out_whole_in_one_write_when_shown() {
        let (mut screen, mut reader) = piped_screen(200, 50);
        let text = "x".repeat(200);
        screen
            .draw(|frame| {
                let area = frame.area();
                frame.render_widget(
                    ratatui::widgets::Paragraph::new(vec![text.as_str().into(); 50]),
                    area,
                );
                frame.set_cursor_position((7, 3));
            })
            .unwrap();
        // ratatui flushed its backend several times: nothing went out yet.
        assert!(one_read(&mut reader).is_empty());
        show(&mut screen).unwrap();
        let frame = String::from_utf8(one_read(&mut reader)).unwrap();
        assert_eq!(frame.matches('x').count(), 200 * 50);
        // The cursor's place and look came in the same write, last.
        assert!(
            frame.ends_with("\x1b[4;8H"),
            "{:?}",
            &frame[frame.len() - 20..]
        );
        assert!(frame.contains("\x1b[?25h"));
        // Nothing is written twice.
        show(&mut screen).unwrap();
        assert!(one_read(&mut reader).is_empty());
    }

    #[test]
    fn held_bytes_go_out_past_the_limit_and_when_dropped() {
        let (reader, writer) = std::io::pipe().unwrap();
        let mut out = FrameOut::to(std::fs::File::from(std::os::fd::OwnedFd::from(writer)));
        let reading = std::thread::spawn(move || {
            let mut reader = reader;
            let mut all = Vec::new();
            reader.read_to_end(&mut all).unwrap();
            all.len()
        });
        let chunk = vec![b'y'; 1 << 20];
        for _ in 0..5 {
            out.write_all(&chunk).unwrap();
            out.flush().unwrap();
        }
        assert!(out.held.len() <= FRAME_OUT_LIMIT, "{}", out.held.len());
        // What is held when the writer goes goes out then.
        out.write_all(b"bye").unwrap();
        assert_eq!(out.held.len(), 3);
        drop(out);
        assert_eq!(reading.join().unwrap(), (5 << 20) + 3);
    }
}
