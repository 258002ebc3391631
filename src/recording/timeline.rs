//! A recording as the player and the exporters see it: per-shell lists of
//! terminal events and one list of markers, all on one time axis (ms since
//! the recording's start), plus the session clock when the recording came
//! from a rebench session.

use chrono::{DateTime, Utc};

use crate::protocol::SessionView;

/// Milliseconds since the timeline's start.
pub type Ms = u64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TermKind {
    Output(Vec<u8>),
    Input(Vec<u8>),
    Resize { cols: u16, rows: u16 },
    Exit(i32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermEvent {
    pub t: Ms,
    pub kind: TermKind,
}

/// One terminal: a shell of a session, an agent's exec transcript, or the
/// single stream of an imported file.
#[derive(Debug, Clone, PartialEq)]
pub struct Track {
    /// The session's shell number, if it is one.
    pub shell: Option<u32>,
    pub label: String,
    /// The size at the start (later sizes come as `Resize` events).
    pub cols: u16,
    pub rows: u16,
    pub events: Vec<TermEvent>,
}

impl Track {
    pub fn new(shell: Option<u32>, label: impl Into<String>, cols: u16, rows: u16) -> Track {
        Track {
            shell,
            label: label.into(),
            cols,
            rows,
            events: Vec::new(),
        }
    }

    /// When the track's first event happened (its own zero for asciicast).
    pub fn start(&self) -> Ms {
        self.events.first().map_or(0, |e| e.t)
    }

    pub fn end(&self) -> Ms {
        self.events.last().map_or(0, |e| e.t)
    }

    pub fn output_bytes(&self) -> usize {
        self.events
            .iter()
            .map(|e| match &e.kind {
                TermKind::Output(d) => d.len(),
                _ => 0,
            })
            .sum()
    }

    /// Number of events at or before `t` (events are in time order).
    pub fn count_at(&self, t: Ms) -> usize {
        self.events.partition_point(|e| e.t <= t)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    Start,
    Score,
    Note,
    Pause,
    Resume,
    Extension,
    Warning,
    End,
    /// An agent's model call: what it said and which tools it asked for.
    Model,
    /// A marker from an imported file, with only a label.
    Plain,
}

impl MarkerKind {
    /// One narrow character for the timeline bar.
    pub fn symbol(self) -> char {
        match self {
            MarkerKind::Start => '▶',
            MarkerKind::Score => '◆',
            MarkerKind::Note => '•',
            MarkerKind::Pause => '‖',
            MarkerKind::Resume => '▸',
            MarkerKind::Extension => '+',
            MarkerKind::Warning => '!',
            MarkerKind::End => '■',
            MarkerKind::Model => '~',
            MarkerKind::Plain => '|',
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    pub t: Ms,
    pub kind: MarkerKind,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScorePoint {
    pub t: Ms,
    pub normalized: Option<f64>,
    pub raw: Option<f64>,
    pub valid: bool,
}

/// A stretch of time [start, end) when the session clock stood still.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: Ms,
    pub end: Ms,
}

/// The session's active time at a moment, sampled from chunks and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockPoint {
    pub t: Ms,
    pub active_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub title: String,
    /// Where it came from: a session id or a file name.
    pub source: String,
    pub session: Option<SessionView>,
    /// Wall time at t = 0, when known.
    pub origin: Option<DateTime<Utc>>,
    pub tracks: Vec<Track>,
    pub markers: Vec<Marker>,
    pub scores: Vec<ScorePoint>,
    pub pauses: Vec<Span>,
    pub clock: Vec<ClockPoint>,
    /// The budget before any extension, and each extension (time, added ms).
    pub base_budget_ms: Option<u64>,
    /// When the budget changed, and by how much (negative: reduced).
    pub extensions: Vec<(Ms, i64)>,
    /// Set when the source was damaged: what and where, and that playback stops there.
    pub damage: Option<String>,
    /// The idle-time limit the source asks for (asciicast `idle_time_limit`).
    pub idle_limit_ms: Option<u64>,
}

impl Timeline {
    pub fn duration(&self) -> Ms {
        let tracks = self.tracks.iter().map(Track::end).max().unwrap_or(0);
        let markers = self.markers.iter().map(|m| m.t).max().unwrap_or(0);
        tracks.max(markers)
    }

    pub fn paused_at(&self, t: Ms) -> bool {
        self.pauses.iter().any(|p| p.start <= t && t < p.end)
    }

    /// Active (budget-counted) time at `t`, for session recordings.
    pub fn active_ms_at(&self, t: Ms) -> Option<u64> {
        self.clock.first()?;
        let i = self.clock.partition_point(|p| p.t <= t);
        if i == 0 {
            return Some(0);
        }
        let p = self.clock[i - 1];
        if self.paused_at(t) {
            return Some(p.active_ms);
        }
        let guess = p.active_ms + (t - p.t);
        // Samples are exact; between them time runs at most at wall speed.
        Some(match self.clock.get(i) {
            Some(next) => guess.min(next.active_ms.max(p.active_ms)),
            None => guess,
        })
    }

    pub fn budget_ms_at(&self, t: Ms) -> Option<u64> {
        let base = self.base_budget_ms?;
        let added: i64 = self
            .extensions
            .iter()
            .filter(|(at, _)| *at <= t)
            .map(|(_, by)| by)
            .sum();
        Some(base.saturating_add_signed(added))
    }

    /// Budget left at `t` (negative when over).
    pub fn remaining_ms_at(&self, t: Ms) -> Option<i64> {
        let budget = self.budget_ms_at(t)? as i64;
        Some(budget - self.active_ms_at(t)? as i64)
    }

    /// The best valid score (highest normalized value).
    pub fn best_score(&self) -> Option<&ScorePoint> {
        self.scores
            .iter()
            .filter(|s| s.valid && s.normalized.is_some_and(f64::is_finite))
            .max_by(|a, b| {
                let (a, b) = (a.normalized.unwrap_or(0.0), b.normalized.unwrap_or(0.0));
                a.total_cmp(&b)
            })
    }

    /// Sorts markers and scores by time (builders push them in any order).
    pub fn sort(&mut self) {
        self.markers.sort_by_key(|m| m.t);
        self.scores.sort_by_key(|s| s.t);
        self.clock.sort_by_key(|c| c.t);
        self.pauses.sort_by_key(|p| p.start);
        for track in &mut self.tracks {
            track.events.sort_by_key(|e| e.t);
        }
    }
}

/// `H:MM:SS` (or `M:SS` under an hour) for a duration in ms.
pub fn clock_text(ms: u64) -> String {
    let s = ms / 1000;
    let (h, m, s) = (s / 3600, (s / 60) % 60, s % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// A budget-style duration: `2h05m`, `15m`, `42s`.
pub fn duration_text(ms: u64) -> String {
    let s = ms / 1000;
    let (h, m, sec) = (s / 3600, (s / 60) % 60, s % 60);
    match (h, m) {
        (0, 0) => format!("{sec}s"),
        (0, _) if sec == 0 => format!("{m}m"),
        (0, _) => format!("{m}m{sec:02}s"),
        _ if m == 0 => format!("{h}h"),
        _ => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline() -> Timeline {
        Timeline {
            clock: vec![
                ClockPoint {
                    t: 1000,
                    active_ms: 0,
                },
                ClockPoint {
                    t: 5000,
                    active_ms: 4000,
                },
                ClockPoint {
                    t: 9000,
                    active_ms: 5000,
                },
            ],
            pauses: vec![Span {
                start: 6000,
                end: 9000,
            }],
            base_budget_ms: Some(60_000),
            extensions: vec![(7000, 30_000)],
            ..Timeline::default()
        }
    }

    #[test]
    fn the_clock_stands_still_in_pauses_and_never_passes_the_next_sample() {
        let t = timeline();
        assert_eq!(t.active_ms_at(0), Some(0));
        assert_eq!(t.active_ms_at(3000), Some(2000));
        assert_eq!(t.active_ms_at(5500), Some(4500));
        assert_eq!(t.active_ms_at(7000), Some(4000), "paused");
        assert_eq!(t.active_ms_at(10_000), Some(6000));
        assert_eq!(t.remaining_ms_at(3000), Some(58_000));
        assert_eq!(
            t.remaining_ms_at(10_000),
            Some(84_000),
            "after the extension"
        );
    }

    #[test]
    fn durations_read_like_a_clock() {
        assert_eq!(clock_text(3_723_000), "1:02:03");
        assert_eq!(clock_text(63_000), "1:03");
        assert_eq!(duration_text(15 * 60_000), "15m");
        assert_eq!(duration_text(2 * 3_600_000 + 5 * 60_000), "2h05m");
        assert_eq!(duration_text(42_000), "42s");
    }
}
