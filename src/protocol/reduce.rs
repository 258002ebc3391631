//! One reducer for every client: a session's pushed events applied to the
//! client's copy of its view, so that a push costs no request. The
//! workspace (as the participant) and the proctor (as admin) both use it;
//! the server's own state stays the source of truth, and a client reads the
//! view again now and then and whenever events were skipped.

use crate::session::{Event, EventKind, Phase, ScorePhase};

use super::views::{
    Audience, ExtensionView, NoteView, PauseView, ScoreSlot, ScoreView, SessionView,
};

/// What applying an event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    /// The event was news (a copy read after it already had it).
    pub new: bool,
    /// The view's active time is now exact as of the event's time: a
    /// client counting the clock on locally restarts from there.
    pub clock_at_event: bool,
}

impl SessionView {
    /// Applies one event of the session's log. `scores` is the copy's score
    /// log (kept beside the view by clients that list many sessions).
    /// Entries already in the copy are recognised by their time or
    /// sequence number, so nothing counts twice.
    pub fn apply(
        &mut self,
        scores: &mut Vec<ScoreView>,
        event: &Event,
        audience: Audience,
    ) -> Applied {
        if self.already_has(scores, event) {
            return Applied {
                new: false,
                clock_at_event: false,
            };
        }
        let active_s = event.active_ms as f64 / 1000.0;
        let clock_at_event = active_s >= self.active_s;
        if clock_at_event {
            self.active_s = active_s;
        }
        match &event.kind {
            EventKind::Started { .. } => self.started_at = Some(event.at),
            EventKind::Paused { reason, by, note } => {
                if self.pauses.last().is_none_or(|p| p.end.is_some()) {
                    self.pauses.push(PauseView {
                        reason: *reason,
                        by: by.clone(),
                        note: note.clone(),
                        start: event.at,
                        end: None,
                    });
                }
            }
            EventKind::Resumed { .. } => {
                if let Some(p) = self.pauses.last_mut().filter(|p| p.end.is_none()) {
                    p.end = Some(event.at);
                }
            }
            EventKind::Extended { by_ms, reason, by } => {
                self.budget_s += *by_ms as f64 / 1000.0;
                self.extensions.push(ExtensionView {
                    at: event.at,
                    by_s: *by_ms as f64 / 1000.0,
                    reason: reason.clone(),
                    by: by.clone(),
                });
            }
            EventKind::Scored { entry } => {
                let run = match entry.phase {
                    ScorePhase::Starting => 0,
                    _ => scores.last().map_or(1, |last| last.run + 1),
                };
                let slot = ScoreSlot {
                    seq: event.seq,
                    run,
                    at: event.at,
                    active_ms: event.active_ms,
                };
                scores.push(ScoreView::from_entry(slot, entry, self.visible, audience));
                self.score_count = self.score_count.max(scores.len() - 1) + 1;
                self.scoring_since = None;
            }
            EventKind::Note { text, by } => self.notes.push(NoteView {
                at: event.at,
                active_s,
                text: text.clone(),
                by: by.clone(),
            }),
            EventKind::Exec(_) => self.last_activity_at = Some(event.at),
            EventKind::Usage { .. } => self.usage.count(&event.kind),
            EventKind::ModelCall(_) => {
                self.usage.count(&event.kind);
                self.last_activity_at = Some(event.at);
            }
            EventKind::Ended { reason, note, .. } => {
                self.end_reason = Some(*reason);
                self.end_note = note.clone();
                self.ended_at = Some(event.at);
                if let Some(p) = self.pauses.last_mut().filter(|p| p.end.is_none()) {
                    p.end = Some(event.at);
                }
            }
            EventKind::Queued { waiting_for, .. } => {
                self.waiting_for = Some(waiting_for.clone());
                self.state = Phase::Queued;
            }
            EventKind::Granted { grant } => {
                self.grant = Some(grant.clone());
                self.queue_position = None;
                self.waiting_for = None;
            }
            EventKind::Created { .. }
            | EventKind::Warning { .. }
            | EventKind::ShellOpened { .. }
            | EventKind::ShellExited { .. } => {}
        }
        self.state = self.derived_phase();
        self.pause_reason = match self.state {
            Phase::Paused => self.pauses.last().map(|p| p.reason),
            _ => None,
        };
        self.remaining_s = (self.budget_s - self.active_s).max(0.0);
        Applied {
            new: true,
            clock_at_event,
        }
    }

    /// As `apply`, for a copy that keeps its score log in `scores`.
    pub fn apply_here(&mut self, event: &Event, audience: Audience) -> Applied {
        let mut scores = self.scores.take().unwrap_or_default();
        let applied = self.apply(&mut scores, event, audience);
        self.scores = Some(scores);
        applied
    }

