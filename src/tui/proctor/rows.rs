//! The dashboard table: one row per session, computed from the fleet at a
//! given time, then filtered and sorted as the proctor asked.

use chrono::{DateTime, Utc};

use super::alerts::{Alert, AlertKind, session_alerts};
use super::model::{Fleet, Tracked, seconds_between};
use super::settings::Thresholds;
use crate::session::{EndReason, Kind, PauseReason, Phase};

/// The last score of a session, as the table shows it.
#[derive(Debug, Clone, PartialEq)]
pub enum LastScore {
    None,
    Valid(f64),
    Invalid,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: String,
    pub participant: String,
    pub kind: Kind,
    pub environment: String,
    /// The environment hides scores from the participant (we see them anyway).
    pub hidden: bool,
    pub state: Phase,
    pub pause_reason: Option<PauseReason>,
    pub end_reason: Option<EndReason>,
    pub active_s: f64,
    pub budget_s: f64,
    pub remaining_s: f64,
    pub score_count: usize,
    pub best: Option<f64>,
    pub last: LastScore,
    /// Seconds since the last scoring run finished.
    pub since_score_s: Option<f64>,
    /// Seconds since the last keystroke or exec (or restart of the clock).
    pub idle_s: Option<f64>,
    pub scoring: bool,
    pub alerts: Vec<Alert>,
}

impl Row {
    pub fn build(t: &Tracked, limits: &Thresholds, now: DateTime<Utc>) -> Row {
        let v = &t.view;
        let last = match t.scores.last() {
            None => LastScore::None,
            Some(s) => match (s.valid, s.normalized) {
                (Some(true), Some(n)) => LastScore::Valid(n),
                _ => LastScore::Invalid,
            },
        };
        let live = v.state == Phase::Running || v.state == Phase::Paused;
        Row {
            id: v.id.clone(),
            participant: v.participant.clone(),
            kind: v.kind,
            environment: v.environment.clone(),
            hidden: !v.visible,
            state: v.state,
            pause_reason: v.pause_reason,
            end_reason: v.end_reason,
            active_s: t.active_s(now),
            budget_s: v.budget_s,
            remaining_s: t.remaining_s(now),
            score_count: v.score_count.max(t.scores.len()),
            best: t.best().and_then(|s| s.normalized),
            last,
            since_score_s: t
                .scores
                .last()
                .filter(|_| live)
                .map(|s| shown_age(seconds_between(s.at, now))),
            idle_s: if v.state == Phase::Running {
                t.active_since()
                    .map(|s| shown_age(seconds_between(s, now).max(0.0)))
            } else {
                None
            },
            scoring: v.scoring_since.is_some(),
            alerts: session_alerts(t, limits, now),
        }
    }
}

/// An age rounded down to what the table shows (seconds under a minute,
/// then minutes), so a row only changes when its text does.
fn shown_age(seconds: f64) -> f64 {
    if seconds < 60.0 {
        seconds.floor()
    } else {
        (seconds / 60.0).floor() * 60.0
    }
}

impl Row {
    /// The most urgent alert kind (for sorting).
    pub fn top_alert(&self) -> Option<AlertKind> {
        self.alerts.first().map(|a| a.kind)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    All,
    /// Running or paused.
    Live,
    Running,
    Paused,
    Created,
    Ended,
}

impl StateFilter {
    const CYCLE: [StateFilter; 6] = [
        StateFilter::All,
        StateFilter::Live,
        StateFilter::Running,
        StateFilter::Paused,
        StateFilter::Created,
        StateFilter::Ended,
    ];

    pub fn label(&self) -> &'static str {
        match self {
            StateFilter::All => "all",
            StateFilter::Live => "live",
            StateFilter::Running => "running",
            StateFilter::Paused => "paused",
            StateFilter::Created => "not started",
            StateFilter::Ended => "ended",
        }
    }

    fn matches(&self, state: Phase) -> bool {
        match self {
            StateFilter::All => true,
            StateFilter::Live => matches!(state, Phase::Running | Phase::Paused),
            StateFilter::Running => state == Phase::Running,
            StateFilter::Paused => state == Phase::Paused,
            // Waiting for hardware is not started either.
            StateFilter::Created => matches!(state, Phase::Created | Phase::Queued),
            StateFilter::Ended => state == Phase::Ended,
        }
    }

