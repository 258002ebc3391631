//! Feeding a vt100 screen a flood without paying for lines nobody will see.
//!
//! vt100 allocates a new row for every line that scrolls (and frees one
//! falling off the scrollback): in a flood of short lines that is most of
//! the parser's time. When a chunk of output is plain text (printable
//! characters, CR and LF, in the parser's ground state), the lines in it
//! that are followed by more than a screen and a scrollback of lines
//! would scroll out of both before anyone could look: they are left out,
//! and the screen and its scrollback come out exactly as if they had been
//! processed. The recording always keeps every byte; this is only the
//! live screen.

/// Where vt100's escape parser stands, as far as it matters here: `Ground`
/// only when the parser surely is in its ground state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Escape {
    #[default]
    Ground,
    /// After ESC.
    Esc,
    /// After ESC and intermediate bytes.
    EscIntermediate,
    /// A control sequence (CSI), ended by a final byte.
    Csi,
    /// An operating system command (OSC), ended by BEL or ST.
    Osc,
    /// DCS, SOS, PM or APC: ended by ST (ESC \) only, as far as we count.
    String,
}

/// Cancel and substitute end every sequence.
const CAN: u8 = 0x18;
const SUB: u8 = 0x1a;
const ESC: u8 = 0x1b;

impl Escape {
    /// The state after `byte`. Never `Ground` where vte is not; where in
    /// doubt (vte's 8-bit string terminator) it stays out of `Ground`.
    fn next(self, byte: u8) -> Escape {
        use Escape::*;
        match (self, byte) {
            (Ground, ESC) => Esc,
            (Ground, _) => Ground,
            (_, CAN | SUB) => Ground,
            (_, ESC) => Esc,
            (Esc, 0x20..=0x2f) => EscIntermediate,
            (Esc, b'P') => String,
            (Esc, b'X' | b'^' | b'_') => String,
            (Esc, b'[') => Csi,
            (Esc, b']') => Osc,
            (Esc | EscIntermediate, 0x30..=0x7e) => Ground,
            (Csi, 0x40..=0x7e) => Ground,
            (Osc, 0x07) => Ground,
            (state, _) => state,
        }
    }
}

/// Feeds one screen; keeps what it must know about the bytes fed so far.
#[derive(Debug, Default)]
pub struct ScreenFeed {
    escape: Escape,
    /// The last chunk ended inside a UTF-8 character.
    mid_char: bool,
}

impl ScreenFeed {
    /// Processes `bytes` on `parser`, whose scrollback holds
    /// `scrollback_lines` lines, leaving out plain lines that would scroll
    /// away unseen. Every chunk of a screen must come through here (or
    /// the feed must be `reset` with a new parser).
    pub fn process<C: vt100::Callbacks>(
        &mut self,
        parser: &mut vt100::Parser<C>,
        scrollback_lines: usize,
        bytes: &[u8],
    ) {
        let screen = parser.screen();
        // A viewer scrolled back counts scrolled lines: no skipping then.
        let skip = if self.escape == Escape::Ground && !self.mid_char && screen.scrollback() == 0 {
            unseen_prefix(bytes, usize::from(screen.size().0), scrollback_lines)
        } else {
            0
        };
        let rest = &bytes[skip..];
        parser.process(rest);
        self.escape = rest.iter().fold(self.escape, |state, &b| state.next(b));
        self.mid_char = ends_mid_char(rest).unwrap_or(self.mid_char);
    }

    /// Whether the parser surely waits for a new character or sequence
    /// (no escape sequence or character left open).
    pub fn at_rest(&self) -> bool {
        self.escape == Escape::Ground && !self.mid_char
    }

    /// For a new parser.
    pub fn reset(&mut self) {
        *self = ScreenFeed::default();
    }
}

