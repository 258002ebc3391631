//! Instant seeking in long recordings: a vt100 screen snapshot every few
//! hundred KB of output, so reaching any moment replays at most one interval.
//!
//! Snapshots are clones of the whole `vt100::Screen`, not its
//! `state_formatted()` bytes: those lose the scroll region, the saved cursor
//! and the main screen behind an alternate screen, and a seek must show
//! exactly what playing from the start shows. They are only taken between
//! escape sequences (the parser's pending bytes cannot be copied).

use super::timeline::{Ms, TermEvent, TermKind, Track};

#[derive(Debug, Clone, Copy)]
pub struct KeyframePolicy {
    /// Output bytes between snapshots.
    pub every_bytes: usize,
    /// Events between snapshots (many tiny events cost time too).
    pub every_events: usize,
}

impl Default for KeyframePolicy {
    fn default() -> Self {
        KeyframePolicy {
            every_bytes: 256 * 1024,
            every_events: 4096,
        }
    }
}

struct Frame {
    /// Events applied to reach this screen.
    applied: usize,
    screen: vt100::Screen,
}

pub struct Keyframes {
    frames: Vec<Frame>,
}

impl Keyframes {
    pub fn build(track: &Track, policy: KeyframePolicy) -> Keyframes {
        let mut parser = new_parser(track);
        let mut frames = vec![Frame {
            applied: 0,
            screen: parser.screen().clone(),
        }];
        let mut escapes = EscapeTracker::default();
        let (mut bytes, mut events) = (0, 0);
        for (i, e) in track.events.iter().enumerate() {
            apply(&mut parser, e);
            if let TermKind::Output(data) = &e.kind {
                escapes.feed(data);
                bytes += data.len();
            }
            events += 1;
            let due = bytes >= policy.every_bytes || events >= policy.every_events;
            if due && escapes.at_rest() {
                frames.push(Frame {
                    applied: i + 1,
                    screen: parser.screen().clone(),
                });
                (bytes, events) = (0, 0);
            }
        }
        Keyframes { frames }
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The last snapshot with at most `n` events applied.
    fn before(&self, n: usize) -> Option<&Frame> {
        let i = self.frames.partition_point(|f| f.applied <= n);
        i.checked_sub(1).map(|i| &self.frames[i])
    }
}

/// A track's screen at some event, moved by seeking.
pub struct TrackScreen {
    parser: vt100::Parser,
    applied: usize,
}

impl TrackScreen {
    pub fn new(track: &Track) -> TrackScreen {
        TrackScreen {
            parser: new_parser(track),
            applied: 0,
        }
    }

    pub fn screen(&self) -> &vt100::Screen {
        self.parser.screen()
    }

    /// Events applied so far.
    pub fn applied(&self) -> usize {
        self.applied
    }

    /// Shows the screen after the first `n` events.
    pub fn seek(&mut self, track: &Track, keys: &Keyframes, n: usize) {
        let n = n.min(track.events.len());
        if n == self.applied {
            return;
        }
        if let Some(frame) = keys.before(n)
            && (n < self.applied || frame.applied > self.applied)
        {
            *self.parser.screen_mut() = frame.screen.clone();
            self.applied = frame.applied;
        } else if n < self.applied {
            // No snapshot at all (an empty index): start over.
            self.parser = new_parser(track);
            self.applied = 0;
        }
        for e in &track.events[self.applied..n] {
            apply(&mut self.parser, e);
        }
        self.applied = n;
    }

    /// Shows the screen at time `t` (every event at or before it applied).
    pub fn seek_time(&mut self, track: &Track, keys: &Keyframes, t: Ms) {
        self.seek(track, keys, track.count_at(t));
    }
}

/// The largest screen a recording may ask for: a file that says 65535×65535
/// would otherwise take gigabytes per keyframe. Larger sizes are cut to it.
pub const MAX_COLS: u16 = 1000;
pub const MAX_ROWS: u16 = 500;

/// `(rows, cols)` for vt100, within 1..=MAX.
fn screen_size(cols: u16, rows: u16) -> (u16, u16) {
    (rows.clamp(1, MAX_ROWS), cols.clamp(1, MAX_COLS))
}

fn new_parser(track: &Track) -> vt100::Parser {
    let (rows, cols) = screen_size(track.cols, track.rows);
    // No scrollback: the player shows the recorded screen, as asciinema does.
    vt100::Parser::new(rows, cols, 0)
}

fn apply(parser: &mut vt100::Parser, event: &TermEvent) {
    match &event.kind {
        TermKind::Output(data) => parser.process(data),
        TermKind::Resize { cols, rows } => {
            let (rows, cols) = screen_size(*cols, *rows);
            parser.screen_mut().set_size(rows, cols)
        }
        TermKind::Input(_) | TermKind::Exit(_) => {}
    }
}

/// The screen after playing a track from the start to `t` (for tests and checks).
pub fn screen_at(track: &Track, t: Ms) -> vt100::Screen {
    let mut parser = new_parser(track);
    for e in &track.events[..track.count_at(t)] {
        apply(&mut parser, e);
    }
    parser.screen().clone()
}

/// Follows just enough of the escape-sequence grammar to know when the
/// parser holds no half-read sequence (or half a UTF-8 character).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum EscapeState {
    #[default]
    Ground,
    Utf8(u8),
    Escape,
    EscapeIntermediate,
    Csi,
    /// OSC, DCS, SOS, PM, APC: until BEL or ESC \.
    Text,
    TextEscape,
}