    pub fn next(self) -> StateFilter {
        cycle(&Self::CYCLE, self)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Sessions with the most urgent alerts first, then by participant.
    Alerts,
    Participant,
    Environment,
    State,
    Remaining,
    Best,
    Idle,
}

impl SortKey {
    const CYCLE: [SortKey; 7] = [
        SortKey::Alerts,
        SortKey::Participant,
        SortKey::Environment,
        SortKey::State,
        SortKey::Remaining,
        SortKey::Best,
        SortKey::Idle,
    ];

    pub fn label(&self) -> &'static str {
        match self {
            SortKey::Alerts => "alerts",
            SortKey::Participant => "participant",
            SortKey::Environment => "environment",
            SortKey::State => "state",
            SortKey::Remaining => "time left",
            SortKey::Best => "best score",
            SortKey::Idle => "idle",
        }
    }

    pub fn next(self) -> SortKey {
        cycle(&Self::CYCLE, self)
    }
}

fn cycle<T: Copy + PartialEq>(all: &[T], now: T) -> T {
    let i = all.iter().position(|x| *x == now).unwrap_or(0);
    all[(i + 1) % all.len()]
}

/// What the proctor narrowed the table to.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    pub state: StateFilter,
    /// An environment id, or every environment.
    pub environment: Option<String>,
    /// `human` or `agent`, or both.
    pub kind: Option<Kind>,
    pub alerts_only: bool,
    /// Part of a participant's name (case-insensitive).
    pub search: String,
    pub sort: SortKey,
    pub descending: bool,
}

impl Default for View {
    fn default() -> Self {
        View {
            state: StateFilter::All,
            environment: None,
            kind: None,
            alerts_only: false,
            search: String::new(),
            sort: SortKey::Alerts,
            descending: false,
        }
    }
}

impl View {
    pub fn matches(&self, row: &Row) -> bool {
        self.state.matches(row.state)
            && self
                .environment
                .as_ref()
                .is_none_or(|e| *e == row.environment)
            && self.kind.as_ref().is_none_or(|k| *k == row.kind)
            && (!self.alerts_only || !row.alerts.is_empty())
            && (self.search.is_empty()
                || row
                    .participant
                    .to_lowercase()
                    .contains(&self.search.to_lowercase()))
    }

    pub fn sort(&self, rows: &mut [Row]) {
        use std::cmp::Ordering;
        let state_rank = |s: Phase| match s {
            Phase::Running => 0,
            Phase::Paused => 1,
            Phase::Created => 2,
            Phase::Queued => 3,
            Phase::Ended => 4,
        };
        // Highest first; rows without a value go last.
        let highest_first = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => b.total_cmp(&a),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        rows.sort_by(|a, b| {
            let primary = match self.sort {
                SortKey::Alerts => match (a.top_alert(), b.top_alert()) {
                    (Some(x), Some(y)) => x.cmp(&y).then(b.alerts.len().cmp(&a.alerts.len())),
                    (Some(_), None) => Ordering::Less,
                    (None, Some(_)) => Ordering::Greater,
                    (None, None) => state_rank(a.state).cmp(&state_rank(b.state)),
                },
                SortKey::Participant => a.participant.cmp(&b.participant),
                SortKey::Environment => a.environment.cmp(&b.environment),
                SortKey::State => state_rank(a.state).cmp(&state_rank(b.state)),
                SortKey::Remaining => a.remaining_s.total_cmp(&b.remaining_s),
                // Best first, most idle first: what a proctor looks for.
                SortKey::Best => highest_first(a.best, b.best),
                SortKey::Idle => highest_first(a.idle_s, b.idle_s),
            };
            let primary = if self.descending {
                primary.reverse()
            } else {
                primary
            };
            primary
                .then_with(|| a.participant.cmp(&b.participant))
                .then_with(|| a.id.cmp(&b.id))
        });
    }

