//! Reading line-oriented recording files (jsonl, asciicast) with one policy
//! for damage: a bad line in the middle is an error naming the file and
//! line; a bad last line is a truncated file, played up to there.

use std::fmt::Display;

/// One line of a file, without its newline; `number` counts from 1.
pub struct Line<'a> {
    pub number: usize,
    pub bytes: &'a [u8],
    /// No non-blank line follows (a failure here is truncation, not malformation).
    pub is_last: bool,
}

impl Line<'_> {
    pub fn text(&self) -> Result<&str, String> {
        std::str::from_utf8(self.bytes)
            .map_err(|e| format!("not valid UTF-8 (at byte {})", e.valid_up_to()))
    }

    pub fn is_blank(&self) -> bool {
        self.bytes.iter().all(u8::is_ascii_whitespace)
    }
}

pub fn lines(bytes: &[u8]) -> Vec<Line<'_>> {
    let mut out: Vec<Line<'_>> = bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, bytes)| Line {
            number: i + 1,
            bytes: bytes.strip_suffix(b"\r").unwrap_or(bytes),
            is_last: false,
        })
        .collect();
    if let Some(last) = out
        .iter_mut()
        .rev()
        .find(|l| !l.bytes.iter().all(u8::is_ascii_whitespace))
    {
        last.is_last = true;
    }
    out
}

pub fn at_line(file: &str, line: usize, message: impl Display) -> anyhow::Error {
    anyhow::anyhow!("{file}:{line}: {message}")
}

/// What to do with a line that failed to parse: `Ok(Some(damage))` to stop
/// and play what came before, or the error.
pub fn damaged(file: &str, line: &Line<'_>, message: impl Display) -> anyhow::Result<String> {
    if line.is_last {
        Ok(format!(
            "{file}:{}: {message} (the file looks truncated; playing up to there)",
            line.number
        ))
    } else {
        Err(at_line(file, line.number, message))
    }
}

/// Parses a JSON value from a line, with serde's message on failure.
pub fn json<T: serde::de::DeserializeOwned>(line: &Line<'_>) -> Result<T, String> {
    let text = line.text()?;
    serde_json::from_str(text).map_err(|e| e.to_string())
}
