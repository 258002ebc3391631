//! A PTY master read and written on the async runtime, without threads.
//!
//! A keystroke used to cross two threads on its way to the shell and back
//! (a writer thread, a reader thread, each a wake-up). Here the master is
//! non-blocking: input is written by whoever sends it, at once, unless
//! older input still waits; output is read by the task that keeps the
//! screen. Input the terminal cannot take yet (a frozen shell does not
//! read) waits here, in order, up to a bound, and is written as the
//! terminal takes it.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Mutex;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

/// Input that may wait for a terminal that is not reading: a paste into a
/// paused session fits; a runaway client gets an error, not our memory.
pub const MAX_PENDING_INPUT: usize = 1 << 20;

pub struct PtyIo {
    fd: AsyncFd<OwnedFd>,
    pending: Mutex<VecDeque<u8>>,
    /// Said when input starts to wait.
    input_waits: Notify,
}

impl PtyIo {
    /// Takes a PTY master (made non-blocking here, which every descriptor
    /// of the same open master shares). Must be called on the runtime.
    pub fn new(master: OwnedFd) -> io::Result<PtyIo> {
        super::sys::set_nonblocking(master.as_fd(), true)?;
        let interest = Interest::READABLE | Interest::WRITABLE;
        // SAFETY: an OwnedFd stays open, and the same descriptor, until the AsyncFd drops it.
        let fd = unsafe { AsyncFd::register_with_interest(master, interest) }
            .map_err(io::Error::from)?;
        Ok(PtyIo {
            fd,
            pending: Mutex::new(VecDeque::new()),
            input_waits: Notify::new(),
        })
    }

    /// The next output: `Ok(0)` once nothing holds the terminal's other
    /// side any more (Linux says so with EIO).
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.fd.readable().await?;
            match ready.try_io(|fd| read_fd(fd.get_ref(), buf)) {
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Types `bytes`: written now as far as the terminal takes them, the
    /// rest after whatever already waits. An error only when too much
    /// waits already (nothing of `bytes` is then taken) or the terminal
    /// is gone.
    pub fn write(&self, bytes: &[u8]) -> Result<(), String> {
        let mut pending = self.lock();
        if pending.len() + bytes.len() > MAX_PENDING_INPUT {
            return Err(format!(
                "the shell is not reading its input ({} bytes already wait)",
                pending.len()
            ));
        }
        let mut written = 0;
        if pending.is_empty() {
            written = match write_fd(self.fd.get_ref(), bytes) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
                Err(e) => return Err(format!("writing to the terminal: {e}")),
            };
        }
        if written < bytes.len() {
            pending.extend(&bytes[written..]);
            self.input_waits.notify_one();
        }
        Ok(())
    }

    /// Bytes of input waiting for the terminal.
    pub fn pending(&self) -> usize {
        self.lock().len()
    }

