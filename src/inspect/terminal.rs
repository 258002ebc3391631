//! A human's terminal as tool-call-like turns: each line typed and sent
//! with Enter, with the output that followed it until the next Enter.
//! Keystrokes are taken as typed, with backspace applied and escape
//! sequences (arrows, colours) dropped, so a line edited with the arrow
//! keys or typed into a full-screen program reads approximately.

use chrono::{DateTime, Utc};

use crate::recording::session_data::RecordedChunk;
use crate::store::ChunkKind;

/// Longest output kept per turn (its end, where the result is).
const OUTPUT_LIMIT: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub shell: u32,
    pub at: DateTime<Utc>,
    pub active_ms: u64,
    /// What was typed, or None where keystrokes were not recorded (the output only).
    pub input: Option<String>,
    pub output: String,
    pub output_cut: bool,
    /// Active time until the next turn began (or the shell's end).
    pub duration_ms: u64,
}

/// The turns of every shell in `chunks` (in shell, then time order).
pub fn turns(chunks: &[RecordedChunk]) -> Vec<Turn> {
    let mut out = Vec::new();
    let mut shells: Vec<u32> = chunks.iter().map(|c| c.shell).collect();
    shells.dedup();
    for shell in shells {
        let mine: Vec<&RecordedChunk> = chunks.iter().filter(|c| c.shell == shell).collect();
        out.extend(shell_turns(shell, &mine));
    }
    out
}

fn shell_turns(shell: u32, chunks: &[&RecordedChunk]) -> Vec<Turn> {
    let typed_anything = chunks.iter().any(|c| c.kind == ChunkKind::Input);
    let mut turns: Vec<Turn> = Vec::new();
    let mut line = String::new();
    let mut output: Vec<u8> = Vec::new();
    let mut open: Option<Turn> = None;
    let close =
        |open: &mut Option<Turn>, output: &mut Vec<u8>, end_ms: u64, turns: &mut Vec<Turn>| {
            if let Some(mut turn) = open.take() {
                (turn.output, turn.output_cut) = plain_text(output);
                turn.duration_ms = end_ms.saturating_sub(turn.active_ms);
                turns.push(turn);
            }
            output.clear();
        };
    if !typed_anything && let Some(first) = chunks.first() {
        open = Some(Turn {
            shell,
            at: first.at,
            active_ms: first.active_ms,
            input: None,
            output: String::new(),
            output_cut: false,
            duration_ms: 0,
        });
    }
    for chunk in chunks {
        match chunk.kind {
            ChunkKind::Output => output.extend_from_slice(&chunk.data),
            ChunkKind::Input => {
                let text = String::from_utf8_lossy(&chunk.data);
                let mut chars = text.chars().peekable();
                while let Some(c) = chars.next() {
                    match c {
                        '\r' | '\n' => {
                            close(&mut open, &mut output, chunk.active_ms, &mut turns);
                            open = Some(Turn {
                                shell,
                                at: chunk.at,
                                active_ms: chunk.active_ms,
                                input: Some(std::mem::take(&mut line)),
                                output: String::new(),
                                output_cut: false,
                                duration_ms: 0,
                            });
                        }
                        '\u{7f}' | '\u{8}' => {
                            line.pop();
                        }
                        '\u{1b}' => skip_escape(&mut chars),
                        '\u{3}' => line.push_str("^C"),
                        '\u{4}' => line.push_str("^D"),
                        c if c.is_control() => {}
                        c => line.push(c),
                    }
                }
            }
            ChunkKind::Exit | ChunkKind::Resize => {}
        }
    }
    let end = chunks.last().map_or(0, |c| c.active_ms);
    close(&mut open, &mut output, end, &mut turns);
    turns
}

/// Skips the rest of an escape sequence: CSI (`ESC [ … final`), OSC
/// (`ESC ] … BEL` or `ESC \`), or a two-character one.
fn skip_escape(chars: &mut std::iter::Peekable<impl Iterator<Item = char>>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        }
        Some(']') => {
            while let Some(c) = chars.next() {
                if c == '\u{7}' {
                    break;
                }
                if c == '\u{1b}' {
                    chars.next();
                    break;
                }
            }
        }
        Some('O') => {
            chars.next();
        }
        _ => {}
    }
}

/// Terminal output as plain text: escape sequences dropped, line ends
/// made `\n`, the end kept when it is long (and whether it was cut).
pub fn plain_text(bytes: &[u8]) -> (String, bool) {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            '\r' => {
                if chars.peek() != Some(&'\n') {
                    out.push('\n');
                }
            }
            '\u{8}' => {
                out.pop();
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    if out.len() <= OUTPUT_LIMIT {
        return (out, false);
    }
    let mut start = out.len() - OUTPUT_LIMIT;
    while !out.is_char_boundary(start) {
        start += 1;
    }
    (format!("…{}", &out[start..]), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(kind: ChunkKind, ms: u64, data: &[u8]) -> RecordedChunk {
        RecordedChunk {
            shell: 1,
            seq: ms,
            kind,
            at: DateTime::from_timestamp(1_700_000_000, 0).unwrap()
                + chrono::Duration::milliseconds(ms as i64),
            active_ms: ms,
            data: data.to_vec(),
        }
    }

    #[test]
    fn each_enter_is_a_turn_with_the_output_that_followed() {
        let chunks = vec![
            chunk(ChunkKind::Output, 0, b"\x1b[32m$\x1b[0m "),
            chunk(ChunkKind::Input, 100, b"ech"),
            chunk(ChunkKind::Input, 200, b"o hix\x7f\r"),
            chunk(ChunkKind::Output, 300, b"echo hi\r\nhi\r\n$ "),
            chunk(ChunkKind::Input, 1000, b"ls\x1b[A\x1b[D\r"),
            chunk(ChunkKind::Output, 1100, b"a  b\r\n$ "),
            chunk(ChunkKind::Exit, 1500, &0i32.to_be_bytes()),
        ];
        let turns = turns(&chunks);
        assert_eq!(turns.len(), 2, "{turns:?}");
        assert_eq!(turns[0].input.as_deref(), Some("echo hi"));
        assert_eq!(turns[0].output, "echo hi\nhi\n$ ");
        assert_eq!(turns[0].active_ms, 200);
        assert_eq!(turns[0].duration_ms, 800);
        assert_eq!(turns[1].input.as_deref(), Some("ls"));
        assert_eq!(turns[1].output, "a  b\n$ ");
        assert_eq!(turns[1].duration_ms, 500);
    }

    #[test]
    fn without_recorded_keystrokes_the_output_is_one_turn() {
        let chunks = vec![
            chunk(ChunkKind::Output, 0, b"$ "),
            chunk(ChunkKind::Output, 50, b"hello\r\n"),
        ];
        let turns = turns(&chunks);
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0].input, None);
        assert_eq!(turns[0].output, "$ hello\n");
    }

    #[test]
    fn long_output_keeps_its_end() {
        let long = "x".repeat(OUTPUT_LIMIT + 10) + "END";
        let (text, cut) = plain_text(long.as_bytes());
        assert!(cut);
        assert!(text.ends_with("END") && text.starts_with('…'));
        assert!(text.len() <= OUTPUT_LIMIT + '…'.len_utf8());
    }
}
