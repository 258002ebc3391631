//! A session as an Inspect eval log (`.eval`): one eval of one sample, so
//! that `inspect_ai.log.read_eval_log` and Inspect View open it. The task is
//! the environment, the model the agent's (or `human`), the input the
//! instructions; the transcript becomes events (model calls, commands as
//! `bash` tool calls, a human's terminal summarised the same way, pauses,
//! notes and extensions as info events), the score log intermediate score
//! events and the final score the sample's score (normalized; the raw value
//! in its `answer` and metadata). Hidden scorer details are left out.

use std::io::Write;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::terminal;
use crate::recording::session_data::SessionRecording;
use crate::session::agent::{Message, Role};
use crate::session::{EndReason, Event, EventKind, ScoreEntry, ScorePhase};

/// What was written, for the summary line.
pub struct Written {
    pub events: usize,
}

pub fn write(rec: &SessionRecording, out: &mut dyn Write) -> anyhow::Result<Written> {
    let log = Log::build(rec);
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut member = |name: &str, value: &Value| -> anyhow::Result<()> {
        zip.start_file(name, options)?;
        zip.write_all(&serde_json::to_vec(value)?)?;
        Ok(())
    };
    member("_journal/start.json", &log.start())?;
    member(
        &format!("samples/{}_epoch_1.json", rec.session.id),
        &log.sample,
    )?;
    member("summaries.json", &json!([log.summary()]))?;
    member("header.json", &log.header())?;
    let bytes = zip.finish()?.into_inner();
    out.write_all(&bytes)?;
    Ok(Written {
        events: log.event_count,
    })
}

struct Log {
    eval: Value,
    plan: Value,
    results: Value,
    stats: Value,
    status: &'static str,
    sample: Value,
    event_count: usize,
}

impl Log {
    fn build(rec: &SessionRecording) -> Log {
        let v = &rec.session;
        let agent = v.agent.as_ref();
        let model = agent
            .map(|a| a.model.clone())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| v.kind.as_str().to_string());
        let solver = agent.map_or_else(|| v.kind.as_str().to_string(), |a| a.scaffold.clone());
        let started = v.started_at.unwrap_or(v.created_at);
        let completed = v.ended_at;
        let instructions = rec.instructions.clone().unwrap_or_default();
        let final_entry = final_entry(rec);
        let events = Transcript::build(rec, &model, started, &instructions);
        let scores = final_entry.map_or(
            json!({}),
            |e| json!({ v.metric.clone(): score(e, &v.unit) }),
        );
        let usage = &v.usage;
        let model_usage = if usage.tokens_in + usage.tokens_out > 0 || usage.cost_usd > 0.0 {
            json!({ model.clone(): {
                "input_tokens": usage.tokens_in,
                "output_tokens": usage.tokens_out,
                "total_tokens": usage.tokens_in + usage.tokens_out,
                "total_cost": usage.cost_usd,
            }})
        } else {
            json!({})
        };
        let limit = match v.end_reason {
            Some(EndReason::BudgetExhausted) => json!({"type": "working", "limit": v.budget_s}),
            Some(EndReason::TokenLimit) => {
                json!({"type": "token", "limit": v.limits.max_tokens.unwrap_or_default()})
            }
            Some(EndReason::CostLimit) => {
                json!({"type": "cost", "limit": v.limits.max_cost_usd.unwrap_or_default()})
            }
            _ => Value::Null,
        };
        let total_time = completed.map(|end| secs(end - started));
        let rebench = json!({
            "session": v.id,
            "participant": v.participant,
            "kind": v.kind,
            "environment": v.environment,
            "profile": v.profile,
            "manifest_hash": v.manifest_hash,
            "budget_s": v.budget_s,
            "end_reason": v.end_reason,
            "end_note": v.end_note,
            "agent": v.agent,
            "imported": v.imported,
            "metric": v.metric,
            "unit": v.unit,
            "normalization": v.normalization,
        });
        let sample = json!({
            "id": v.id,
            "epoch": 1,
            "input": instructions,
            "target": "",
            "messages": events.messages,
            "output": {"model": model, "choices": [], "completion": ""},
            "scores": scores,
            "metadata": {"rebench": rebench},
            "store": {},
            "events": events.events,
            "model_usage": model_usage,
            "started_at": started,
            "completed_at": completed,
            "total_time": total_time,
            "working_time": v.active_s,
            "attachments": {},
            "events_data": {"messages": events.pool, "calls": []},
            "limit": limit,
        });
        let task_version = v.manifest_hash.get(..12).unwrap_or_default();
        let eval = json!({
            "eval_id": format!("rebench-{}", v.id),
            "run_id": format!("rebench-{}", v.id),
            "created": v.created_at,
            "task": v.environment,
            "task_id": format!("{}-{}", v.environment, v.id),
            "task_version": if task_version.is_empty() { json!(0) } else { json!(task_version) },
            "task_display_name": v.title,
            "task_attribs": {},
            "task_args": {},
            "solver": solver,
            "dataset": {"name": v.environment, "samples": 1, "sample_ids": [v.id], "shuffled": false},
            "model": model,
            "model_args": {},
            "config": {"working_limit": v.budget_s.round() as u64, "epochs": 1},
            "packages": {"rebench": env!("CARGO_PKG_VERSION")},
            "metadata": {"rebench": {"session": v.id, "kind": v.kind}},
        });
        let results = match final_entry.and_then(|e| e.normalized) {
            Some(value) => json!({
                "total_samples": 1,
                "completed_samples": 1,
                "scores": [{
                    "name": v.metric,
                    "scorer": v.metric,
                    "scored_samples": 1,
                    "unscored_samples": 0,
                    "params": {},
                    "metrics": {"mean": {"name": "mean", "value": value, "params": {}}},
                }],
            }),
            None => json!({"total_samples": 1, "completed_samples": 0, "scores": []}),
        };
        Log {
            eval,
            plan: json!({"name": "plan", "steps": [{"solver": solver, "params": {}}], "config": {}}),
            results,
            stats: json!({
                "started_at": started,
                "completed_at": completed,
                "model_usage": model_usage,
            }),
            status: if completed.is_some() {
                "success"
            } else {
                "started"
            },
            event_count: events.events.len(),
            sample,
        }
    }

    fn start(&self) -> Value {
        json!({"version": 2, "eval": self.eval, "plan": self.plan})
    }

    fn header(&self) -> Value {
        json!({
            "version": 2,
            "status": self.status,
            "eval": self.eval,
            "plan": self.plan,
            "results": self.results,
            "stats": self.stats,
        })
    }

    fn summary(&self) -> Value {
        let s = &self.sample;
        json!({
            "id": s["id"],
            "epoch": 1,
            "input": s["input"],
            "target": "",
            "scores": s["scores"],
            "model_usage": s["model_usage"],
            "started_at": s["started_at"],
            "completed_at": s["completed_at"],
            "total_time": s["total_time"],
            "working_time": s["working_time"],
            "limit": s["limit"],
            "completed": self.status == "success",
            "message_count": s["messages"].as_array().map_or(0, Vec::len),
        })
    }
}

