//! What a proctor should look at, computed from a session's state and the
//! time now (injected, so every rule is tested without waiting).

use chrono::{DateTime, Utc};

use super::model::{Tracked, seconds_between};
use super::settings::Thresholds;
use crate::protocol::ScoreView;
use crate::session::PauseReason;
use crate::session::Phase;
use crate::tui::widgets::format;

/// Alert kinds, most urgent first (the order rows and the list sort by).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlertKind {
    CrashRecovery,
    ProtectedFile,
    ScorerFailing,
    ScoreInvalid,
    ScoreDropped,
    /// The budget was changed by someone other than a proctor (the CLI, a
    /// script): worth a look, since time is what is measured.
    BudgetChanged,
    BudgetLow,
    ShellExited,
    LongPause,
    Idle,
    /// It holds a GPU it has not used for long (others may be waiting).
    GpuIdle,
    /// Queued for a GPU that a process of an ended session still holds.
    GpuUnclean,
}

impl AlertKind {
    pub const ALL: [AlertKind; 12] = [
        AlertKind::CrashRecovery,
        AlertKind::ProtectedFile,
        AlertKind::ScorerFailing,
        AlertKind::ScoreInvalid,
        AlertKind::ScoreDropped,
        AlertKind::BudgetChanged,
        AlertKind::BudgetLow,
        AlertKind::ShellExited,
        AlertKind::LongPause,
        AlertKind::Idle,
        AlertKind::GpuIdle,
        AlertKind::GpuUnclean,
    ];