    /// Writes waiting input as the terminal takes it; returns only when the
    /// terminal fails, and then the waiting input is dropped (it cannot be
    /// written). For a `select!` beside `read`: dropping the future loses
    /// nothing, what waits stays queued.
    pub async fn write_pending(&self) -> io::Error {
        loop {
            let waits = self.input_waits.notified();
            if self.lock().is_empty() {
                waits.await;
                continue;
            }
            let mut ready = match self.fd.writable().await {
                Ok(ready) => ready,
                Err(e) => return e,
            };
            let mut pending = self.lock();
            let (front, _) = pending.as_slices();
            match ready.try_io(|fd| write_fd(fd.get_ref(), front)) {
                Ok(Ok(n)) => {
                    pending.drain(..n);
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => {
                    pending.clear();
                    return e;
                }
                Err(_would_block) => {}
            }
        }
    }

    /// Sets the terminal's size; its foreground job gets SIGWINCH.
    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize from the pointer, which lives across the call.
        let rc = unsafe { libc::ioctl(self.fd.get_ref().as_raw_fd(), libc::TIOCSWINSZ, &size) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<u8>> {
        // Bytes in a queue cannot be left half-changed by a panic elsewhere.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn read_fd(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reads at most buf.len() bytes into buf, which we borrow mutably.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

fn write_fd(fd: &OwnedFd, bytes: &[u8]) -> io::Result<usize> {
    if bytes.is_empty() {
        return Ok(0);
    }
    // SAFETY: reads at most bytes.len() bytes from bytes, which we borrow.
    let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::pty::{PtyShell, ShellSpec};
    use std::time::Duration;

    fn shell(script: &str, cwd: &std::path::Path) -> (PtyShell, PtyIo) {
        let spec = ShellSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: cwd.to_path_buf(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            env_clear: true,
            cols: 80,
            rows: 24,
        };
        let (shell, fd) = PtyShell::spawn_with_terminal(&spec).unwrap();
        (shell, PtyIo::new(fd).unwrap())
    }

    /// Reads (and writes what waits) until the output holds `needle`.
    async fn read_until(io: &PtyIo, needle: &str) -> String {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !String::from_utf8_lossy(&seen).contains(needle) {
            tokio::select! {
                n = io.read(&mut buf) => match n.unwrap() {
                    0 => break,
                    n => seen.extend_from_slice(&buf[..n]),
                },
                e = io.write_pending() => panic!("writing failed: {e}"),
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    }

    #[tokio::test]
    async fn a_key_written_is_echoed_and_the_end_reads_as_zero() {
        let dir = tempfile::tempdir().unwrap();
        let (_shell, io) = shell(
            "stty raw -echo; echo ready; head -c 3; echo; echo done",
            dir.path(),
        );
        assert!(read_until(&io, "ready").await.contains("ready"));
        io.write(b"abc").unwrap();
        let out = read_until(&io, "done").await;
        assert!(out.contains("abc"), "{out:?}");
        // Nothing holds the terminal any more: EIO is reported as the end.
        let mut buf = [0u8; 64];
        let end = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if io.read(&mut buf).await.unwrap() == 0 {
                    break;
                }
            }
        })
        .await;
        assert!(end.is_ok(), "no end of output");
    }

    #[tokio::test]
    async fn input_a_busy_shell_does_not_read_waits_in_order_and_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let (_shell, io) = shell(
            "stty raw -echo; echo ready; sleep 1; head -c 700000 > got; echo done",
            dir.path(),
        );
        assert!(read_until(&io, "ready").await.contains("ready"));
        let sent: Vec<u8> = (0..700_000u32).map(|i| b'a' + (i % 23) as u8).collect();
        let (first, second) = sent.split_at(600_000);
        io.write(first).unwrap();
        let waiting = io.pending();
        assert!(waiting > 0, "a terminal that is not read took 600 kB");
        // Past the bound: refused whole, and what waits is kept.
        let refused = io.write(&[b'x'; MAX_PENDING_INPUT]).unwrap_err();
        assert!(refused.contains("not reading its input"), "{refused}");
        assert_eq!(io.pending(), waiting);
        io.write(second).unwrap();
        read_until(&io, "done").await;
        assert_eq!(io.pending(), 0);
        let got = std::fs::read(dir.path().join("got")).unwrap();
        assert!(
            got == sent,
            "{} bytes arrived, not the {} sent in order",
            got.len(),
            sent.len()
        );
    }

    #[tokio::test]
    async fn a_resize_reaches_the_terminal() {
        let dir = tempfile::tempdir().unwrap();
        let (_shell, io) = shell("echo ready; read x; stty size", dir.path());
        assert!(read_until(&io, "ready").await.contains("ready"));
        io.resize(132, 43).unwrap();
        io.write(b"\r").unwrap();
        let out = read_until(&io, "43 132").await;
        assert!(out.contains("43 132"), "{out:?}");
    }
}