    pub fn describe(&self) -> String {
        let mut parts = vec![format!("state {}", self.state.label())];
        parts.push(format!(
            "env {}",
            self.environment.as_deref().unwrap_or("all")
        ));
        parts.push(format!("kind {}", self.kind.map_or("all", |k| k.as_str())));
        if self.alerts_only {
            parts.push("alerts only".into());
        }
        if !self.search.is_empty() {
            parts.push(format!("participant ~ \"{}\"", self.search));
        }
        let dir = if self.descending { "↑" } else { "↓" };
        parts.push(format!("sort {} {dir}", self.sort.label()));
        parts.join(" · ")
    }
}

/// Every session's row, unfiltered, unsorted.
pub fn all_rows(fleet: &Fleet, limits: &Thresholds, now: DateTime<Utc>) -> Vec<Row> {
    fleet
        .sessions
        .values()
        .map(|t| Row::build(t, limits, now))
        .collect()
}

/// The rows the view keeps, in its order.
pub fn select(rows: Vec<Row>, view: &View) -> Vec<Row> {
    let mut rows: Vec<Row> = rows.into_iter().filter(|r| view.matches(r)).collect();
    view.sort(&mut rows);
    rows
}

/// Every session's row, then the ones the view keeps, in its order.
pub fn table(fleet: &Fleet, view: &View, limits: &Thresholds, now: DateTime<Utc>) -> Vec<Row> {
    select(all_rows(fleet, limits, now), view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::proctor::model::tests::{at, view};

    fn fleet() -> Fleet {
        let mut fleet = Fleet::default();
        for (id, who, state, env, kind, idle_from) in [
            ("a1", "alice", Phase::Running, "fixed", Kind::Human, 0),
            ("b2", "bob", Phase::Paused, "fixed", Kind::Agent, 1000),
            ("c3", "carol", Phase::Running, "kernel", Kind::Agent, 1000),
            ("d4", "dave", Phase::Ended, "kernel", Kind::Human, 1000),
        ] {
            let mut v = view(id);
            v.participant = who.into();
            v.state = state;
            v.environment = env.into();
            v.kind = kind;
            v.last_activity_at = Some(at(idle_from));
            if state == Phase::Ended {
                v.end_reason = Some(EndReason::Submitted);
            }
            fleet.load_show(v, at(1000));
        }
        fleet
    }

    fn ids(rows: &[Row]) -> Vec<&str> {
        rows.iter().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn filters_narrow_and_sorts_order() {
        let fleet = fleet();
        let limits = Thresholds::default();
        let now = at(1100);
        let mut view = View::default();
        // Alice is idle (since 0): she comes first.
        assert_eq!(
            ids(&table(&fleet, &view, &limits, now)),
            ["a1", "c3", "b2", "d4"]
        );
        view.alerts_only = true;
        assert_eq!(ids(&table(&fleet, &view, &limits, now)), ["a1"]);
        view.alerts_only = false;
        view.state = StateFilter::Live;
        view.kind = Some(Kind::Agent);
        assert_eq!(ids(&table(&fleet, &view, &limits, now)), ["c3", "b2"]);
        view = View {
            environment: Some("kernel".into()),
            sort: SortKey::Participant,
            descending: true,
            ..View::default()
        };
        assert_eq!(ids(&table(&fleet, &view, &limits, now)), ["d4", "c3"]);
        view = View {
            search: "AR".into(),
            ..View::default()
        };
        assert_eq!(ids(&table(&fleet, &view, &limits, now)), ["c3"]);
        view = View {
            sort: SortKey::Idle,
            ..View::default()
        };
        // The ended session has no idle time: last.
        assert_eq!(ids(&table(&fleet, &view, &limits, now))[0], "a1");
        assert_eq!(ids(&table(&fleet, &view, &limits, now))[3], "d4");
    }

    #[test]
    fn cycles_wrap_around() {
        let mut s = StateFilter::All;
        for _ in 0..6 {
            s = s.next();
        }
        assert_eq!(s, StateFilter::All);
        assert_eq!(SortKey::Idle.next(), SortKey::Alerts);
    }
}