/// How many leading bytes of `bytes` can be left out: they are plain text
/// ending at a line feed, and what follows them holds a carriage return
/// (from which on the cursor's column no longer depends on what came
/// before) and after it enough line feeds to push every row that existed
/// before (at most a screen's worth, reached after at most a screen's worth
/// of line feeds) out of the screen and then out of the scrollback.
fn unseen_prefix(bytes: &[u8], rows: usize, scrollback_lines: usize) -> usize {
    let needed = 2 * rows + scrollback_lines + 2;
    let mut feeds = 0;
    let mut i = bytes.len();
    // The needed line feeds, from the end.
    while feeds < needed {
        let Some(at) = bytes[..i].iter().rposition(|&b| b == b'\n') else {
            return 0;
        };
        feeds += 1;
        i = at;
    }
    // A carriage return before them, not in the chunk's first bytes (where
    // a character left open by the chunk before may still be taken).
    let Some(cr) = bytes[..i].iter().rposition(|&b| b == b'\r') else {
        return 0;
    };
    // The cut: after the line feed before that carriage return.
    let Some(lf) = bytes[..cr].iter().rposition(|&b| b == b'\n') else {
        return 0;
    };
    let cut = lf + 1;
    if cr < cut + 4 || !is_plain(&bytes[..cut]) {
        return 0;
    }
    cut
}

/// Printable characters, CR and LF only: text that moves the cursor and
/// fills cells, and nothing else (no controls, no escapes, no C1 codes).
fn is_plain(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    text.chars().all(|c| {
        c == '\r' || c == '\n' || (c >= ' ' && c != '\x7f' && !('\u{80}'..='\u{9f}').contains(&c))
    })
}

/// Whether `bytes` end inside a UTF-8 character (None: too short to say,
/// e.g. empty).
fn ends_mid_char(bytes: &[u8]) -> Option<bool> {
    for (back, &b) in bytes.iter().rev().take(4).enumerate() {
        let have = back + 1;
        match b {
            0x00..=0x7f => return Some(false),
            0x80..=0xbf => continue,
            0xc0..=0xdf => return Some(have < 2),
            0xe0..=0xef => return Some(have < 3),
            _ => return Some(have < 4),
        }
    }
    if bytes.is_empty() { None } else { Some(false) }
}

