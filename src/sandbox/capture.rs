//! Bounded capture of a child's output pipe: keep the head, count the rest,
//! and keep draining so the child never blocks on a full pipe.

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;
use tokio::time::Instant;

/// The first `limit` bytes of a stream, and whether anything was dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BoundedBuffer {
    limit: usize,
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

impl BoundedBuffer {
    pub fn new(limit: usize) -> Self {
        BoundedBuffer {
            limit,
            bytes: Vec::new(),
            truncated: false,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        let room = self.limit.saturating_sub(self.bytes.len());
        let keep = room.min(chunk.len());
        self.bytes.extend_from_slice(&chunk[..keep]);
        if keep < chunk.len() {
            self.truncated = true;
        }
    }

    pub fn into_lossy_string(self) -> (String, bool) {
        (
            String::from_utf8_lossy(&self.bytes).into_owned(),
            self.truncated,
        )
    }
}

/// Tells readers when to give up on a pipe that stays open (a grandchild that
/// escaped the process group still holds it): `Some(deadline)` once the main
/// process is gone.
pub(crate) type StopAt = watch::Receiver<Option<Instant>>;

/// Reads `reader` to EOF into a bounded buffer, or until the stop deadline.
/// Data already in the pipe wins over the deadline.
pub(crate) async fn capture<R: AsyncRead + Unpin>(
    mut reader: R,
    limit: usize,
    mut stop: StopAt,
) -> BoundedBuffer {
    let mut buffer = BoundedBuffer::new(limit);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            biased;
            read = reader.read(&mut chunk) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => buffer.push(&chunk[..n]),
            },
            _ = stop_deadline(&mut stop) => break,
        }
    }
    buffer
}

/// Resolves once an announced deadline has passed, or at once if the sender
/// went away (the exec was cancelled, so nobody wants the output).
async fn stop_deadline(stop: &mut StopAt) {
    let deadline = match stop.wait_for(Option::is_some).await {
        Ok(value) => *value,
        Err(_) => None,
    };
    if let Some(at) = deadline {
        tokio::time::sleep_until(at).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_head_and_marks_truncation() {
        let mut buffer = BoundedBuffer::new(5);
        buffer.push(b"abc");
        assert!(!buffer.truncated);
        buffer.push(b"defg");
        buffer.push(b"h");
        assert_eq!(buffer.bytes, b"abcde");
        assert!(buffer.truncated);
    }

    #[test]
    fn exact_fit_is_not_truncated() {
        let mut buffer = BoundedBuffer::new(3);
        buffer.push(b"abc");
        buffer.push(b"");
        assert!(!buffer.truncated);
    }

    #[test]
    fn zero_limit_keeps_nothing() {
        let mut buffer = BoundedBuffer::new(0);
        buffer.push(b"x");
        assert_eq!(buffer.into_lossy_string(), (String::new(), true));
    }

    #[tokio::test]
    async fn stops_when_the_sender_is_gone() {
        let (_keep_open, reader) = tokio::io::duplex(64);
        let (tx, rx) = watch::channel(None);
        drop(tx);
        let buffer =
            tokio::time::timeout(std::time::Duration::from_secs(5), capture(reader, 10, rx))
                .await
                .unwrap();
        assert!(buffer.bytes.is_empty());
    }

    #[tokio::test]
    async fn reads_to_eof() {
        let (_tx, rx) = watch::channel(None);
        let data: &[u8] = b"hello world";
        let buffer = capture(data, 5, rx).await;
        assert_eq!(buffer.bytes, b"hello");
        assert!(buffer.truncated);
    }

    #[tokio::test]
    async fn gives_up_on_a_pipe_that_stays_open() {
        let (_keep_open, reader) = tokio::io::duplex(64);
        let (tx, rx) = watch::channel(None);
        let task = tokio::spawn(capture(reader, 10, rx));
        tx.send_replace(Some(Instant::now() + std::time::Duration::from_millis(20)));
        let buffer = tokio::time::timeout(std::time::Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
        assert!(buffer.bytes.is_empty());
    }
}
