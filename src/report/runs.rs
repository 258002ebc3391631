//! Loading runs: from the server (admin client) or from `jsonl` export files,
//! and turning a session view plus its events into the [`Run`] the report reads.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::client::Client;
use crate::environment::normalize::Aggregate;
use crate::paths::DataPaths;
use crate::protocol::{Request, SessionView};
use crate::session::{Kind, PauseReason, Phase, ScorePhase};

/// One entry of a run's score log, reduced to what the report needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScorePoint {
    /// Active time of the entry; the starting solution's entry is at 0.
    pub active_s: f64,
    /// `None` for an invalid entry (it gives no score).
    pub normalized: Option<f64>,
    /// The starting solution's score, taken by the system, not by the participant.
    pub starting: bool,
}

/// A started session, as the report sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub id: String,
    pub environment: String,
    pub participant: String,
    pub kind: Kind,
    /// The agent's name, for an agent session that has one.
    pub agent: Option<String>,
    pub started_at: DateTime<Utc>,
    pub ended: bool,
    pub budget_s: f64,
    pub active_s: f64,
    /// False when the environment hides scores from the participant (e.g. Scaling Law).
    pub visible: bool,
    pub aggregate: Aggregate,
    pub scores: Vec<ScorePoint>,
    /// The environment's version (its manifest's hash; empty if unknown).
    pub version: String,
    /// Time added by extensions: the run is compared at its original budget
    /// (`budget_s`), never at the extended one.
    pub extended_s: f64,
    /// The final normalized score per `aggregate`; `None` when no entry is valid.
    pub final_score: Option<f64>,
    pub usage: UsageTotals,
    /// Its scores are raw units, not normalized (a family task without
    /// starting and reference scores).
    pub unnormalized: bool,
    /// The devices it held, in words (None: made before grants named devices).
    pub hardware: Option<String>,
}

/// Summed `usage` events of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageTotals {
    pub events: usize,
    pub cost_usd: f64,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

// Budgets and active times come from milliseconds; comparisons allow for rounding.
const TIME_TOLERANCE_S: f64 = 1e-6;

impl Run {
    /// The final score used in means: a run with no valid entry counts as 0.
    /// Who the run is compared as: `human`, the agent's name, or `agent`
    /// for agent sessions that name no agent (pooled).
    pub fn group(&self) -> &str {
        match (self.kind, &self.agent) {
            (Kind::Human, _) => Kind::Human.as_str(),
            (Kind::Agent, Some(name)) => name,
            (Kind::Agent, None) => Kind::Agent.as_str(),
        }
    }

    pub fn final_or_zero(&self) -> f64 {
        self.final_score.unwrap_or(0.0)
    }

    /// Scoring-function runs the participant asked for (the starting score is not one).
    pub fn scoring_attempts(&self) -> usize {
        self.scores.iter().filter(|s| !s.starting).count()
    }

    /// Whether the run's score at active time `t` is known and comparable: its
    /// budget reaches `t` (RE-Bench uses runs of budget >= t) and it either
    /// ended (its score then stays at its final value) or has been active that long.
    pub fn covers(&self, t_s: f64) -> bool {
        self.budget_s + TIME_TOLERANCE_S >= t_s
            && (self.ended || self.active_s + TIME_TOLERANCE_S >= t_s)
    }
}

/// A session as stored or exported: its admin view and its raw event log.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub view: SessionView,
    /// Events as JSON, read leniently so newer event types never break a report.
    pub events: Vec<Value>,
}

/// Which sessions a report covers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    pub environments: Vec<String>,
    pub kind: Option<Kind>,
    /// Only these agents (by name); humans stay, for the comparison.
    pub agents: Vec<String>,
    pub participants: Vec<String>,
    pub since: Option<DateTime<Utc>>,
    /// Only runs that ended so (`submitted`, …; `running` for those that
    /// have not); empty: any.
    pub end_reasons: Vec<String>,
    pub exclude_ended_by_proctor: bool,
    /// Leave out runs whose record shows one of these alerts (`RECORD_ALERTS`).
    pub exclude_alerts: Vec<String>,
    /// Pool runs of different versions of an environment.
    pub any_version: bool,
}

/// Alerts a finished run's record shows (as the proctor's `PROTECTED` and
/// `CRASH`): a score entry refused for a changed, missing or unreadable
/// protected file; a pause for crash recovery.
pub const RECORD_ALERTS: [&str; 2] = ["protected_file", "crash_recovery"];