/// Every row of the screen and its scrollback, with attributes (tests
/// that compare screens use it).
#[cfg(test)]
pub(crate) fn everything(parser: &mut vt100::Parser) -> Vec<Vec<u8>> {
    let (rows, cols) = parser.screen().size();
    let mut out = vec![parser.screen().state_formatted()];
    parser.screen_mut().set_scrollback(usize::MAX);
    let depth = parser.screen().scrollback();
    for offset in (0..=depth).rev() {
        parser.screen_mut().set_scrollback(offset);
        out.extend(
            parser
                .screen()
                .rows_formatted(0, cols)
                .take(usize::from(rows)),
        );
    }
    parser.screen_mut().set_scrollback(0);
    out.push(format!("{depth}").into_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same chunks through a feed and straight into vt100.
    fn compare(rows: u16, cols: u16, scrollback: usize, chunks: &[Vec<u8>]) -> usize {
        let mut fed = vt100::Parser::new(rows, cols, scrollback);
        let mut plain = vt100::Parser::new(rows, cols, scrollback);
        let mut feed = ScreenFeed::default();
        let mut skipped = 0;
        for chunk in chunks {
            skipped += unseen_prefix_if(&feed, &fed, scrollback, chunk);
            feed.process(&mut fed, scrollback, chunk);
            plain.process(chunk);
            assert_eq!(
                fed.screen().cursor_position(),
                plain.screen().cursor_position()
            );
        }
        assert_eq!(everything(&mut fed), everything(&mut plain));
        skipped
    }

    fn unseen_prefix_if(
        feed: &ScreenFeed,
        parser: &vt100::Parser,
        sb: usize,
        chunk: &[u8],
    ) -> usize {
        if feed.escape == Escape::Ground && !feed.mid_char {
            unseen_prefix(chunk, usize::from(parser.screen().size().0), sb)
        } else {
            0
        }
    }

    fn seq(from: usize, to: usize, end: &str) -> Vec<u8> {
        (from..to)
            .map(|i| format!("{i}{end}"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn a_flood_skips_most_lines_and_the_screen_is_the_same() {
        let chunks: Vec<Vec<u8>> = (0..20)
            .map(|c| seq(c * 500, c * 500 + 500, "\r\n"))
            .collect();
        let skipped = compare(10, 30, 100, &chunks);
        assert!(skipped > 20 * 500 * 3, "skipped only {skipped} bytes");
    }

    #[test]
    fn long_lines_wrap_and_escapes_around_the_flood_count() {
        let mut chunks = vec![b"\x1b[31mred\x1b[m \x1b]0;title\x07\x1b[5;3H".to_vec()];
        chunks.push(
            (0..400)
                .map(|i| format!("{}\r\n", "x".repeat(i % 70)))
                .collect::<String>()
                .into_bytes(),
        );
        chunks.push(b"\x1b[2J\x1b[Htop\r\n".to_vec());
        chunks.push(seq(0, 600, "\r\n"));
        chunks.push("wide 漢字 ünï\r\n".repeat(300).into_bytes());
        assert!(compare(8, 20, 50, &chunks) > 0);
    }

    #[test]
    fn nothing_is_skipped_inside_an_escape_sequence() {
        // An OSC left open absorbs the flood: the title must come out alike.
        let chunks = vec![b"\x1b]2;".to_vec(), seq(0, 500, "\r\n"), b"\x07".to_vec()];
        assert_eq!(compare(5, 20, 10, &chunks), 0);
        // A CSI left open takes the digits as parameters.
        let chunks = vec![b"\x1b[".to_vec(), seq(0, 500, "\r\n"), b"m".to_vec()];
        assert_eq!(compare(5, 20, 10, &chunks), 0);
    }

    #[test]
    fn line_feeds_without_carriage_returns_keep_their_column() {
        // No CR: the column carries over from before, so nothing is left out.
        let chunks = vec![b"abc".to_vec(), seq(0, 500, "\n")];
        assert_eq!(compare(5, 20, 10, &chunks), 0);
    }

    #[test]
    fn a_character_split_across_chunks_is_kept_whole() {
        let text = "ü\r\n".repeat(200).into_bytes();
        let (a, b) = text.split_at(1);
        let chunks = vec![a.to_vec(), b.to_vec(), seq(0, 300, "\r\n")];
        compare(5, 20, 10, &chunks);
        let feed_mid = ends_mid_char(a);
        assert_eq!(feed_mid, Some(true));
        assert_eq!(ends_mid_char("aü".as_bytes()), Some(false));
        assert_eq!(ends_mid_char(&"漢".as_bytes()[..2]), Some(true));
    }

    #[test]
    fn a_scrolled_back_viewer_sees_every_line() {
        let mut parser = vt100::Parser::new(5, 20, 100);
        let mut feed = ScreenFeed::default();
        feed.process(&mut parser, 100, &seq(0, 50, "\r\n"));
        parser.screen_mut().set_scrollback(10);
        let mut plain = vt100::Parser::new(5, 20, 100);
        plain.process(&seq(0, 50, "\r\n"));
        plain.screen_mut().set_scrollback(10);
        let flood = seq(50, 2000, "\r\n");
        feed.process(&mut parser, 100, &flood);
        plain.process(&flood);
        assert_eq!(parser.screen().scrollback(), plain.screen().scrollback());
        assert_eq!(parser.screen().contents(), plain.screen().contents());
    }

    #[test]
    fn control_characters_are_not_plain() {
        assert!(is_plain(b"abc\r\n123 \xc3\xbc"));
        assert!(!is_plain(b"a\tb"));
        assert!(!is_plain(b"a\x07"));
        assert!(!is_plain("a\u{9b}".as_bytes()));
        assert!(!is_plain(b"\xff"));
    }
}