    fn already_has(&self, scores: &[ScoreView], event: &Event) -> bool {
        match &event.kind {
            EventKind::Paused { .. } => self.pauses.iter().any(|p| p.start == event.at),
            EventKind::Extended { .. } => self.extensions.iter().any(|e| e.at == event.at),
            EventKind::Scored { .. } => scores.iter().any(|s| s.seq == event.seq),
            EventKind::Note { text, .. } => self
                .notes
                .iter()
                .any(|n| n.at == event.at && n.text == *text),
            EventKind::Ended { .. } => self.ended_at.is_some(),
            _ => false,
        }
    }

    /// The session's state as the server derives it from the log.
    fn derived_phase(&self) -> Phase {
        let open_pause = self.pauses.last().is_some_and(|p| p.end.is_none());
        if self.end_reason.is_some() {
            Phase::Ended
        } else if self.waiting_for.is_some() && self.grant.is_none() {
            Phase::Queued
        } else if self.started_at.is_some() && open_pause {
            Phase::Paused
        } else if self.started_at.is_some() {
            Phase::Running
        } else {
            Phase::Created
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::session::{EndReason, PauseReason, ScoreEntry};

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap_or_default()
    }

    fn view(visible: bool) -> SessionView {
        serde_json::from_value(serde_json::json!({
            "id": "s1", "environment": "e", "title": "E", "profile": null,
            "participant": "ana", "kind": "human", "state": "running",
            "pause_reason": null, "end_reason": null, "workspace": "/w",
            "budget_s": 3600.0, "active_s": 10.0, "remaining_s": 3590.0,
            "created_at": at(0), "started_at": at(0), "ended_at": null,
            "metric": "m", "unit": "ms", "visible": visible, "aggregate": "best",
            "allow_missing_hardware": false, "hardware_missing": [],
            "pauses": [], "extensions": [], "notes": [], "score_count": 1,
            "scores": [], "final": null
        }))
        .expect("a view")
    }

    fn ev(seq: u64, secs: i64, kind: EventKind) -> Event {
        Event {
            seq,
            at: at(secs),
            active_ms: secs as u64 * 1000,
            origin: None,
            kind,
        }
    }

    fn scored(raw: f64) -> EventKind {
        EventKind::Scored {
            entry: Box::new(ScoreEntry {
                phase: ScorePhase::Intermediate,
                requested_by: "ana".into(),
                requested_active_ms: 0,
                valid: true,
                raw: Some(raw),
                normalized: Some(0.5),
                message: "fast".into(),
                scorer_message: serde_json::Value::Null,
                details: serde_json::json!({"trials": [1, 2]}),
                output: "log".into(),
                exit_code: Some(0),
                duration_ms: 5,
            }),
        }
    }

    #[test]
    fn a_pause_and_a_resume_move_the_state_and_the_clock() {
        let mut v = view(true);
        let paused = ev(
            2,
            60,
            EventKind::Paused {
                reason: PauseReason::Break,
                by: "ana".into(),
                note: None,
            },
        );
        let applied = v.apply_here(&paused, Audience::Participant);
        assert!(applied.new && applied.clock_at_event);
        assert_eq!(
            (v.state, v.pause_reason),
            (Phase::Paused, Some(PauseReason::Break))
        );
        assert_eq!((v.active_s, v.remaining_s), (60.0, 3540.0));
        // The same event again (a view read after it, then its push) is no news.
        assert!(!v.apply_here(&paused, Audience::Participant).new);
        v.apply_here(
            &ev(3, 60, EventKind::Resumed { by: "ana".into() }),
            Audience::Participant,
        );
        assert_eq!((v.state, v.pause_reason), (Phase::Running, None));
        v.apply_here(
            &ev(
                4,
                70,
                EventKind::Ended {
                    reason: EndReason::Submitted,
                    by: "ana".into(),
                    note: None,
                },
            ),
            Audience::Participant,
        );
        assert_eq!(
            (v.state, v.end_reason),
            (Phase::Ended, Some(EndReason::Submitted))
        );
    }

    #[test]
    fn scores_are_numbered_and_filtered_for_the_audience() {
        let mut shown = view(true);
        shown.apply_here(&ev(5, 20, scored(2.5)), Audience::Participant);
        let s = &shown.scores.as_ref().expect("a log")[0];
        assert_eq!((s.run, s.raw, s.valid), (1, Some(2.5), Some(true)));
        assert_eq!((s.details.as_ref(), s.output.as_ref()), (None, None));
        assert_eq!(shown.score_count, 2, "the starting entry and this one");
        // A hidden score: the participant's copy says only that it was recorded.
        let mut hidden = view(false);
        hidden.apply_here(&ev(5, 20, scored(2.5)), Audience::Participant);
        let s = &hidden.scores.as_ref().expect("a log")[0];
        assert_eq!((s.raw, s.normalized, s.valid), (None, None, None));
        assert_eq!(s.message, "score recorded (hidden)");
        // The proctor's has everything.
        let mut admin = view(false);
        admin.apply_here(&ev(5, 20, scored(2.5)), Audience::Admin);
        let s = &admin.scores.as_ref().expect("a log")[0];
        assert_eq!((s.raw, s.hidden), (Some(2.5), true));
        assert!(s.details.is_some() && s.output.as_deref() == Some("log"));
    }
}