/// The `RECORD_ALERTS` a session's record shows.
pub fn record_alerts(record: &SessionRecord) -> Vec<&'static str> {
    let protected = |message: &str| message.starts_with("protected file");
    let protected_file = match &record.view.scores {
        Some(scores) => scores
            .iter()
            .any(|s| s.valid == Some(false) && protected(&s.message)),
        None => record.events.iter().any(|e| {
            e.get("type").and_then(Value::as_str) == Some("scored")
                && e.pointer("/entry/valid").and_then(Value::as_bool) == Some(false)
                && e.pointer("/entry/message")
                    .and_then(Value::as_str)
                    .is_some_and(protected)
        }),
    };
    let crash_recovery = record
        .view
        .pauses
        .iter()
        .any(|p| p.reason == PauseReason::CrashRecovery);
    RECORD_ALERTS
        .into_iter()
        .zip([protected_file, crash_recovery])
        .filter_map(|(kind, shown)| shown.then_some(kind))
        .collect()
}

impl RunFilter {
    /// Whether a session belongs to the report. Sessions that never started are no runs.
    pub fn matches(&self, view: &SessionView) -> bool {
        let Some(started_at) = view.started_at else {
            return false;
        };
        (self.environments.is_empty() || self.environments.contains(&view.environment))
            && self.kind.is_none_or(|kind| kind == view.kind)
            && (self.agents.is_empty()
                || view.kind == Kind::Human
                || view
                    .agent
                    .as_ref()
                    .is_some_and(|a| self.agents.contains(&a.name)))
            && (self.participants.is_empty() || self.participants.contains(&view.participant))
            && self.since.is_none_or(|since| started_at >= since)
    }

    /// Whether a matching run ended as asked (`--only`,
    /// `--exclude-ended-by-proctor`); those that did not are counted as
    /// excluded, never silently dropped.
    pub fn ends_as_asked(&self, view: &SessionView) -> bool {
        let end = end_label(view);
        (self.end_reasons.is_empty() || self.end_reasons.contains(&end))
            && !(self.exclude_ended_by_proctor && end == "ended_by_proctor")
    }

    /// The first alert asked to be excluded (`--exclude-alert`) that the
    /// record shows; such runs are counted as excluded, never silently dropped.
    pub fn excluded_alert(&self, record: &SessionRecord) -> Option<&'static str> {
        if self.exclude_alerts.is_empty() {
            return None;
        }
        record_alerts(record)
            .into_iter()
            .find(|kind| self.exclude_alerts.iter().any(|k| k == kind))
    }
}

/// How a session ended (`running` while it has not).
pub fn end_label(view: &SessionView) -> String {
    view.end_reason
        .map_or_else(|| "running".to_string(), |r| r.to_string())
}

impl Run {
    /// Builds a run from a session record; `Ok(None)` when it never started.
    pub fn from_record(record: &SessionRecord) -> anyhow::Result<Option<Run>> {
        let view = &record.view;
        let Some(started_at) = view.started_at else {
            return Ok(None);
        };
        let kind = view.kind;
        let aggregate: Aggregate = view
            .aggregate
            .parse()
            .map_err(|e: String| anyhow::anyhow!("session {}: {e}", view.id))?;
        let scores = match &view.scores {
            Some(scores) => scores
                .iter()
                .map(|s| ScorePoint {
                    active_s: if s.phase == ScorePhase::Starting {
                        0.0
                    } else {
                        s.active_s
                    },
                    normalized: valid_normalized(s.valid, s.normalized),
                    starting: s.phase == ScorePhase::Starting,
                })
                .collect(),
            // A listing view carries no scores; the event log has them all.
            None => scores_from_events(&record.events),
        };
        let extended_s: f64 = view.extensions.iter().map(|e| e.by_s).sum();
        let final_score = view
            .final_score
            .map(|f| f.normalized)
            .filter(|n| n.is_finite())
            .or_else(|| aggregate_normalized(aggregate, &scores));
        Ok(Some(Run {
            id: view.id.clone(),
            environment: view.environment.clone(),
            participant: view.participant.clone(),
            kind,
            agent: view
                .agent
                .as_ref()
                .map(|a| a.name.clone())
                .filter(|_| kind == Kind::Agent),
            started_at,
            ended: view.state == Phase::Ended,
            budget_s: (view.budget_s - extended_s).max(0.0),
            extended_s,
            version: view.manifest_hash.clone(),
            active_s: view.active_s,
            visible: view.visible,
            aggregate,
            scores,
            final_score,
            usage: usage_from_events(&record.events),
            unnormalized: view.unnormalized,
            hardware: view.grant.as_ref().map(|g| g.describe()),
        }))
    }
}

fn valid_normalized(valid: Option<bool>, normalized: Option<f64>) -> Option<f64> {
    normalized.filter(|n| valid == Some(true) && n.is_finite())
}

/// The final normalized score of valid entries in log order (best, or last).
pub fn aggregate_normalized(aggregate: Aggregate, scores: &[ScorePoint]) -> Option<f64> {
    let mut valid = scores.iter().filter_map(|s| s.normalized);
    match aggregate {
        Aggregate::Last => valid.next_back(),
        Aggregate::Best => valid.reduce(f64::max),
    }
}