#[derive(Debug, Default)]
struct EscapeTracker {
    state: EscapeState,
}

impl EscapeTracker {
    fn at_rest(&self) -> bool {
        self.state == EscapeState::Ground
    }

    fn feed(&mut self, data: &[u8]) {
        for &b in data {
            self.state = next_state(self.state, b);
        }
    }
}

fn next_state(state: EscapeState, b: u8) -> EscapeState {
    use EscapeState::*;
    const ESC: u8 = 0x1b;
    // CAN and SUB abort any sequence.
    if matches!(b, 0x18 | 0x1a) && !matches!(state, Text | TextEscape) {
        return Ground;
    }
    match state {
        Ground => match b {
            ESC => Escape,
            0xC2..=0xDF => Utf8(1),
            0xE0..=0xEF => Utf8(2),
            0xF0..=0xF4 => Utf8(3),
            _ => Ground,
        },
        Utf8(left) => match b {
            0x80..=0xBF if left > 1 => Utf8(left - 1),
            0x80..=0xBF => Ground,
            _ => next_state(Ground, b),
        },
        Escape => match b {
            b'[' => Csi,
            b']' | b'P' | b'X' | b'^' | b'_' => Text,
            0x20..=0x2F => EscapeIntermediate,
            ESC => Escape,
            _ => Ground,
        },
        EscapeIntermediate => match b {
            0x20..=0x2F => EscapeIntermediate,
            ESC => Escape,
            _ => Ground,
        },
        Csi => match b {
            0x40..=0x7E => Ground,
            ESC => Escape,
            _ => Csi,
        },
        Text => match b {
            0x07 => Ground,
            ESC => TextEscape,
            _ => Text,
        },
        TextEscape => match b {
            b'\\' => Ground,
            _ => next_state(Escape, b),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn track_of(pieces: &[&[u8]]) -> Track {
        let mut track = Track::new(None, "t", 20, 5);
        track.events = pieces
            .iter()
            .enumerate()
            .map(|(i, p)| TermEvent {
                t: i as Ms * 10,
                kind: TermKind::Output(p.to_vec()),
            })
            .collect();
        track
    }

    fn same(a: &vt100::Screen, b: &vt100::Screen) -> bool {
        a.contents_formatted() == b.contents_formatted()
            && a.cursor_position() == b.cursor_position()
    }

    #[test]
    fn seeking_anywhere_shows_what_playing_from_the_start_shows() {
        let pieces: Vec<Vec<u8>> = (0..300)
            .map(|i| match i % 7 {
                0 => b"\x1b[3".to_vec(), // a sequence split across events
                1 => b"1mred\x1b[0m ".to_vec(),
                2 => format!("line {i}\r\n").into_bytes(),
                3 => b"\x1b[?1049h\x1b[2;3Halt".to_vec(),
                4 => b"\x1b[?1049l\xc3".to_vec(), // half a character
                5 => b"\xa9\x1b]0;title\x07".to_vec(),
                _ => b"\x1b[2;4r\x1b[4;1Hscrolled\n\n\n".to_vec(),
            })
            .collect();
        let refs: Vec<&[u8]> = pieces.iter().map(|p| p.as_slice()).collect();
        let track = track_of(&refs);
        let keys = Keyframes::build(
            &track,
            KeyframePolicy {
                every_bytes: 40,
                every_events: 5,
            },
        );
        assert!(keys.len() > 20, "{} keyframes", keys.len());
        let mut screen = TrackScreen::new(&track);
        let mut n = 17usize;
        for _ in 0..200 {
            n = (n * 7919 + 13) % (track.events.len() + 1);
            screen.seek(&track, &keys, n);
            let t = if n == 0 { 0 } else { track.events[n - 1].t };
            let expected = screen_at(&track, t);
            assert!(same(screen.screen(), &expected), "after seeking to {n}");
        }
    }

    #[test]
    fn the_escape_tracker_knows_a_sequence_is_open() {
        let mut tracker = EscapeTracker::default();
        for (bytes, rest) in [
            (&b"plain"[..], true),
            (b"\x1b[3", false),
            (b"1m", true),
            (b"\x1b]0;ti", false),
            (b"tle\x1b\\", true),
            (b"\xe2\x82", false),
            (b"\xac", true),
        ] {
            tracker.feed(bytes);
            assert_eq!(tracker.at_rest(), rest, "after {bytes:?}");
        }
    }

    #[test]
    fn a_recording_cannot_ask_for_a_giant_screen() {
        let mut track = Track::new(None, "huge", 65535, 65535);
        track.events.push(TermEvent {
            t: 1,
            kind: TermKind::Resize {
                cols: 65535,
                rows: 65535,
            },
        });
        track.events.push(TermEvent {
            t: 2,
            kind: TermKind::Output(b"hi".to_vec()),
        });
        let screen = screen_at(&track, 2);
        assert_eq!(screen.size(), (MAX_ROWS, MAX_COLS));
        assert!(screen.contents().starts_with("hi"));
    }
}
