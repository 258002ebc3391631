//! What asciicast v2 and v3 share: a track turned into `[time, code, data]`
//! events (output and input as valid UTF-8, resizes, exit, markers), and
//! event lines turned back into a timeline.

use super::lines::{self, Line};
use super::markers;
use super::timeline::{Marker, Ms, TermEvent, TermKind, Timeline, Track};
use super::utf8::Utf8Stream;

pub const TERM_TYPE: &str = "xterm-256color";
pub const SHELL: &str = "/bin/bash";

#[derive(Debug, Clone, PartialEq)]
pub struct CastEvent {
    /// Since the track's first event.
    pub t: Ms,
    pub code: &'static str,
    pub data: String,
}

/// The header fields both versions carry.
#[derive(Debug, Clone, PartialEq)]
pub struct CastHeader {
    pub cols: u16,
    pub rows: u16,
    /// Unix seconds of t = 0.
    pub timestamp: Option<i64>,
    pub title: Option<String>,
}

/// A track's events and the markers, on the track's own clock (markers
/// before its first event are moved to 0).
pub fn cast_events(track: &Track, markers: &[Marker]) -> Vec<CastEvent> {
    let zero = track.start();
    let mut out = Vec::with_capacity(track.events.len() + markers.len());
    let (mut output, mut input) = (Utf8Stream::default(), Utf8Stream::default());
    let mut size = (track.cols, track.rows);
    let mut last = 0;
    for e in &track.events {
        let t = e.t.saturating_sub(zero);
        last = t;
        let (code, data) = match &e.kind {
            TermKind::Output(bytes) => ("o", output.push(bytes)),
            TermKind::Input(bytes) => ("i", input.push(bytes)),
            TermKind::Resize { cols, rows } => {
                if (*cols, *rows) == size {
                    continue;
                }
                size = (*cols, *rows);
                ("r", format!("{cols}x{rows}"))
            }
            TermKind::Exit(code) => ("x", code.to_string()),
        };
        if !data.is_empty() {
            out.push(CastEvent { t, code, data });
        }
    }
    for (code, rest) in [("o", output.finish()), ("i", input.finish())] {
        if !rest.is_empty() {
            out.push(CastEvent {
                t: last,
                code,
                data: rest,
            });
        }
    }
    out.extend(markers.iter().map(|m| CastEvent {
        t: m.t.saturating_sub(zero),
        code: "m",
        data: m.label.clone(),
    }));
    // Stable: at equal times terminal events stay before markers.
    out.sort_by_key(|e| e.t);
    out
}

/// `[1.234567, "o", "text"]`
pub fn event_line(seconds: f64, code: &str, data: &str) -> String {
    let data = serde_json::to_string(data).unwrap_or_else(|_| "\"\"".into());
    format!("[{seconds:.6}, \"{code}\", {data}]")
}

pub fn seconds(ms: Ms) -> f64 {
    ms as f64 / 1000.0
}

/// Parses `[time, code, data]`.
pub fn parse_event(line: &Line<'_>) -> Result<(f64, String, String), String> {
    let (time, code, data): (f64, String, String) =
        lines::json(line).map_err(|e| format!("not an event [time, code, data]: {e}"))?;
    if !time.is_finite() || time < 0.0 {
        return Err(format!("bad event time {time}"));
    }
    Ok((time, code, data))
}

/// Builds a one-track timeline from parsed events; `t` is absolute seconds.
pub struct CastImport {
    pub timeline: Timeline,
    track: Track,
    last_t: Ms,
}

impl CastImport {
    pub fn new(header: &CastHeader, source: &str) -> CastImport {
        let timeline = Timeline {
            title: header.title.clone().unwrap_or_else(|| source.to_string()),
            source: source.to_string(),
            origin: header
                .timestamp
                .and_then(|s| chrono::DateTime::from_timestamp(s, 0)),
            ..Timeline::default()
        };
        CastImport {
            timeline,
            track: Track::new(None, "terminal", header.cols, header.rows),
            last_t: 0,
        }
    }

    pub fn push(&mut self, seconds: f64, code: &str, data: String) -> Result<(), String> {
        // Times must not go back; clamp rather than reorder what was recorded.
        let t = ((seconds * 1000.0).round() as Ms).max(self.last_t);
        self.last_t = t;
        let kind = match code {
            "o" => TermKind::Output(data.into_bytes()),
            "i" => TermKind::Input(data.into_bytes()),
            "r" => {
                let (cols, rows) =
                    parse_size(&data).ok_or_else(|| format!("resize {data:?} is not COLSxROWS"))?;
                TermKind::Resize { cols, rows }
            }
            "x" => TermKind::Exit(data.trim().parse().unwrap_or(-1)),
            "m" => {
                let kind = markers::kind_from_label(&data);
                if let Some(score) = markers::score_from_label(t, &data) {
                    self.timeline.scores.push(score);
                }
                self.timeline.markers.push(Marker {
                    t,
                    kind,
                    label: data,
                });
                return Ok(());
            }
            // Unknown event codes are for other players; skip them.
            _ => return Ok(()),
        };
        self.track.events.push(TermEvent { t, kind });
        Ok(())
    }

    pub fn finish(mut self, damage: Option<String>) -> Timeline {
        self.timeline.tracks.push(self.track);
        self.timeline.damage = damage;
        self.timeline.sort();
        self.timeline
    }
}

pub fn parse_size(text: &str) -> Option<(u16, u16)> {
    let (c, r) = text.trim().split_once('x')?;
    let (cols, rows) = (c.parse().ok()?, r.parse().ok()?);
    (cols > 0 && rows > 0).then_some((cols, rows))
}

/// A header size field, within what a terminal can be.
pub fn size_field(value: &serde_json::Value, name: &str) -> Result<u16, String> {
    match value.as_u64() {
        Some(n) if (1..=1000).contains(&n) => Ok(n as u16),
        _ => Err(format!(
            "header field {name} must be a size from 1 to 1000, not {value}"
        )),
    }
}