fn scores_from_events(events: &[Value]) -> Vec<ScorePoint> {
    events
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("scored"))
        .filter_map(|e| {
            let entry = e.get("entry")?;
            let starting = entry.get("phase").and_then(Value::as_str) == Some("starting");
            let active_ms = e.get("active_ms").and_then(Value::as_f64).unwrap_or(0.0);
            Some(ScorePoint {
                active_s: if starting { 0.0 } else { active_ms / 1000.0 },
                normalized: valid_normalized(
                    entry.get("valid").and_then(Value::as_bool),
                    entry.get("normalized").and_then(Value::as_f64),
                ),
                starting,
            })
        })
        .collect()
}

fn usage_from_events(events: &[Value]) -> UsageTotals {
    let mut totals = UsageTotals::default();
    for event in events {
        if !matches!(
            event.get("type").and_then(Value::as_str),
            Some("usage" | "model_call")
        ) {
            continue;
        }
        totals.events += 1;
        let cost = event.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0);
        // A negative or non-finite cost is a client bug; it must not cancel real spend.
        if cost.is_finite() && cost > 0.0 {
            totals.cost_usd += cost;
        }
        let tokens = |field: &str| event.get(field).and_then(Value::as_u64).unwrap_or(0);
        totals.tokens_in = totals.tokens_in.saturating_add(tokens("tokens_in"));
        totals.tokens_out = totals.tokens_out.saturating_add(tokens("tokens_out"));
    }
    totals
}

/// Parses a `jsonl` export: a `session` record, then its `event` records;
/// more sessions may follow. Other record kinds (terminal chunks) are skipped.
pub fn parse_export(text: &str, origin: &str) -> anyhow::Result<Vec<SessionRecord>> {
    let mut records: Vec<SessionRecord> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line)
            .with_context(|| format!("{origin}:{line_no}: not a JSON line"))?;
        match value.get("record").and_then(Value::as_str) {
            Some("session") => {
                let session = value.get("session").cloned().unwrap_or(Value::Null);
                let view: SessionView =
                    serde_path_to_error::deserialize(session).map_err(|e| {
                        anyhow::anyhow!(
                            "{origin}:{line_no}: the session record is not a session view: session.{}: {}",
                            e.path(),
                            e.inner()
                        )
                    })?;
                records.push(SessionRecord {
                    view,
                    events: Vec::new(),
                });
            }
            Some("event") => {
                let Some(current) = records.last_mut() else {
                    bail!("{origin}:{line_no}: an event record before any session record");
                };
                if let Some(event) = value.get("event") {
                    current.events.push(event.clone());
                }
            }
            _ => {}
        }
    }
    if records.is_empty() {
        bail!("{origin}: no session record (is it a rebench jsonl export?)");
    }
    Ok(records)
}

/// Reads export files given with `--from`.
pub fn load_export_files(files: &[PathBuf]) -> anyhow::Result<Vec<SessionRecord>> {
    let mut records = Vec::new();
    for file in files {
        records.extend(load_export_file(file)?);
    }
    Ok(records)
}

fn load_export_file(file: &Path) -> anyhow::Result<Vec<SessionRecord>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    parse_export(&text, &file.display().to_string())
}

