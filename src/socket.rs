//! A connection's Unix socket, split into a half that reads and a half that
//! writes, each waking its task only for what it waits for.
//!
//! tokio's `UnixStream` asks epoll about reading and writing at once, so
//! every time the peer reads what we sent, the socket "becomes writable"
//! and our process wakes for nothing. On a keystroke's way that is two
//! wasted wake-ups (the client's when the server reads the key, the
//! server's when the client reads the echo), each a context switch on a
//! busy machine. Here the reader is registered for reading only; the
//! writer writes straight away and registers for writability only while
//! a write waits for room, which a healthy peer rarely makes it do.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// The reading half.
pub struct SocketReader {
    fd: AsyncFd<OwnedFd>,
}

/// The writing half: dropping it (or shutting it down) tells the peer that
/// nothing more comes, as tokio's halves do.
pub struct SocketWriter {
    fd: OwnedFd,
    /// A registration for writability, held only while a write waits.
    waiting: Option<AsyncFd<OwnedFd>>,
}

/// Splits a connected stream (made non-blocking here). Must be called on
/// the runtime.
pub fn split(stream: std::os::unix::net::UnixStream) -> io::Result<(SocketReader, SocketWriter)> {
    stream.set_nonblocking(true)?;
    let fd = OwnedFd::from(stream);
    let writer = SocketWriter {
        fd: fd.try_clone()?,
        waiting: None,
    };
    Ok((
        SocketReader {
            fd: register(fd, Interest::READABLE)?,
        },
        writer,
    ))
}

/// Splits a tokio stream (its registration is dropped first).
pub fn split_tokio(stream: tokio::net::UnixStream) -> io::Result<(SocketReader, SocketWriter)> {
    split(stream.into_std()?)
}

fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd stays open, and the same descriptor, until the AsyncFd drops it.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(io::Error::from)
}

impl AsyncRead for SocketReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match ready.try_io(|fd| read_fd(fd.get_ref(), unfilled)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => {}
            }
        }
    }
}

impl AsyncWrite for SocketWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            if let Some(waiting) = &this.waiting {
                let mut ready = ready!(waiting.poll_write_ready(cx))?;
                let outcome = ready.try_io(|fd| send_fd(fd.get_ref(), buf));
                drop(ready);
                match outcome {
                    Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(result) => {
                        // Room again: stop hearing about it.
                        this.waiting = None;
                        return Poll::Ready(result);
                    }
                    Err(_would_block) => continue,
                }
            }
            match send_fd(&this.fd, buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Registering reports the current state, so no wake-up is missed.
                    this.waiting = Some(register(this.fd.try_clone()?, Interest::WRITABLE)?);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                result => return Poll::Ready(result),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(shutdown_writing(&self.fd))
    }
}

impl Drop for SocketWriter {
    fn drop(&mut self) {
        let _ = shutdown_writing(&self.fd);
    }
}

fn shutdown_writing(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: shutdown on a descriptor we own, with integer arguments only.
    if unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) } == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        // A peer already gone is no failure of ours.
        if e.raw_os_error() == Some(libc::ENOTCONN) {
            Ok(())
        } else {
            Err(e)
        }
    }
}

fn read_fd(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reads at most buf.len() bytes into buf, which we borrow mutably.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

fn send_fd(fd: &OwnedFd, bytes: &[u8]) -> io::Result<usize> {
    // SAFETY: reads at most bytes.len() bytes from bytes, which we borrow.
    // MSG_NOSIGNAL: a peer that left is an error here, not a SIGPIPE.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    #[tokio::test]
    async fn lines_cross_both_ways_and_a_dropped_writer_ends_the_peer() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (a_read, mut a_write) = split(a).unwrap();
        let (b_read, mut b_write) = split(b).unwrap();
        a_write.write_all(b"ping\n").await.unwrap();
        let mut b_lines = BufReader::new(b_read);
        let mut line = String::new();
        b_lines.read_line(&mut line).await.unwrap();
        assert_eq!(line, "ping\n");
        b_write.write_all(b"pong\n").await.unwrap();
        drop(b_write);
        let mut rest = String::new();
        BufReader::new(a_read)
            .read_to_string(&mut rest)
            .await
            .unwrap();
        assert_eq!(rest, "pong\n", "EOF must follow once the writer is gone");
    }

    #[tokio::test]
    async fn a_write_waits_for_room_and_nothing_is_lost() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (_a_read, mut a_write) = split(a).unwrap();
        let (mut b_read, _b_write) = split(b).unwrap();
        // Far more than a socket buffer holds: the writer must wait for room.
        let sent: Vec<u8> = (0..8_000_000u32).map(|i| (i % 251) as u8).collect();
        let expected = sent.clone();
        let writer = tokio::spawn(async move {
            a_write.write_all(&sent).await.unwrap();
            assert!(
                a_write.waiting.is_none(),
                "the registration outlived the wait"
            );
        });
        let mut got = Vec::with_capacity(expected.len());
        let mut buf = vec![0u8; 64 * 1024];
        while got.len() < expected.len() {
            let n = b_read.read(&mut buf).await.unwrap();
            assert!(n > 0, "ended early at {}", got.len());
            got.extend_from_slice(&buf[..n]);
        }
        writer.await.unwrap();
        assert!(got == expected, "bytes lost or reordered");
    }

    #[tokio::test]
    async fn writing_to_a_peer_that_left_is_an_error() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (_a_read, mut a_write) = split(a).unwrap();
        drop(b);
        let err = a_write.write_all(b"anyone?\n").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }
}
