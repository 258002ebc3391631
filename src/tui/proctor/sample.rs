//! Made-up sessions at fixed times, for the dashboard's snapshot tests and
//! its benchmark (no server needed). Not used by the dashboard itself.

use chrono::{DateTime, Utc};

use super::model::{Fleet, ShellExit, Tracked};
use crate::protocol::{ExtensionView, NoteView, PauseView, ScoreView, SessionView};
use crate::session::event::ExecRecord;
use crate::session::{EndReason, Event, EventKind, PauseReason, Phase, ScoreEntry, ScorePhase};

/// A fixed wall time: `secs` after the samples' epoch.
pub fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap_or_default()
}

/// The samples' "now" (two hours after their epoch).
pub fn now() -> DateTime<Utc> {
    at(7200)
}

pub struct Spec<'a> {
    pub id: &'a str,
    pub participant: &'a str,
    pub environment: &'a str,
    pub kind: &'a str,
    pub state: &'a str,
    pub active_s: f64,
    pub budget_s: f64,
}

/// A session view, built from JSON so fields added later keep their defaults.
pub fn view(spec: &Spec) -> SessionView {
    let started = spec.state != "created";
    let value = serde_json::json!({
        "id": spec.id, "environment": spec.environment,
        "title": format!("{} task", spec.environment), "profile": null,
        "participant": spec.participant, "kind": spec.kind, "state": spec.state,
        "pause_reason": null, "end_reason": null,
        "workspace": format!("/data/workspaces/{}", spec.id),
        "budget_s": spec.budget_s, "active_s": spec.active_s,
        "remaining_s": (spec.budget_s - spec.active_s).max(0.0),
        "created_at": at(0), "started_at": started.then(|| at(60)),
        "ended_at": null, "metric": "runtime", "unit": "ms", "visible": true,
        "aggregate": "best", "allow_missing_hardware": false, "hardware_missing": [],
        "pauses": [], "extensions": [], "notes": [], "score_count": 0,
        "last_activity_at": started.then(|| at(7150)), "final": null
    });
    serde_json::from_value(value).unwrap_or_else(|_| unreachable!("a valid view"))
}

pub fn score(seq: u64, secs: i64, normalized: Option<f64>, message: &str) -> ScoreView {
    ScoreView {
        seq,
        run: 0,
        at: at(secs),
        active_s: (secs - 60).max(0) as f64,
        phase: if seq == 1 {
            ScorePhase::Starting
        } else {
            ScorePhase::Intermediate
        },
        raw: normalized.map(|n| 4.76 * (1.0 - n) + 1.6 * n),
        normalized,
        valid: Some(normalized.is_some()),
        message: message.into(),
        hidden: false,
        details: normalized.map(|_| serde_json::json!({"trials": 5, "worst_ms": 3.1})),
        output: Some(String::new()),
        duration_ms: 900,
    }
}

fn tracked(spec: &Spec, scores: Vec<ScoreView>) -> Tracked {
    let mut v = view(spec);
    v.score_count = scores.len();
    v.scores = Some(scores);
    Tracked::new(v, now())
}

fn pause(v: &mut SessionView, reason: PauseReason, by: &str, note: Option<&str>, start: i64) {
    v.state = Phase::Paused;
    v.pause_reason = Some(reason);
    v.pauses.push(PauseView {
        reason,
        by: by.into(),
        note: note.map(String::from),
        start: at(start),
        end: None,
    });
}