/// Fetches matching sessions from the data dir's server (which owns the store):
/// the listing, then each session's full view and events.
/// The matching sessions' records, and the environments of every session
/// on the server.
pub async fn load_from_server(
    paths: &DataPaths,
    filter: &RunFilter,
) -> anyhow::Result<(std::collections::BTreeSet<String>, Vec<SessionRecord>)> {
    let mut client = Client::connect_admin(paths, "rebench report").await?;
    let listing: Vec<SessionView> = client.call(Request::ListSessions).await?;
    let mut records = Vec::new();
    for summary in listing.iter().filter(|v| filter.matches(v)) {
        let session = summary.id.clone();
        let view: SessionView = client
            .call(Request::Show {
                session: session.clone(),
            })
            .await
            .with_context(|| format!("cannot show session {session}"))?;
        let events: Vec<Value> = client
            .call(Request::Events {
                session: session.clone(),
            })
            .await
            .with_context(|| format!("cannot read the events of session {session}"))?;
        records.push(SessionRecord { view, events });
    }
    let known = listing.iter().map(|v| v.environment.clone()).collect();
    Ok((known, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session_line(id: &str) -> String {
        serde_json::json!({"record": "session", "session": {
            "id": id, "environment": "e", "title": "E", "profile": null, "participant": "p",
            "kind": "agent", "state": "ended", "pause_reason": null, "end_reason": "submitted",
            "workspace": "/w", "budget_s": 60.0, "active_s": 60.0, "remaining_s": 0.0,
            "created_at": "2025-01-01T00:00:00Z", "started_at": "2025-01-01T00:00:00Z",
            "ended_at": "2025-01-01T00:01:00Z", "metric": "m", "unit": "", "visible": true,
            "aggregate": "best", "allow_missing_hardware": false, "hardware_missing": [],
            "pauses": [], "extensions": [], "notes": [], "score_count": 0, "final": null
        }})
        .to_string()
    }

    #[test]
    fn exports_may_hold_several_sessions_and_unknown_records() {
        let usage = r#"{"record":"event","event":{"seq":1,"at":"2025-01-01T00:00:10Z","active_ms":10000,"type":"usage","tokens_in":5,"tokens_out":2,"cost_usd":1.5}}"#;
        let future = r#"{"record":"event","event":{"seq":2,"at":"2025-01-01T00:00:11Z","active_ms":11000,"type":"teleported"}}"#;
        let chunk = r#"{"record":"chunk","shell":1,"chunk":{}}"#;
        let text = [
            session_line("a"),
            usage.into(),
            chunk.into(),
            future.into(),
            String::new(),
            session_line("b"),
        ]
        .join("\n");
        let records = parse_export(&text, "x.jsonl").unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].events.len(), 2);
        let run = Run::from_record(&records[0]).unwrap().unwrap();
        assert_eq!(run.usage.cost_usd, 1.5);
        assert_eq!((run.usage.tokens_in, run.usage.tokens_out), (5, 2));
        assert_eq!(run.final_score, None);
        assert!(records[1].events.is_empty());
    }

    #[test]
    fn broken_exports_say_where() {
        let event = r#"{"record":"event","event":{}}"#;
        let err = parse_export(event, "x.jsonl").unwrap_err().to_string();
        assert!(
            err.contains("x.jsonl:1") && err.contains("before any session"),
            "{err}"
        );
        let err = parse_export(&format!("{}\n{{oops", session_line("a")), "y.jsonl")
            .unwrap_err()
            .to_string();
        assert!(err.contains("y.jsonl:2"), "{err}");
        let err = parse_export(r#"{"record":"session","session":{}}"#, "z.jsonl")
            .unwrap_err()
            .to_string();
        assert!(err.contains("z.jsonl:1"), "{err}");
        let err = parse_export("", "empty.jsonl").unwrap_err().to_string();
        assert!(err.contains("no session record"), "{err}");
    }

    #[test]
    fn unknown_kinds_are_refused_and_unstarted_sessions_are_no_runs() {
        let robot = session_line("a").replace(r#""kind":"agent""#, r#""kind":"robot""#);
        assert!(robot.contains("robot"));
        let err = parse_export(&robot, "x.jsonl").unwrap_err().to_string();
        assert!(
            err.contains("x.jsonl:1") && err.contains("session.kind") && err.contains("robot"),
            "{err}"
        );
        let mut record = parse_export(&session_line("a"), "x").unwrap().remove(0);
        record.view.kind = Kind::Human;
        record.view.started_at = None;
        assert_eq!(Run::from_record(&record).unwrap(), None);
        assert!(!RunFilter::default().matches(&record.view));
    }

    #[test]
    fn agent_filters_keep_the_humans_and_model_calls_count_as_usage() {
        let call = r#"{"record":"event","event":{"seq":1,"at":"2025-01-01T00:00:10Z","active_ms":10000,"type":"model_call","model":"m","input":[],"output":{"role":"assistant","text":"hi"},"request_messages":1,"request_bytes":10,"tokens_in":7,"tokens_out":3,"cost_usd":0.25,"latency_ms":5}}"#;
        let text = [session_line("a"), call.into()].join("\n");
        let mut agent = parse_export(&text, "x").unwrap().remove(0);
        let run = Run::from_record(&agent).unwrap().unwrap();
        assert_eq!((run.usage.tokens_in, run.usage.tokens_out), (7, 3));
        assert_eq!(run.usage.cost_usd, 0.25);
        assert_eq!(run.group(), "agent");
        agent.view.agent = Some(crate::session::AgentIdentity {
            name: "gpt-x".into(),
            model: "x".into(),
            scaffold: "builtin".into(),
        });
        assert_eq!(Run::from_record(&agent).unwrap().unwrap().group(), "gpt-x");
        let mut human = agent.clone();
        human.view.kind = Kind::Human;
        let only = |names: &[&str]| RunFilter {
            agents: names.iter().map(|n| n.to_string()).collect(),
            ..RunFilter::default()
        };
        assert!(only(&["gpt-x"]).matches(&agent.view));
        assert!(!only(&["other"]).matches(&agent.view));
        assert!(
            only(&["other"]).matches(&human.view),
            "humans stay for the comparison"
        );
    }
}
