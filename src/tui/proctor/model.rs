//! What the dashboard knows about every session: the server's view, kept
//! current by applying pushed events locally (so a burst of agent execs
//! costs no requests), and re-read from the server now and then.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::protocol::{Audience, PauseView, ScoreView, SessionView};
use crate::session::Phase;
use crate::session::{Event, EventKind};

/// A shell of the session that exited while it was live.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellExit {
    pub shell: u32,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// When it exited (or, for one found exited at start, when we saw it).
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tracked {
    /// The latest view (its `scores` are kept in `scores` instead).
    pub view: SessionView,
    /// The score log, admin-complete (hidden values included).
    pub scores: Vec<ScoreView>,
    /// Whether `scores` came from the server (a listing has none).
    pub scores_loaded: bool,
    /// Wall time at which `view.active_s` was exact: the clock counts on from there.
    pub synced_at: DateTime<Utc>,
    pub shell_exits: Vec<ShellExit>,
}

impl Tracked {
    pub fn new(mut view: SessionView, synced_at: DateTime<Utc>) -> Tracked {
        let scores = view.scores.take();
        Tracked {
            scores_loaded: scores.is_some(),
            scores: scores.unwrap_or_default(),
            view,
            synced_at,
            shell_exits: Vec::new(),
        }
    }

    /// A fresh view from the server replaces ours (scores only if it has them).
    pub fn refresh(&mut self, mut view: SessionView, synced_at: DateTime<Utc>) {
        if let Some(scores) = view.scores.take() {
            self.scores = scores;
            self.scores_loaded = true;
        }
        self.view = view;
        self.synced_at = synced_at;
    }

    pub fn running(&self) -> bool {
        self.view.state == Phase::Running
    }

    pub fn ended(&self) -> bool {
        self.view.state == Phase::Ended
    }

    /// Active time now: counted on locally while the clock runs.
    pub fn active_s(&self, now: DateTime<Utc>) -> f64 {
        let v = &self.view;
        if !self.running() {
            return v.active_s;
        }
        let since = seconds_between(self.synced_at, now).max(0.0);
        (v.active_s + since).min(v.budget_s.max(v.active_s))
    }

    pub fn remaining_s(&self, now: DateTime<Utc>) -> f64 {
        (self.view.budget_s - self.active_s(now)).max(0.0)
    }

    /// The pause in progress, if any.
    pub fn open_pause(&self) -> Option<&PauseView> {
        self.view.pauses.last().filter(|p| p.end.is_none())
    }

    /// The best valid score as the server picks it (hidden ones too:
    /// proctors see them).
    pub fn best(&self) -> Option<&ScoreView> {
        crate::tui::widgets::score::best_score(&self.scores, self.view.lower_is_better)
    }

    /// When the participant last did something, as far as we can tell: a
    /// keystroke or exec, else the latest (re)start of the clock.
    pub fn active_since(&self) -> Option<DateTime<Utc>> {
        let v = &self.view;
        let resumed = v.pauses.iter().filter_map(|p| p.end).max();
        [v.last_activity_at, v.started_at, resumed]
            .into_iter()
            .flatten()
            .max()
    }

    /// Applies one event of the session's log to our copy (the shared
    /// reducer, `protocol::reduce`); false if our copy already had it.
    pub fn apply(&mut self, event: &Event) -> bool {
        let applied = self.view.apply(&mut self.scores, event, Audience::Admin);
        if applied.clock_at_event {
            self.synced_at = event.at;
        }
        // Shells stopped because the session ended are no news.
        if let EventKind::ShellExited {
            shell,
            code,
            signal,
        } = &event.kind
            && applied.new
            && self.view.state != Phase::Ended
        {
            self.shell_exits.push(ShellExit {
                shell: *shell,
                code: *code,
                signal: *signal,
                at: event.at,
            });
        }
        applied.new
    }
}

pub fn seconds_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_milliseconds() as f64 / 1000.0
}

/// Every session the dashboard knows, by id.
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    pub sessions: BTreeMap<String, Tracked>,
}

impl Fleet {
    /// A `list_sessions` reply: views replace ours (our score logs stay);
    /// sessions no longer listed are dropped.
    pub fn load_list(&mut self, views: Vec<SessionView>, now: DateTime<Utc>) {
        let mut next = BTreeMap::new();
        for view in views {
            let id = view.id.clone();
            let tracked = match self.sessions.remove(&id) {
                Some(mut t) => {
                    t.refresh(view, now);
                    t
                }
                None => Tracked::new(view, now),
            };
            next.insert(id, tracked);
        }
        self.sessions = next;
    }

    /// A `show` reply (with scores).
    pub fn load_show(&mut self, view: SessionView, now: DateTime<Utc>) {
        match self.sessions.get_mut(&view.id) {
            Some(t) => t.refresh(view, now),
            None => {
                self.sessions
                    .insert(view.id.clone(), Tracked::new(view, now));
            }
        }
    }