/// The entry that is the session's final score (as the server chose it).
fn final_entry(rec: &SessionRecording) -> Option<&ScoreEntry> {
    let chosen = rec.session.final_score.as_ref()?;
    rec.events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Scored { entry }
            if entry.valid
                && entry.raw == Some(chosen.raw)
                && entry.normalized == Some(chosen.normalized) =>
        {
            Some(entry.as_ref())
        }
        _ => None,
    })
}

fn score(entry: &ScoreEntry, unit: &str) -> Value {
    json!({
        "value": entry.normalized.unwrap_or_default(),
        "answer": entry.raw.map(|r| format!("{r} {unit}").trim().to_string()),
        "explanation": entry.message,
        "metadata": {
            "raw": entry.raw,
            "normalized": entry.normalized,
            "phase": entry.phase,
            "requested_by": entry.requested_by,
        },
    })
}

fn secs(d: chrono::Duration) -> f64 {
    d.num_milliseconds().max(0) as f64 / 1000.0
}

/// The sample's events, and the conversation of its model calls.
struct Transcript {
    events: Vec<Value>,
    /// Every message once, in order (`events_data.messages`): model events
    /// refer to their input as a range of it.
    pool: Vec<Value>,
    /// The conversation as it ended (the sample's `messages`).
    messages: Vec<Value>,
}

impl Transcript {
    fn build(
        rec: &SessionRecording,
        model: &str,
        started: DateTime<Utc>,
        instructions: &str,
    ) -> Transcript {
        let mut t = Transcript {
            events: Vec::new(),
            pool: Vec::new(),
            messages: Vec::new(),
        };
        t.events.push(json!({
            "event": "sample_init",
            "timestamp": started,
            "working_start": 0.0,
            "sample": {"input": instructions, "target": "", "id": rec.session.id},
            "state": {},
        }));
        // Events and terminal turns, merged in time order.
        let mut items: Vec<(DateTime<Utc>, u64, Value)> = Vec::new();
        for event in &rec.events {
            if let Some(value) = t.event(event, model) {
                items.push((event.at, event.active_ms, value));
            }
        }
        for turn in terminal::turns(&rec.chunks) {
            items.push((turn.at, turn.active_ms, terminal_event(&turn)));
        }
        items.sort_by_key(|(at, active, _)| (*active, *at));
        t.events.extend(items.into_iter().map(|(_, _, v)| v));
        t.messages = t.pool.clone();
        t
    }

