//! The spawner's wire: frames (a little-endian u32 length, then JSON) on a
//! Unix stream socket, with descriptors passed beside a frame's first
//! bytes. The kernel hands descriptors over with the bytes they were sent
//! with, so a reader keeps them in arrival order and each message takes the
//! number its kind carries (`Spawn`: stdin, stdout, stderr; `Started`: the
//! command's pidfd).

use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use serde::{Deserialize, Serialize};

/// Frames larger than this are refused (a request line is at most 4 MiB).
pub const MAX_FRAME: usize = 16 * 1024 * 1024;
/// Descriptors one read may bring; more is a protocol error.
const MAX_FDS_PER_READ: usize = 8;

/// What the server asks of the spawner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ToSpawner {
    /// Start `argv` in `cwd` with exactly `env` (scrubbed by the spawner as
    /// the launcher would), in a process group of its own; three
    /// descriptors come with it: stdin, stdout, stderr.
    Spawn {
        id: u64,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        cwd: PathBuf,
    },
}

/// What the spawner tells the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FromSpawner {
    /// It serves requests (sent once, first).
    Ready,
    /// The command runs; its pidfd comes with this message.
    Started { id: u64 },
    /// The command could not start (`not_found`: no such program).
    Failed {
        id: u64,
        message: String,
        not_found: bool,
    },
    /// The command's process ended (its exit code, or the signal it died of).
    Exited {
        id: u64,
        code: Option<i32>,
        signal: Option<i32>,
    },
}

impl ToSpawner {
    pub fn fds(&self) -> usize {
        match self {
            ToSpawner::Spawn { .. } => 3,
        }
    }
}

impl FromSpawner {
    pub fn fds(&self) -> usize {
        match self {
            FromSpawner::Started { .. } => 1,
            _ => 0,
        }
    }
}

/// A frame of `message`, ready to send.
pub fn encode<T: Serialize>(message: &T) -> io::Result<Vec<u8>> {
    let body = serde_json::to_vec(message).map_err(io::Error::other)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|n| (*n as usize) <= MAX_FRAME)
        .ok_or_else(|| io::Error::other(format!("a {}-byte frame is too large", body.len())))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// A frame on its way out: the descriptors go with the first bytes sent.
pub struct Outgoing {
    frame: Vec<u8>,
    sent: usize,
    fds: Vec<RawFd>,
}

impl Outgoing {
    /// `fds` must stay open until the frame is sent.
    pub fn new(frame: Vec<u8>, fds: Vec<RawFd>) -> Self {
        Outgoing {
            frame,
            sent: 0,
            fds,
        }
    }

