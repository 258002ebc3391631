//! The session summary, derived from its event log.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::event::{EndReason, Event, EventKind, PauseReason, ScoreEntry};

/// Where a session is in its life; on the wire as `created`, `running`,
/// `paused`, `ended`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Waiting for its hardware (never on the clock).
    Queued,
    Created,
    Running,
    Paused,
    Ended,
}

impl Phase {
    pub fn as_str(&self) -> &'static str {
        match self {
            Phase::Queued => "queued",
            Phase::Created => "created",
            Phase::Running => "running",
            Phase::Paused => "paused",
            Phase::Ended => "ended",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PauseRecord {
    pub reason: PauseReason,
    pub by: String,
    pub note: Option<String>,
    pub start: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
    pub active_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtensionRecord {
    pub at: DateTime<Utc>,
    /// Negative for a reduction.
    pub by_ms: i64,
    pub reason: String,
    pub by: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreRecord {
    pub seq: u64,
    /// The scoring run's number: 0 for the starting score, then 1, 2, …
    /// in the log's order (what every UI calls "scoring run N").
    pub run: u32,
    pub at: DateTime<Utc>,
    pub active_ms: u64,
    pub entry: ScoreEntry,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoteRecord {
    pub seq: u64,
    pub at: DateTime<Utc>,
    pub active_ms: u64,
    pub text: String,
    pub by: String,
}

/// When and why a session had to wait for its hardware.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueuedRecord {
    pub since: DateTime<Utc>,
    pub priority: i32,
    pub waiting_for: String,
    pub needs: crate::hardware::Request,
}

/// Everything about a session that follows from its events.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionState {
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub end_reason: Option<EndReason>,
    /// The ender's note, when they gave one.
    pub end_note: Option<String>,
    /// Active time as of the last event.
    pub active_ms: u64,
    /// Initial budget plus extensions.
    pub budget_ms: u64,
    pub pauses: Vec<PauseRecord>,
    pub extensions: Vec<ExtensionRecord>,
    pub scores: Vec<ScoreRecord>,
    pub notes: Vec<NoteRecord>,
    /// Warning thresholds (seconds) already announced.
    pub warned_s: Vec<u64>,
    pub last_seq: Option<u64>,
    pub last_at: Option<DateTime<Utc>>,
    /// Tokens and cost reported so far (agents).
    pub usage: super::UsageTotals,
    /// Set when it had to wait for hardware.
    pub queued: Option<QueuedRecord>,
    /// The devices it holds (None: not granted yet, or made before grants).
    pub grant: Option<crate::hardware::DeviceGrant>,
}

impl SessionState {
    pub fn new(initial_budget_ms: u64) -> Self {
        Self {
            budget_ms: initial_budget_ms,
            ..Self::default()
        }
    }

    pub fn from_events<'a>(
        initial_budget_ms: u64,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Self {
        let mut state = Self::new(initial_budget_ms);
        for event in events {
            state.apply(event);
        }
        state
    }

    pub fn apply(&mut self, event: &Event) {
        self.active_ms = self.active_ms.max(event.active_ms);
        self.last_seq = Some(event.seq);
        self.last_at = Some(event.at);
        match &event.kind {
            EventKind::Started { .. } => self.started_at = Some(event.at),
            EventKind::Paused { reason, by, note } => {
                if self.open_pause().is_none() {
                    self.pauses.push(PauseRecord {
                        reason: *reason,
                        by: by.clone(),
                        note: note.clone(),
                        start: event.at,
                        end: None,
                        active_ms: event.active_ms,
                    });
                }
            }
            EventKind::Resumed { .. } => {
                if let Some(p) = self.pauses.last_mut().filter(|p| p.end.is_none()) {
                    p.end = Some(event.at);
                }
            }
            EventKind::Extended { by_ms, reason, by } => {
                // The server refuses extensions that would overflow; a log
                // written by anything else must not panic the reducer.
                self.budget_ms = self.budget_ms.saturating_add_signed(*by_ms);
                self.extensions.push(ExtensionRecord {
                    at: event.at,
                    by_ms: *by_ms,
                    reason: reason.clone(),
                    by: by.clone(),
                });
            }
            EventKind::Warning { threshold_s, .. } => self.warned_s.push(*threshold_s),
            EventKind::Scored { entry } => self.scores.push(ScoreRecord {
                seq: event.seq,
                run: next_run(&self.scores, entry),
                at: event.at,
                active_ms: event.active_ms,
                entry: (**entry).clone(),
            }),
            EventKind::Note { text, by } => self.notes.push(NoteRecord {
                seq: event.seq,
                at: event.at,
                active_ms: event.active_ms,
                text: text.clone(),
                by: by.clone(),
            }),
            EventKind::Ended { reason, note, .. } => {
                self.end_reason = Some(*reason);
                self.end_note = note.clone();
                self.ended_at = Some(event.at);
                if let Some(p) = self.pauses.last_mut().filter(|p| p.end.is_none()) {
                    p.end = Some(event.at);
                }
            }
            EventKind::Queued {
                waiting_for,
                priority,
                needs,
            } => {
                self.queued = Some(QueuedRecord {
                    // Queued again with another priority: it keeps its arrival.
                    since: self.queued.as_ref().map_or(event.at, |q| q.since),
                    priority: *priority,
                    waiting_for: waiting_for.clone(),
                    needs: needs.clone(),
                })
            }
            EventKind::Granted { grant } => self.grant = Some(grant.clone()),
            EventKind::Created { .. }
            | EventKind::ShellOpened { .. }
            | EventKind::ShellExited { .. }
            | EventKind::Exec(_) => {}
            EventKind::Usage { .. } | EventKind::ModelCall(_) => self.usage.count(&event.kind),
        }
    }

    pub fn open_pause(&self) -> Option<&PauseRecord> {
        self.pauses.last().filter(|p| p.end.is_none())
    }

    pub fn phase(&self) -> Phase {
        if self.end_reason.is_some() {
            Phase::Ended
        } else if self.waits_for_hardware() {
            Phase::Queued
        } else if self.open_pause().is_some() && self.started_at.is_some() {
            Phase::Paused
        } else if self.started_at.is_some() {
            Phase::Running
        } else {
            Phase::Created
        }
    }

    /// Queued and not granted yet.
    pub fn waits_for_hardware(&self) -> bool {
        self.queued.is_some() && self.grant.is_none()
    }

    /// Whether the clock runs (started, not paused, not ended).
    pub fn clock_runs(&self) -> bool {
        self.phase() == Phase::Running
    }

    pub fn next_seq(&self) -> u64 {
        self.last_seq.map_or(0, |s| s + 1)
    }

    pub fn remaining_ms(&self, active_ms: u64) -> u64 {
        self.budget_ms.saturating_sub(active_ms)
    }

    /// Valid entries as (raw, normalized), in log order.
    pub fn valid_scores(&self) -> Vec<(f64, f64)> {
        self.scores
            .iter()
            .filter_map(|s| match (s.entry.valid, s.entry.raw, s.entry.normalized) {
                (true, Some(raw), Some(n)) => Some((raw, n)),
                _ => None,
            })
            .collect()
    }
}

/// The number the next scoring run gets: the starting score is 0, every
/// other run the next after the last.
pub fn next_run(scores: &[ScoreRecord], entry: &ScoreEntry) -> u32 {
    if entry.phase == crate::session::ScorePhase::Starting {
        return 0;
    }
    scores.last().map_or(1, |last| last.run + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::event::ScorePhase;

    fn ev(seq: u64, active_ms: u64, kind: EventKind) -> Event {
        Event {
            seq,
            at: DateTime::from_timestamp(1_700_000_000 + seq as i64, 0).unwrap(),
            active_ms,
            origin: None,
            kind,
        }
    }

    fn score(valid: bool, raw: f64, normalized: f64) -> EventKind {
        EventKind::Scored {
            entry: Box::new(ScoreEntry {
                phase: ScorePhase::Intermediate,
                requested_by: "p".into(),
                requested_active_ms: 0,
                valid,
                raw: valid.then_some(raw),
                normalized: valid.then_some(normalized),
                message: String::new(),
                scorer_message: serde_json::Value::Null,
                details: serde_json::Value::Null,
                output: String::new(),
                exit_code: Some(0),
                duration_ms: 1,
            }),
        }
    }

    #[test]
    fn scoring_runs_are_numbered_from_the_starting_score() {
        let with_phase = |phase: ScorePhase| {
            let EventKind::Scored { mut entry } = score(true, 1.0, 0.5) else {
                unreachable!()
            };
            entry.phase = phase;
            EventKind::Scored { entry }
        };
        let mut s = SessionState::new(10_000);
        s.apply(&ev(1, 0, with_phase(ScorePhase::Starting)));
        s.apply(&ev(5, 10, with_phase(ScorePhase::Intermediate)));
        s.apply(&ev(9, 20, score(false, 0.0, 0.0)));
        s.apply(&ev(12, 30, with_phase(ScorePhase::Final)));
        let runs: Vec<u32> = s.scores.iter().map(|r| r.run).collect();
        assert_eq!(runs, [0, 1, 2, 3], "not the event numbers 1, 5, 9, 12");
    }

    #[test]
    fn phases_follow_the_log() {
        let by = || "p".to_string();
        let mut s = SessionState::new(10_000);
        s.apply(&ev(0, 0, EventKind::Created { by: by() }));
        assert_eq!(s.phase(), Phase::Created);
        // The starting score runs under a scoring pause before the clock starts.
        s.apply(&ev(
            1,
            0,
            EventKind::Paused {
                reason: PauseReason::Scoring,
                by: by(),
                note: None,
            },
        ));
        assert_eq!(s.phase(), Phase::Created);
        s.apply(&ev(2, 0, EventKind::Resumed { by: by() }));
        s.apply(&ev(3, 0, EventKind::Started { by: by() }));
        assert_eq!(s.phase(), Phase::Running);
        s.apply(&ev(
            4,
            4000,
            EventKind::Paused {
                reason: PauseReason::Break,
                by: by(),
                note: None,
            },
        ));
        assert_eq!(s.phase(), Phase::Paused);
        assert_eq!(s.open_pause().unwrap().reason, PauseReason::Break);
        s.apply(&ev(5, 4000, EventKind::Resumed { by: by() }));
        assert_eq!(s.phase(), Phase::Running);
        s.apply(&ev(
            6,
            5000,
            EventKind::Extended {
                by_ms: 3000,
                reason: "outage".into(),
                by: "proc".into(),
            },
        ));
        assert_eq!(s.budget_ms, 13_000);
        assert_eq!(s.remaining_ms(5000), 8000);
        s.apply(&ev(
            7,
            6000,
            EventKind::Ended {
                reason: EndReason::Submitted,
                by: by(),
                note: None,
            },
        ));
        assert_eq!(s.phase(), Phase::Ended);
        assert_eq!(s.pauses.len(), 2);
        assert!(s.pauses.iter().all(|p| p.end.is_some()));
        assert_eq!(s.next_seq(), 8);
        assert_eq!(s.active_ms, 6000);
    }

    #[test]
    fn valid_scores_skip_invalid_entries() {
        let mut s = SessionState::new(1000);
        s.apply(&ev(0, 0, score(true, 4.0, 0.0)));
        s.apply(&ev(1, 10, score(false, 0.0, 0.0)));
        s.apply(&ev(2, 20, score(true, 2.0, 0.7)));
        assert_eq!(s.scores.len(), 3);
        assert_eq!(s.valid_scores(), vec![(4.0, 0.0), (2.0, 0.7)]);
    }

    #[test]
    fn a_second_pause_while_paused_keeps_the_first_reason() {
        let mut s = SessionState::new(1000);
        s.apply(&ev(0, 0, EventKind::Started { by: "p".into() }));
        s.apply(&ev(
            1,
            5,
            EventKind::Paused {
                reason: PauseReason::Proctor,
                by: "x".into(),
                note: None,
            },
        ));
        s.apply(&ev(
            2,
            5,
            EventKind::Paused {
                reason: PauseReason::Break,
                by: "p".into(),
                note: None,
            },
        ));
        assert_eq!(s.pauses.len(), 1);
        assert_eq!(s.open_pause().unwrap().reason, PauseReason::Proctor);
    }
}