    /// A pushed event; returns false for a session we do not know yet (the
    /// caller asks the server for it).
    pub fn apply(&mut self, session: &str, event: &Event) -> bool {
        match self.sessions.get_mut(session) {
            Some(t) => {
                t.apply(event);
                true
            }
            None => false,
        }
    }

    pub fn get(&self, id: &str) -> Option<&Tracked> {
        self.sessions.get(id)
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::session::{EndReason, PauseReason, ScoreEntry, ScorePhase};

    pub fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap_or_default()
    }

    pub fn view(id: &str) -> SessionView {
        serde_json::from_value(serde_json::json!({
            "id": id, "environment": "fixed", "title": "Fixed", "profile": null,
            "participant": "tess", "kind": "human", "state": "running",
            "pause_reason": null, "end_reason": null, "workspace": "/w",
            "budget_s": 7200.0, "active_s": 100.0, "remaining_s": 7100.0,
            "created_at": at(0), "started_at": at(0), "ended_at": null,
            "metric": "runtime", "unit": "ms", "visible": true, "aggregate": "best",
            "allow_missing_hardware": false, "hardware_missing": [],
            "pauses": [], "extensions": [], "notes": [], "score_count": 0,
            "final": null
        }))
        .unwrap()
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

    pub fn entry(valid: bool, normalized: Option<f64>, message: &str) -> ScoreEntry {
        ScoreEntry {
            phase: ScorePhase::Intermediate,
            requested_by: "tess".into(),
            requested_active_ms: 0,
            valid,
            raw: normalized.map(|n| 5.0 - n),
            normalized,
            message: message.into(),
            scorer_message: serde_json::Value::Null,
            details: serde_json::json!({"k": 1}),
            output: String::new(),
            exit_code: Some(0),
            duration_ms: 10,
        }
    }

    #[test]
    fn events_move_state_budget_and_scores() {
        let mut t = Tracked::new(view("a"), at(100));
        assert_eq!(t.active_s(at(160)), 160.0);
        let by = || "ana (proctor)".to_string();
        t.apply(&ev(
            5,
            200,
            EventKind::Paused {
                reason: PauseReason::Proctor,
                by: by(),
                note: Some("check".into()),
            },
        ));
        assert_eq!(t.view.state, Phase::Paused);
        assert_eq!(t.view.pause_reason, Some(PauseReason::Proctor));
        // The clock stands still while paused.
        assert_eq!(t.active_s(at(900)), 200.0);
        t.apply(&ev(6, 200, EventKind::Resumed { by: by() }));
        assert_eq!(t.view.state, Phase::Running);
        assert_eq!(t.active_since(), Some(at(200)));
        t.apply(&ev(
            7,
            210,
            EventKind::Extended {
                by_ms: 1_800_000,
                reason: "outage".into(),
                by: by(),
            },
        ));
        assert_eq!(t.view.budget_s, 9000.0);
        t.apply(&ev(
            8,
            220,
            EventKind::Scored {
                entry: Box::new(entry(true, Some(0.5), "ok")),
            },
        ));
        assert_eq!(t.view.score_count, 1);
        assert_eq!(t.best().and_then(|s| s.normalized), Some(0.5));
        // An event the view already had is not applied twice.
        let extended_again = ev(
            7,
            210,
            EventKind::Extended {
                by_ms: 1_800_000,
                reason: "outage".into(),
                by: by(),
            },
        );
        assert!(!t.apply(&extended_again));
        assert_eq!(t.view.budget_s, 9000.0);
        t.apply(&ev(
            9,
            230,
            EventKind::ShellExited {
                shell: 2,
                code: Some(1),
                signal: None,
            },
        ));
        assert_eq!(t.shell_exits.len(), 1);
        t.apply(&ev(
            10,
            240,
            EventKind::Ended {
                reason: EndReason::EndedByProctor,
                by: by(),
                note: None,
            },
        ));
        assert_eq!(t.view.state, Phase::Ended);
        assert_eq!(t.view.end_reason, Some(EndReason::EndedByProctor));
    }

    #[test]
    fn a_listing_keeps_score_logs_and_drops_gone_sessions() {
        let mut fleet = Fleet::default();
        let mut shown = view("a");
        shown.scores = Some(vec![]);
        fleet.load_show(shown, at(0));
        fleet.load_list(vec![view("a"), view("b")], at(10));
        assert!(fleet.get("a").is_some_and(|t| t.scores_loaded));
        assert!(fleet.get("b").is_some_and(|t| !t.scores_loaded));
        fleet.load_list(vec![view("b")], at(20));
        assert!(fleet.get("a").is_none());
        assert!(!fleet.apply("zz", &ev(0, 0, EventKind::Created { by: "x".into() })));
    }
}
