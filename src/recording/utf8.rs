//! Turning a byte stream cut at arbitrary points into valid UTF-8 text
//! pieces: asciicast events must be valid strings, but PTY reads split
//! multi-byte characters, so an incomplete tail waits for the next piece.

#[derive(Debug, Default)]
pub struct Utf8Stream {
    carry: Vec<u8>,
}

impl Utf8Stream {
    /// The text of `bytes` (after what was carried), keeping back an
    /// incomplete trailing character. Invalid bytes become U+FFFD.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        let mut data = std::mem::take(&mut self.carry);
        data.extend_from_slice(bytes);
        let keep = incomplete_tail(&data);
        self.carry = data.split_off(data.len() - keep);
        String::from_utf8_lossy(&data).into_owned()
    }

    /// Whatever is still carried (an incomplete character at the very end).
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.carry);
        String::from_utf8_lossy(&rest).into_owned()
    }
}

/// Length of a trailing, possibly-valid but incomplete UTF-8 sequence.
fn incomplete_tail(data: &[u8]) -> usize {
    // A character is at most 4 bytes, so look at the last 3 for its lead byte.
    for back in 1..=data.len().min(3) {
        let b = data[data.len() - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: keep looking for the lead
        }
        let needed = match b {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return 0,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_characters_are_carried_to_the_next_piece() {
        let text = "héllo €uro 😀!";
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            let mut s = Utf8Stream::default();
            let a = s.push(&bytes[..cut]);
            let b = s.push(&bytes[cut..]);
            let c = s.finish();
            assert_eq!(format!("{a}{b}{c}"), text, "cut at {cut}");
            assert!(!a.contains('\u{FFFD}'), "cut at {cut}: {a:?}");
        }
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut s = Utf8Stream::default();
        assert_eq!(s.push(b"a\xffb"), "a\u{FFFD}b");
        assert_eq!(s.push(b"\xe2\x82"), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }
}