    /// Sends what the socket takes; Ok(true) once all is sent. A
    /// non-blocking socket gives `WouldBlock` when it is full; call again.
    pub fn send(&mut self, socket: BorrowedFd<'_>) -> io::Result<bool> {
        while self.sent < self.frame.len() {
            let rest = [IoSlice::new(&self.frame[self.sent..])];
            let rights = [ControlMessage::ScmRights(&self.fds)];
            let control: &[ControlMessage] = if self.sent == 0 && !self.fds.is_empty() {
                &rights
            } else {
                &[]
            };
            // Blocks or not as the socket does.
            match sendmsg::<()>(
                socket.as_raw_fd(),
                &rest,
                control,
                MsgFlags::MSG_NOSIGNAL,
                None,
            ) {
                Ok(n) => self.sent += n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }
}

/// What one read takes at most.
const READ_CHUNK: usize = 64 * 1024;

/// Bytes and descriptors read from the socket, taken frame by frame.
#[derive(Default)]
pub struct Incoming {
    bytes: Vec<u8>,
    fds: VecDeque<OwnedFd>,
    /// The read buffer, kept: zeroing 64 KiB for every read was a tenth of
    /// a spawner's time under load.
    chunk: Vec<u8>,
}

impl Incoming {
    /// One read; Ok(false) at the end of the stream.
    pub fn fill(&mut self, socket: BorrowedFd<'_>) -> io::Result<bool> {
        if self.chunk.len() < READ_CHUNK {
            self.chunk.resize(READ_CHUNK, 0);
        }
        let chunk = &mut self.chunk;
        let mut space = nix::cmsg_space!([RawFd; MAX_FDS_PER_READ]);
        let (read, fds, truncated) = loop {
            let mut iov = [IoSliceMut::new(chunk)];
            match recvmsg::<()>(
                socket.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(msg) => {
                    let mut fds = Vec::new();
                    for cmsg in msg.cmsgs().map_err(io::Error::from)? {
                        if let ControlMessageOwned::ScmRights(rights) = cmsg {
                            fds.extend(rights);
                        }
                    }
                    break (msg.bytes, fds, msg.flags.contains(MsgFlags::MSG_CTRUNC));
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        // SAFETY: the kernel just gave us these descriptors; nobody else owns them.
        self.fds.extend(
            fds.into_iter()
                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
        );
        if truncated {
            return Err(io::Error::other(
                "more descriptors came than a message carries",
            ));
        }
        self.bytes.extend_from_slice(&self.chunk[..read]);
        Ok(read > 0)
    }

    /// The next whole frame and the descriptors that came with it (as many
    /// as `fds_of` says its message carries).
    pub fn next<T: for<'de> Deserialize<'de>>(
        &mut self,
        fds_of: impl Fn(&T) -> usize,
    ) -> io::Result<Option<(T, Vec<OwnedFd>)>> {
        let Some(head) = self.bytes.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if len > MAX_FRAME {
            return Err(io::Error::other(format!("a {len}-byte frame is too large")));
        }
        if self.bytes.len() < 4 + len {
            return Ok(None);
        }
        let message: T = serde_json::from_slice(&self.bytes[4..4 + len])
            .map_err(|e| io::Error::other(format!("a malformed message: {e}")))?;
        self.bytes.drain(..4 + len);
        let wanted = fds_of(&message);
        if self.fds.len() < wanted {
            return Err(io::Error::other(format!(
                "a message that carries {wanted} descriptors came with {}",
                self.fds.len()
            )));
        }
        Ok(Some((message, self.fds.drain(..wanted).collect())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    fn pair() -> (OwnedFd, OwnedFd) {
        socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        )
        .unwrap()
    }

    #[test]
    fn messages_and_their_descriptors_arrive_together() {
        let (a, b) = pair();
        let (mut pipe_read, pipe_write) = std::io::pipe().unwrap();
        let spawn = ToSpawner::Spawn {
            id: 7,
            argv: vec!["bash".into(), "-c".into(), "x".repeat(200_000)],
            env: vec![("A".into(), "b".into())],
            cwd: "/ws".into(),
        };
        let fds = vec![
            pipe_write.as_raw_fd(),
            pipe_write.as_raw_fd(),
            pipe_write.as_raw_fd(),
        ];
        // A frame larger than the socket's buffer: sent while read.
        let mut outgoing = Outgoing::new(encode(&spawn).unwrap(), fds);
        let mut incoming = Incoming::default();
        let got = loop {
            match outgoing.send(a.as_fd()) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
            assert!(incoming.fill(b.as_fd()).unwrap());
            if let Some(got) = incoming.next::<ToSpawner>(ToSpawner::fds).unwrap() {
                break got;
            }
        };
        assert_eq!(got.0, spawn);
        assert_eq!(got.1.len(), 3);
        drop(pipe_write);
        // Each received descriptor is the pipe's writing end.
        let mut first = std::fs::File::from(got.1.into_iter().next().unwrap());
        first.write_all(b"hi").unwrap();
        drop(first);
        let mut text = String::new();
        pipe_read.read_to_string(&mut text).unwrap();
        assert_eq!(text, "hi");
    }

    /// What the reader makes of `frame`, sent raw.
    fn read_back(frame: Vec<u8>) -> io::Result<Option<(FromSpawner, Vec<OwnedFd>)>> {
        let (a, b) = pair();
        assert!(Outgoing::new(frame, vec![]).send(a.as_fd()).unwrap());
        let mut incoming = Incoming::default();
        incoming.fill(b.as_fd()).unwrap();
        incoming.next::<FromSpawner>(FromSpawner::fds)
    }

    #[test]
    fn a_message_without_its_descriptors_or_too_large_is_an_error() {
        let started = encode(&FromSpawner::Started { id: 1 }).unwrap();
        let err = read_back(started).err().unwrap();
        assert!(err.to_string().contains("carries 1 descriptors"), "{err}");
        let err = read_back(u32::MAX.to_le_bytes().to_vec()).err().unwrap();
        assert!(err.to_string().contains("too large"), "{err}");
        let exited = FromSpawner::Exited {
            id: 2,
            code: Some(0),
            signal: None,
        };
        let (got, fds) = read_back(encode(&exited).unwrap()).unwrap().unwrap();
        assert_eq!((got, fds.len()), (exited, 0));

        let (a, b) = pair();
        drop(a);
        assert!(
            !Incoming::default().fill(b.as_fd()).unwrap(),
            "end of stream"
        );
    }
}