    fn event(&mut self, event: &Event, model: &str) -> Option<Value> {
        let base = |kind: &str| {
            json!({
                "event": kind,
                "timestamp": event.at,
                "working_start": event.active_ms as f64 / 1000.0,
            })
        };
        let info = |data: Value| {
            let mut v = base("info");
            v["source"] = "rebench".into();
            v["data"] = data;
            v
        };
        let value = match &event.kind {
            EventKind::Scored { entry } if entry.valid => {
                let mut v = base("score");
                v["score"] = score(entry, "");
                v["target"] = Value::Null;
                v["intermediate"] = (entry.phase != ScorePhase::Final).into();
                v
            }
            EventKind::Scored { entry } => info(json!({
                "score": "invalid", "phase": entry.phase, "message": entry.message,
            })),
            EventKind::Started { by } => info(json!({"started": by})),
            EventKind::Paused { reason, by, note } => {
                info(json!({"paused": reason, "by": by, "note": note}))
            }
            EventKind::Resumed { by } => info(json!({"resumed": by})),
            EventKind::Extended { by_ms, reason, by } => info(json!({
                "extended_s": *by_ms as f64 / 1000.0, "reason": reason, "by": by,
            })),
            EventKind::Note { text, by } => info(json!({"note": text, "by": by})),
            EventKind::Ended { reason, by, note } => {
                info(json!({"ended": reason, "by": by, "note": note}))
            }
            EventKind::Exec(exec) => {
                let mut v = base("tool");
                let mut result = exec.stdout.clone();
                result.push_str(&exec.stderr);
                v["type"] = "function".into();
                v["id"] = format!("exec-{}", event.seq).into();
                v["function"] = "bash".into();
                v["arguments"] = json!({"cmd": exec.command});
                v["result"] = result.into();
                v["working_time"] = (exec.duration_ms as f64 / 1000.0).into();
                v["completed"] = json!(event.at);
                if exec.timed_out {
                    v["error"] = json!({"type": "timeout", "message": "the command timed out"});
                } else if let Some(code) = exec.exit_code.filter(|c| *c != 0) {
                    v["error"] = json!({"type": "unknown", "message": format!("exit code {code}")});
                }
                v
            }
            EventKind::ModelCall(call) => {
                self.pool.extend(call.input.iter().map(chat_message));
                let input_end = self.pool.len();
                let output = chat_message(&call.output);
                self.pool.push(output.clone());
                let mut v = base("model");
                v["model"] = if call.model.is_empty() {
                    model
                } else {
                    &call.model
                }
                .into();
                v["input"] = json!([]);
                v["input_refs"] = json!([[0, input_end]]);
                v["tools"] = json!([]);
                v["tool_choice"] = "auto".into();
                v["config"] = json!({});
                v["output"] = json!({
                    "model": call.model,
                    "choices": [{"message": output, "stop_reason": stop_reason(&call.stop_reason)}],
                    "completion": call.output.text,
                    "usage": {
                        "input_tokens": call.tokens_in,
                        "output_tokens": call.tokens_out,
                        "total_tokens": call.tokens_in + call.tokens_out,
                        "total_cost": call.cost_usd,
                    },
                    "time": call.latency_ms as f64 / 1000.0,
                });
                v["working_time"] = (call.latency_ms as f64 / 1000.0).into();
                v
            }
            _ => return None,
        };
        Some(value)
    }
}

/// Inspect's stop reasons; others (the APIs' own words) as `unknown`.
fn stop_reason(reason: &str) -> &'static str {
    match reason {
        "stop" | "end_turn" => "stop",
        "tool_use" | "tool_calls" => "tool_calls",
        "length" | "max_tokens" => "max_tokens",
        "content_filter" => "content_filter",
        _ => "unknown",
    }
}

/// A message in Inspect's shape (its tool calls' arguments as objects).
fn chat_message(message: &Message) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut v = json!({"role": role, "content": message.text});
    if message.role == Role::Assistant {
        v["tool_calls"] = message
            .tool_calls
            .iter()
            .map(|call| {
                let arguments = match serde_json::from_str::<Value>(&call.arguments) {
                    Ok(Value::Object(map)) => Value::Object(map),
                    _ => json!({"text": call.arguments}),
                };
                json!({"id": call.id, "function": call.name, "arguments": arguments, "type": "function"})
            })
            .collect();
    }
    if let Some(id) = &message.tool_call_id {
        v["tool_call_id"] = id.clone().into();
    }
    v
}

/// A terminal turn as a `bash` tool call (the line typed, the output after it).
fn terminal_event(turn: &terminal::Turn) -> Value {
    let command = turn
        .input
        .clone()
        .unwrap_or_else(|| "(keystrokes were not recorded: the terminal's output)".into());
    json!({
        "event": "tool",
        "type": "function",
        "id": format!("shell-{}-{}", turn.shell, turn.active_ms),
        "function": "bash",
        "arguments": {"cmd": command, "shell": turn.shell},
        "result": turn.output,
        "timestamp": turn.at,
        "working_start": turn.active_ms as f64 / 1000.0,
        "working_time": turn.duration_ms as f64 / 1000.0,
        "completed": turn.at + chrono::Duration::milliseconds(turn.duration_ms as i64),
    })
}