/// A dozen sessions showing every alert, a hidden-score environment, an
/// agent, a session not started and ended ones.
pub fn showcase() -> Fleet {
    let mut fleet = Fleet::default();
    let h8 = 8.0 * 3600.0;
    let mut add = |t: Tracked| {
        fleet.sessions.insert(t.view.id.clone(), t);
    };
    let steady = || {
        vec![
            score(1, 0, Some(0.0), "start"),
            score(4, 2400, Some(0.412), "ok"),
            score(9, 6600, Some(0.655), "ok"),
        ]
    };
    let spec = |id, participant, environment, kind, state, active_s, budget_s| Spec {
        id,
        participant,
        environment,
        kind,
        state,
        active_s,
        budget_s,
    };

    add(tracked(
        &spec(
            "a1k9qz",
            "alice",
            "prefix-sum",
            "human",
            "running",
            7080.0,
            h8,
        ),
        steady(),
    ));
    let mut idle = tracked(
        &spec(
            "b7m2xd",
            "bruno",
            "prefix-sum",
            "human",
            "running",
            7000.0,
            h8,
        ),
        steady(),
    );
    idle.view.last_activity_at = Some(at(6000));
    add(idle);
    let mut dropped = tracked(
        &spec(
            "c3p8wt",
            "chen",
            "optimize-kernel",
            "human",
            "running",
            7100.0,
            h8,
        ),
        steady(),
    );
    dropped.scores.push(score(12, 7000, Some(0.301), "ok"));
    dropped.view.score_count = 4;
    add(dropped);
    let mut protected = tracked(
        &spec(
            "d5r1nv",
            "dana",
            "prefix-sum",
            "human",
            "running",
            7100.0,
            h8,
        ),
        steady(),
    );
    protected
        .scores
        .push(score(13, 6900, None, "protected file changed: score.py"));
    protected.view.score_count = 4;
    add(protected);
    let mut failing = tracked(
        &spec(
            "e2s6hb",
            "agent-gpt",
            "optimize-kernel",
            "agent",
            "running",
            7100.0,
            h8,
        ),
        vec![score(1, 0, Some(0.0), "start")],
    );
    for (i, secs) in [6200, 6500, 6800].into_iter().enumerate() {
        failing.scores.push(score(
            20 + i as u64,
            secs,
            None,
            "scorer timed out after 600s",
        ));
    }
    failing.view.score_count = 4;
    failing.view.agent = Some(crate::session::AgentIdentity {
        name: "agent-gpt".into(),
        model: "gpt-x".into(),
        scaffold: "builtin".into(),
    });
    failing.view.usage = crate::session::UsageTotals {
        tokens_in: 182_400,
        tokens_out: 9_310,
        cost_usd: 0.55,
        model_calls: 61,
    };
    add(failing);
    let mut low = tracked(
        &spec(
            "f9t4jc",
            "farah",
            "prefix-sum",
            "human",
            "running",
            h8 - 600.0,
            h8,
        ),
        steady(),
    );
    low.view.extensions.push(ExtensionView {
        at: at(3000),
        by_s: 1800.0,
        reason: "network outage".into(),
        by: "ana (proctor)".into(),
    });
    add(low);
    let mut long_pause = tracked(
        &spec("g1u7ke", "gus", "prefix-sum", "human", "paused", 3000.0, h8),
        steady(),
    );
    pause(&mut long_pause.view, PauseReason::Break, "gus", None, 4800);
    add(long_pause);
    let mut crashed = tracked(
        &spec(
            "h6v3lf",
            "hana",
            "optimize-kernel",
            "human",
            "paused",
            5000.0,
            h8,
        ),
        steady(),
    );
    pause(
        &mut crashed.view,
        PauseReason::CrashRecovery,
        "system",
        None,
        7000,
    );
    add(crashed);
    let mut exited = tracked(
        &spec(
            "i4w9mg",
            "ivan",
            "prefix-sum",
            "human",
            "running",
            7000.0,
            h8,
        ),
        steady(),
    );
    exited.shell_exits.push(ShellExit {
        shell: 1,
        code: Some(137),
        signal: None,
        at: at(7100),
    });
    add(exited);
    let mut hidden = tracked(
        &spec(
            "j8x2nh",
            "jules",
            "secret-sauce",
            "human",
            "running",
            7000.0,
            h8,
        ),
        steady(),
    );
    hidden.view.visible = false;
    for s in &mut hidden.scores {
        s.hidden = true;
    }
    add(hidden);
    let mut agent = tracked(
        &spec(
            "k2y5pj",
            "agent-claude",
            "prefix-sum",
            "agent",
            "running",
            7100.0,
            h8,
        ),
        steady(),
    );
    agent.view.last_activity_at = Some(at(7195));
    add(agent);
    let mut waiting = tracked(
        &spec("l7z1qk", "lena", "prefix-sum", "human", "created", 0.0, h8),
        vec![score(1, 0, Some(0.0), "start")],
    );
    waiting.view.started_at = None;
    waiting.view.last_activity_at = None;
    add(waiting);
    let mut done = tracked(
        &spec(
            "m3a8rl",
            "marco",
            "optimize-kernel",
            "human",
            "ended",
            h8,
            h8,
        ),
        steady(),
    );
    done.view.end_reason = Some(EndReason::Submitted);
    done.view.ended_at = Some(at(7000));
    done.view.notes.push(NoteView {
        at: at(6000),
        active_s: 5940.0,
        text: "asked about the reference solution; told to read the instructions".into(),
        by: "ana (proctor)".into(),
    });
    add(done);
    fleet
}