    /// The short tag shown in a table row.
    pub fn tag(&self) -> &'static str {
        match self {
            AlertKind::CrashRecovery => "CRASH",
            AlertKind::ProtectedFile => "PROTECTED",
            AlertKind::ScorerFailing => "SCORER",
            AlertKind::ScoreInvalid => "INVALID",
            AlertKind::ScoreDropped => "DROP",
            AlertKind::BudgetChanged => "BUDGET",
            AlertKind::BudgetLow => "LOW TIME",
            AlertKind::ShellExited => "SHELL",
            AlertKind::LongPause => "LONG PAUSE",
            AlertKind::Idle => "IDLE",
            AlertKind::GpuIdle => "GPU IDLE",
            AlertKind::GpuUnclean => "GPU HELD",
        }
    }

    /// Kinds that point at a possible rule break or a broken session (red).
    pub fn severe(&self) -> bool {
        matches!(
            self,
            AlertKind::CrashRecovery | AlertKind::ProtectedFile | AlertKind::ScorerFailing
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    pub kind: AlertKind,
    /// Since when the condition holds.
    pub since: DateTime<Utc>,
    pub text: String,
}

/// Every alert of one session now, most urgent first.
pub fn session_alerts(t: &Tracked, limits: &Thresholds, now: DateTime<Utc>) -> Vec<Alert> {
    let mut alerts = Vec::new();
    // A protected-file violation matters after the end too (for the review).
    protected_file(t, &mut alerts);
    if t.ended() {
        return alerts;
    }
    let v = &t.view;
    if let Some(pause) = t.open_pause().filter(|_| v.state == Phase::Paused) {
        if pause.reason == PauseReason::CrashRecovery {
            alerts.push(Alert {
                kind: AlertKind::CrashRecovery,
                since: pause.start,
                text: "paused by crash recovery: the server restarted; resume when ready".into(),
            });
        }
        let paused_s = seconds_between(pause.start, now);
        if paused_s > limits.paused_after_s {
            alerts.push(Alert {
                kind: AlertKind::LongPause,
                since: pause.start,
                text: format!(
                    "paused ({}) for {}",
                    pause.reason.label(),
                    format::human_duration(paused_s)
                ),
            });
        }
    }
    score_trouble(t, limits, &mut alerts);
    budget_changes(t, &mut alerts);
    let started = v.started_at.is_some();
    let remaining = t.remaining_s(now);
    if started && remaining < limits.budget_low_s {
        // When the clock crossed the line: stable while it runs, and while
        // paused the pause's start is as close as we can know.
        let short_by =
            chrono::Duration::milliseconds(((limits.budget_low_s - remaining) * 1000.0) as i64);
        let since = match t.open_pause() {
            Some(p) if !t.running() => p.start.min(now - short_by),
            _ => now - short_by,
        };
        // A budget shorter than the line (or pauses since) puts that moment
        // before the start: the clock was under it from the start.
        let since = v.started_at.map_or(since, |start| since.max(start));
        alerts.push(Alert {
            kind: AlertKind::BudgetLow,
            since,
            text: format!("{} of budget left", format::clock(remaining)),
        });
    }
    for exit in &t.shell_exits {
        let how = match (exit.code, exit.signal) {
            (_, Some(sig)) => format!("killed by signal {sig}"),
            (Some(code), None) => format!("exit code {code}"),
            (None, None) => "exited".into(),
        };
        alerts.push(Alert {
            kind: AlertKind::ShellExited,
            since: exit.at,
            text: format!("shell {} exited ({how})", exit.shell),
        });
    }
    if t.running()
        && let Some(since) = t.active_since()
    {
        let idle_s = seconds_between(since, now);
        if idle_s > limits.idle_after_s {
            alerts.push(Alert {
                kind: AlertKind::Idle,
                since,
                text: format!(
                    "idle for {}: no keystroke or exec",
                    format::human_duration(idle_s)
                ),
            });
        }
    }
    gpu_idle(t, limits, now, &mut alerts);
    if v.state == Phase::Queued
        && let Some(why) = v
            .waiting_for
            .as_ref()
            .filter(|w| w.contains("still in use"))
    {
        alerts.push(Alert {
            kind: AlertKind::GpuUnclean,
            since: v.created_at,
            text: format!(
                "queued for {why}: a stray process holds it (see `rebench hosts`, `nvidia-smi`)"
            ),
        });
    }
    alerts.sort_by_key(|a| a.kind);
    alerts
}

/// A live session holding GPUs none of which was busy for a long time.
fn gpu_idle(t: &Tracked, limits: &Thresholds, now: DateTime<Utc>, alerts: &mut Vec<Alert>) {
    let v = &t.view;
    let Some(used_at) = v.gpu_used_at.filter(|_| !v.gpu_use.is_empty()) else {
        return;
    };
    let idle_s = seconds_between(used_at, now);
    if idle_s > limits.gpu_idle_after_s {
        let gpus: Vec<String> = v.gpu_use.iter().map(|u| u.index.to_string()).collect();
        alerts.push(Alert {
            kind: AlertKind::GpuIdle,
            since: used_at,
            text: format!(
                "holds GPU {} but has not used it for {}",
                gpus.join(", "),
                format::human_duration(idle_s)
            ),
        });
    }
}

fn invalid(s: &ScoreView) -> bool {
    s.valid == Some(false)
}

fn protected_file(t: &Tracked, alerts: &mut Vec<Alert>) {
    if let Some(s) = t
        .scores
        .iter()
        .rev()
        .find(|s| invalid(s) && s.message.starts_with("protected file"))
    {
        alerts.push(Alert {
            kind: AlertKind::ProtectedFile,
            since: s.at,
            text: s.message.clone(),
        });
    }
}

/// The scorer failing over and over, the last entry invalid, or a drop.
fn score_trouble(t: &Tracked, limits: &Thresholds, alerts: &mut Vec<Alert>) {
    let scores = &t.scores;
    let Some(last) = scores.last() else {
        return;
    };
    let run = scores.iter().rev().take_while(|s| invalid(s)).count();
    if run >= limits.failing_run {
        let first = &scores[scores.len() - run];
        alerts.push(Alert {
            kind: AlertKind::ScorerFailing,
            since: first.at,
            text: format!("last {run} scoring runs invalid: {}", last.message),
        });
        return;
    }
    // Protected-file entries have their own alert.
    if invalid(last) && !last.message.starts_with("protected file") {
        if scores.len() >= 2 {
            alerts.push(Alert {
                kind: AlertKind::ScoreInvalid,
                since: last.at,
                text: format!("score became invalid: {}", last.message),
            });
        }
        return;
    }
    let mut valid = crate::tui::widgets::score::valid_scores(&t.scores).rev();
    if let (Some(now), Some(before)) = (valid.next(), valid.next())
        && std::ptr::eq(now, last)
        && let (Some(n), Some(b)) = (now.normalized, before.normalized)
        && n < b
    {
        alerts.push(Alert {
            kind: AlertKind::ScoreDropped,
            since: now.at,
            text: format!(
                "score dropped {} → {}",
                format::normalized(b),
                format::normalized(n)
            ),
        });
    }
}

/// A proctor's dashboard records its changes as `NAME (proctor)`; any
/// other author (the CLI, a script) of a budget change raises an alert.
fn budget_changes(t: &Tracked, alerts: &mut Vec<Alert>) {
    for e in &t.view.extensions {
        if e.by.ends_with(" (proctor)") {
            continue;
        }
        let change = if e.by_s < 0.0 {
            format!("-{}", format::human_duration(-e.by_s))
        } else {
            format!("+{}", format::human_duration(e.by_s))
        };
        alerts.push(Alert {
            kind: AlertKind::BudgetChanged,
            since: e.at,
            text: format!("budget {change} by {}: {}", e.by, e.reason),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::PauseView;
    use crate::session::ScorePhase;
    use crate::tui::proctor::model::ShellExit;
    use crate::tui::proctor::model::tests::{at, view};

    fn score(seq: u64, secs: i64, normalized: Option<f64>, message: &str) -> ScoreView {
        ScoreView {
            seq,
            run: 0,
            at: at(secs),
            active_s: secs as f64,
            phase: ScorePhase::Intermediate,
            raw: normalized,
            normalized,
            valid: Some(normalized.is_some()),
            message: message.into(),
            hidden: false,
            details: None,
            output: None,
            duration_ms: 5,
        }
    }

    fn tracked(state: Phase) -> Tracked {
        let mut v = view("s1");
        v.state = state;
        Tracked::new(v, at(100))
    }

    fn kinds(t: &Tracked, now: i64) -> Vec<AlertKind> {
        session_alerts(t, &Thresholds::default(), at(now))
            .into_iter()
            .map(|a| a.kind)
            .collect()
    }

    #[test]
    fn idle_counts_from_the_last_keystroke_or_restart_of_the_clock() {
        let mut t = tracked(Phase::Running);
        t.view.last_activity_at = Some(at(50));
        assert!(kinds(&t, 600).is_empty());
        let alerts = session_alerts(&t, &Thresholds::default(), at(700));
        assert_eq!(alerts[0].kind, AlertKind::Idle);
        assert_eq!(alerts[0].since, at(50));
        assert!(alerts[0].text.contains("10m 50s"), "{}", alerts[0].text);
        // A resume after a long pause restarts the idle count.
        t.view.pauses.push(PauseView {
            reason: PauseReason::Break,
            by: "tess".into(),
            note: None,
            start: at(60),
            end: Some(at(650)),
        });
        assert!(kinds(&t, 700).is_empty());
        // Not while paused: that has its own rule.
        t.view.state = Phase::Paused;
        assert!(!kinds(&t, 5000).contains(&AlertKind::Idle));
    }

    #[test]
    fn a_gpu_held_but_unused_for_long_is_an_alert() {
        let mut t = tracked(Phase::Created);
        t.view.gpu_use = vec![crate::hardware::gpu_use::GpuUse {
            index: 3,
            uuid: "GPU-3".into(),
            utilization_pct: 0,
            memory_used_mib: 0,
        }];
        t.view.gpu_used_at = Some(at(100));
        assert!(!kinds(&t, 100 + 1800).contains(&AlertKind::GpuIdle));
        let alerts = session_alerts(&t, &Thresholds::default(), at(100 + 1900));
        let idle = alerts
            .iter()
            .find(|a| a.kind == AlertKind::GpuIdle)
            .expect("a GPU idle alert");
        assert_eq!(idle.since, at(100));
        assert!(
            idle.text
                .starts_with("holds GPU 3 but has not used it for 31m"),
            "{}",
            idle.text
        );
        // Without GPUs (or once ended) there is nothing to say.
        t.view.gpu_use.clear();
        assert!(!kinds(&t, 100 + 1900).contains(&AlertKind::GpuIdle));
    }

    #[test]
    fn a_session_queued_behind_a_stray_process_is_an_alert() {
        let mut t = tracked(Phase::Queued);
        t.view.waiting_for = Some("1 GPU (0 free)".into());
        assert!(!kinds(&t, 200).contains(&AlertKind::GpuUnclean));
        t.view.waiting_for =
            Some("1 GPU (0 free, 1 still in use by an ended session's process)".into());
        assert!(kinds(&t, 200).contains(&AlertKind::GpuUnclean));
    }

    #[test]
    fn long_pauses_and_crash_recovery() {
        let mut t = tracked(Phase::Paused);
        t.view.pauses.push(PauseView {
            reason: PauseReason::CrashRecovery,
            by: "system".into(),
            note: None,
            start: at(0),
            end: None,
        });
        assert_eq!(kinds(&t, 60), vec![AlertKind::CrashRecovery]);
        assert_eq!(
            kinds(&t, 1801),
            vec![AlertKind::CrashRecovery, AlertKind::LongPause]
        );
        t.view.pauses[0].reason = PauseReason::Break;
        let alerts = session_alerts(&t, &Thresholds::default(), at(3600));
        assert_eq!(alerts[0].text, "paused (break) for 1h");
    }

    #[test]
    fn score_drops_invalid_entries_and_a_failing_scorer() {
        let mut t = tracked(Phase::Running);
        t.view.last_activity_at = Some(at(100));
        t.scores = vec![
            score(1, 0, Some(0.0), "start"),
            score(2, 10, Some(0.6), "ok"),
        ];
        assert!(kinds(&t, 120).is_empty());
        t.scores.push(score(3, 20, Some(0.4), "ok"));
        let alerts = session_alerts(&t, &Thresholds::default(), at(120));
        assert_eq!(alerts[0].kind, AlertKind::ScoreDropped);
        assert_eq!(alerts[0].text, "score dropped 0.600 → 0.400");
        t.scores.push(score(4, 30, None, "wrong answer at index 3"));
        assert_eq!(kinds(&t, 120), vec![AlertKind::ScoreInvalid]);
        t.scores.push(score(5, 40, None, "timed out"));
        t.scores.push(score(6, 50, None, "timed out"));
        let alerts = session_alerts(&t, &Thresholds::default(), at(120));
        assert_eq!(alerts[0].kind, AlertKind::ScorerFailing);
        assert_eq!(alerts[0].since, at(30));
        assert_eq!(alerts.len(), 1);
        // A valid score again clears all of it.
        t.scores.push(score(7, 60, Some(0.7), "ok"));
        assert!(kinds(&t, 120).is_empty());
    }

    #[test]
    fn protected_file_changes_stay_flagged_even_after_the_end() {
        let mut t = tracked(Phase::Running);
        t.view.last_activity_at = Some(at(100));
        t.scores = vec![
            score(1, 0, Some(0.0), "start"),
            score(2, 10, None, "protected file changed: helper.py"),
        ];
        assert_eq!(kinds(&t, 120), vec![AlertKind::ProtectedFile]);
        t.scores.push(score(3, 20, Some(0.2), "ok"));
        t.view.state = Phase::Ended;
        let alerts = session_alerts(&t, &Thresholds::default(), at(120));
        assert_eq!(alerts.len(), 1);
        assert_eq!(alerts[0].since, at(10));
    }

    #[test]
    fn low_budget_and_exited_shells() {
        let mut t = tracked(Phase::Running);
        t.view.last_activity_at = Some(at(100));
        t.view.active_s = 7200.0 - 901.0;
        t.synced_at = at(100);
        assert!(kinds(&t, 100).is_empty());
        assert_eq!(kinds(&t, 102), vec![AlertKind::BudgetLow]);
        t.shell_exits.push(ShellExit {
            shell: 1,
            code: Some(0),
            signal: None,
            at: at(101),
        });
        let alerts = session_alerts(&t, &Thresholds::default(), at(102));
        assert_eq!(alerts[1].text, "shell 1 exited (exit code 0)");
        // A 10-minute budget is under the 15-minute line from its start,
        // not from 5 minutes before it.
        t.view.started_at = Some(at(90));
        t.view.budget_s = 600.0;
        t.view.active_s = 10.0;
        let alerts = session_alerts(&t, &Thresholds::default(), at(100));
        assert_eq!(alerts[0].kind, AlertKind::BudgetLow);
        assert_eq!(alerts[0].since, at(90));
        // A session that has not started has no budget alert.
        t.view.started_at = None;
        t.view.state = Phase::Created;
        assert_eq!(kinds(&t, 102), vec![AlertKind::ShellExited]);
    }
}
