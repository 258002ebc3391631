//! Bounded capture of scorer output, and tracking of the final stdout line.
//!
//! A scorer may print gigabytes; we keep the head and the tail (where errors
//! and the result usually are) and count what was dropped in between. The
//! result line is tracked separately so truncation can never hide it.

use std::collections::VecDeque;

/// Keeps the first and last bytes of a stream, within a total byte budget.
pub(crate) struct BoundedOutput {
    limit: usize,
    head: Vec<u8>,
    /// The last `limit` bytes seen (may overlap `head` while the stream is short).
    tail: VecDeque<u8>,
    total: u64,
}

impl BoundedOutput {
    pub(crate) fn new(limit: usize) -> Self {
        BoundedOutput {
            limit,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let head_room = self.limit.saturating_sub(self.head.len());
        self.head
            .extend_from_slice(&chunk[..head_room.min(chunk.len())]);
        // Only the last `limit` bytes of a chunk can matter for the tail.
        let tail_part = &chunk[chunk.len().saturating_sub(self.limit)..];
        self.tail.extend(tail_part);
        let excess = self.tail.len().saturating_sub(self.limit);
        self.tail.drain(..excess);
    }

    /// Lossy UTF-8 text of at most `limit` bytes, with a marker line where bytes were cut.
    pub(crate) fn into_text(self) -> String {
        if self.total <= self.limit as u64 {
            return fit_to_limit(String::from_utf8_lossy(&self.head).into_owned(), self.limit);
        }
        // The marker's length depends on the dropped count, which is at most `total`.
        let widest_marker = truncation_marker(self.total);
        let room = self.limit.saturating_sub(widest_marker.len());
        let head_len = room / 2;
        let tail_len = room - head_len;
        let dropped = self.total - (head_len + tail_len) as u64;
        let tail_bytes: Vec<u8> = self
            .tail
            .iter()
            .skip(self.tail.len().saturating_sub(tail_len))
            .copied()
            .collect();
        let mut text = String::from_utf8_lossy(&self.head[..head_len]).into_owned();
        text.push_str(&truncation_marker(dropped));
        text.push_str(&String::from_utf8_lossy(&tail_bytes));
        fit_to_limit(text, self.limit)
    }
}

fn truncation_marker(dropped: u64) -> String {
    format!("\n[... {dropped} bytes truncated ...]\n")
}

/// Lossy decoding can grow invalid bytes into 3-byte U+FFFD; re-trim so the
/// byte budget holds for the text we actually return.
fn fit_to_limit(mut text: String, limit: usize) -> String {
    if text.len() > limit {
        let mut cut = limit;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// Longest final line we buffer; a result line longer than this is rejected.
pub(crate) const LAST_LINE_LIMIT: usize = 1024 * 1024;

/// What the stream's last non-blank line was.
#[derive(Debug, Clone, PartialEq)]
pub enum LastLine {
    /// Nothing but whitespace was printed.
    Empty,
    /// The line, trimmed of surrounding whitespace (including `\r`).
    Line(String),
    /// The last line exceeded [`LAST_LINE_LIMIT`] bytes.
    TooLong,
}

/// Finds the last non-blank line of a stream fed in arbitrary chunks.
#[derive(Default)]
pub(crate) struct LastLineTracker {
    /// Bytes after the last newline (the line still being written).
    current: Vec<u8>,
    current_too_long: bool,
    /// The last complete non-blank line.
    last_complete: Option<Vec<u8>>,
    last_complete_too_long: bool,
}

impl LastLineTracker {
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
            self.append_to_current(&rest[..newline]);
            self.end_line();
            rest = &rest[newline + 1..];
        }
        self.append_to_current(rest);
    }

    pub(crate) fn finish(mut self) -> LastLine {
        self.end_line();
        match self.last_complete {
            _ if self.last_complete_too_long => LastLine::TooLong,
            None => LastLine::Empty,
            Some(bytes) => LastLine::Line(String::from_utf8_lossy(&bytes).trim().to_string()),
        }
    }

    fn append_to_current(&mut self, bytes: &[u8]) {
        if self.current_too_long {
            return;
        }
        if self.current.len() + bytes.len() > LAST_LINE_LIMIT {
            self.current_too_long = true;
            self.current.clear();
            return;
        }
        self.current.extend_from_slice(bytes);
    }

    fn end_line(&mut self) {
        let too_long = std::mem::take(&mut self.current_too_long);
        let blank = self.current.iter().all(u8::is_ascii_whitespace);
        if too_long || !blank {
            self.last_complete = Some(std::mem::take(&mut self.current));
            self.last_complete_too_long = too_long;
        }
        self.current.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_line_of(chunks: &[&[u8]]) -> LastLine {
        let mut tracker = LastLineTracker::default();
        for chunk in chunks {
            tracker.push(chunk);
        }
        tracker.finish()
    }

    #[test]
    fn last_line_across_chunks_and_blank_lines() {
        assert_eq!(last_line_of(&[]), LastLine::Empty);
        assert_eq!(last_line_of(&[b"\n \n\r\n"]), LastLine::Empty);
        assert_eq!(last_line_of(&[b"a\nb"]), LastLine::Line("b".into()));
        assert_eq!(
            last_line_of(&[b"a\n{\"ra", b"w\": 1}\r\n\n  \n"]),
            LastLine::Line("{\"raw\": 1}".into())
        );
        assert_eq!(
            last_line_of(&[b"x\n", b"\n", b"y", b"z\n"]),
            LastLine::Line("yz".into())
        );
    }

    #[test]
    fn overlong_last_line_is_flagged_but_earlier_ones_are_forgotten() {
        let long = vec![b'x'; LAST_LINE_LIMIT + 1];
        assert_eq!(last_line_of(&[&long]), LastLine::TooLong);
        assert_eq!(
            last_line_of(&[&long, b"\nok\n"]),
            LastLine::Line("ok".into())
        );
    }

    #[test]
    fn short_output_is_kept_whole() {
        let mut out = BoundedOutput::new(100);
        out.push(b"hello ");
        out.push(b"world");
        assert_eq!(out.into_text(), "hello world");
    }

    #[test]
    fn long_output_keeps_head_and_tail_within_limit() {
        let mut out = BoundedOutput::new(100);
        out.push(b"HEAD");
        for _ in 0..1000 {
            out.push(&[b'.'; 37]);
        }
        out.push(b"TAIL");
        let text = out.into_text();
        assert!(text.len() <= 100, "{}", text.len());
        assert!(text.starts_with("HEAD"), "{text}");
        assert!(text.ends_with("TAIL"), "{text}");
        assert!(text.contains(" bytes truncated ...]"), "{text}");
        let kept = text.len() - text.lines().nth(1).unwrap().len() - 2;
        let dropped: usize = text
            .split("[... ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(kept + dropped, 4 + 37 * 1000 + 4);
    }

    #[test]
    fn tiny_limit_and_invalid_utf8_stay_within_budget() {
        for limit in [0, 1, 5, 40] {
            let mut out = BoundedOutput::new(limit);
            out.push(&[0xff; 300]);
            assert!(out.into_text().len() <= limit);
        }
        let mut out = BoundedOutput::new(4);
        out.push(&[0xff, 0xff]);
        assert!(out.into_text().len() <= 4);
    }
}