/// `n` running sessions (a third of them agents), for the benchmark.
pub fn fleet_of(n: usize) -> Fleet {
    let mut fleet = Fleet::default();
    let envs = [
        "prefix-sum",
        "optimize-kernel",
        "fix-embedding",
        "scaling-law",
    ];
    for i in 0..n {
        let id = format!("s{i:05}");
        let participant = format!("participant-{i:03}");
        let kind = if i % 3 == 0 { "agent" } else { "human" };
        let spec = Spec {
            id: &id,
            participant: &participant,
            environment: envs[i % envs.len()],
            kind,
            state: "running",
            active_s: 3600.0 + i as f64,
            budget_s: 8.0 * 3600.0,
        };
        let scores = (0..8)
            .map(|k| score(1 + k, 60 + k as i64 * 600, Some(k as f64 * 0.08), "ok"))
            .collect();
        let t = tracked(&spec, scores);
        fleet.sessions.insert(id, t);
    }
    fleet
}

/// An agent's exec as it arrives pushed.
pub fn exec_event(seq: u64, secs: i64, command: &str, stdout: &str) -> Event {
    Event {
        seq,
        at: at(secs),
        active_ms: (secs.max(0) as u64) * 1000,
        origin: None,
        kind: EventKind::Exec(Box::new(ExecRecord {
            command: command.into(),
            cwd: ".".into(),
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            duration_ms: 1200,
            stdout: stdout.into(),
            stderr: String::new(),
            stdout_truncated: false,
            stderr_truncated: false,
        })),
    }
}

/// An agent's model call as it arrives pushed.
pub fn model_call_event(seq: u64, secs: i64, said: &str, tool: &str) -> Event {
    use crate::session::agent::{Message, Role, ToolCall};
    let mut output = Message::new(Role::Assistant, said);
    output.tool_calls = vec![ToolCall {
        id: format!("call_{seq}"),
        name: tool.into(),
        arguments: "{}".into(),
    }];
    Event {
        seq,
        at: at(secs),
        active_ms: (secs.max(0) as u64) * 1000,
        origin: None,
        kind: EventKind::ModelCall(Box::new(crate::session::ModelCallRecord {
            model: "gpt-x".into(),
            input: Vec::new(),
            output,
            request_messages: 3,
            request_bytes: 2048,
            tokens_in: 1500,
            tokens_out: 120,
            cost_usd: 0.005,
            latency_ms: 900,
            stop_reason: "tool_calls".into(),
        })),
    }
}

/// A score entry as it arrives pushed.
pub fn scored_event(seq: u64, secs: i64, normalized: f64) -> Event {
    Event {
        seq,
        at: at(secs),
        active_ms: (secs.max(0) as u64) * 1000,
        origin: None,
        kind: EventKind::Scored {
            entry: Box::new(ScoreEntry {
                phase: ScorePhase::Intermediate,
                requested_by: "agent".into(),
                requested_active_ms: 0,
                valid: true,
                raw: Some(2.0),
                normalized: Some(normalized),
                message: "ok".into(),
                scorer_message: serde_json::Value::Null,
                details: serde_json::json!({"trials": 5}),
                output: String::new(),
                exit_code: Some(0),
                duration_ms: 900,
            }),
        },
    }
}
