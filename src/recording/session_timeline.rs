//! A session's recording as a timeline: one track per recorded shell (or an
//! exec transcript for agent sessions without shells), markers and scores
//! from the event log, pauses, extensions and the active-time clock.

use chrono::{DateTime, Utc};

use super::markers;
use super::session_data::{RecordedChunk, SessionRecording, exit_code, resize_size};
use super::timeline::{
    ClockPoint, Marker, Ms, ScorePoint, Span, TermEvent, TermKind, Timeline, Track,
};
use super::transcript;
use crate::session::EventKind;
use crate::store::ChunkKind;

const DEFAULT_COLS: u16 = 80;
const DEFAULT_ROWS: u16 = 24;

pub fn build(rec: &SessionRecording) -> Timeline {
    let origin = origin(rec);
    let at = |when: DateTime<Utc>| ms_since(origin, when);
    let view = &rec.session;
    let mut timeline = Timeline {
        title: format!("{} — {} ({})", view.title, view.participant, view.kind),
        source: view.id.clone(),
        session: Some(view.clone()),
        origin: Some(origin),
        damage: rec.damage.clone(),
        ..Timeline::default()
    };

    for shell in rec.shells() {
        let chunks: Vec<&RecordedChunk> = rec.chunks.iter().filter(|c| c.shell == shell).collect();
        timeline.tracks.push(shell_track(shell, &chunks, &at));
        timeline.clock.extend(chunks.iter().map(|c| ClockPoint {
            t: at(c.at),
            active_ms: c.active_ms,
        }));
    }
    let transcript_wanted = rec.chunks.is_empty();
    let mut agent = Track::new(None, "agent (exec)", transcript::COLS, transcript::ROWS);

    let mut open_pause: Option<Ms> = None;
    let mut extended_ms: i64 = 0;
    for event in &rec.events {
        let t = at(event.at);
        timeline.clock.push(ClockPoint {
            t,
            active_ms: event.active_ms,
        });
        if let Some((kind, label)) = markers::marker_for(&event.kind, &view.unit) {
            timeline.markers.push(Marker { t, kind, label });
        }
        match &event.kind {
            EventKind::Scored { entry } => timeline.scores.push(ScorePoint {
                t,
                normalized: entry.normalized,
                raw: entry.raw,
                valid: entry.valid,
            }),
            EventKind::Paused { .. } => {
                open_pause.get_or_insert(t);
            }
            EventKind::Resumed { .. } | EventKind::Ended { .. } => {
                if let Some(start) = open_pause.take() {
                    timeline.pauses.push(Span { start, end: t });
                }
            }
            EventKind::Extended { by_ms, .. } => {
                extended_ms += by_ms;
                timeline.extensions.push((t, *by_ms));
            }
            EventKind::ModelCall(call) if transcript_wanted => {
                transcript::push_model_call(&mut agent, t, call);
            }
            EventKind::Exec(exec) if transcript_wanted => {
                let start = at(event.at - chrono::Duration::milliseconds(exec.duration_ms as i64));
                transcript::push_exec(&mut agent, start, t, exec);
            }
            _ => {}
        }
    }
    if let Some(start) = open_pause {
        timeline.pauses.push(Span {
            start,
            end: Ms::MAX,
        });
    }
    if !agent.events.is_empty() {
        timeline.tracks.push(agent);
    }
    let budget_ms = (view.budget_s * 1000.0).round().max(0.0) as u64;
    timeline.base_budget_ms = Some(budget_ms.saturating_add_signed(-extended_ms));
    timeline.sort();
    timeline
}

/// t = 0 is the first terminal byte or the clock start, whichever is first.
fn origin(rec: &SessionRecording) -> DateTime<Utc> {
    let first_chunk = rec.chunks.iter().map(|c| c.at).min();
    let started = rec
        .events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Started { .. }))
        .map(|e| e.at);
    [first_chunk, started]
        .into_iter()
        .flatten()
        .min()
        .or_else(|| rec.events.first().map(|e| e.at))
        .unwrap_or(rec.session.created_at)
}

fn ms_since(origin: DateTime<Utc>, at: DateTime<Utc>) -> Ms {
    (at - origin).num_milliseconds().max(0) as Ms
}

fn shell_track(shell: u32, chunks: &[&RecordedChunk], at: &dyn Fn(DateTime<Utc>) -> Ms) -> Track {
    let (cols, rows) = chunks
        .iter()
        .find(|c| c.kind == ChunkKind::Resize)
        .and_then(|c| resize_size(&c.data))
        .unwrap_or((DEFAULT_COLS, DEFAULT_ROWS));
    let mut track = Track::new(Some(shell), format!("shell {shell}"), cols, rows);
    track.events = chunks
        .iter()
        .filter_map(|c| {
            let kind = match c.kind {
                ChunkKind::Output => TermKind::Output(c.data.clone()),
                ChunkKind::Input => TermKind::Input(c.data.clone()),
                ChunkKind::Resize => {
                    let (cols, rows) = resize_size(&c.data)?;
                    TermKind::Resize { cols, rows }
                }
                ChunkKind::Exit => TermKind::Exit(exit_code(&c.data).unwrap_or(-1)),
            };
            Some(TermEvent { t: at(c.at), kind })
        })
        .collect();
    track
}
