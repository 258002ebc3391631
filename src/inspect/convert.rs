//! One Inspect sample (an epoch of it) as an imported run: its start and
//! end, budget, score log, model calls, bash commands and token usage.
//! Pure: the caller decides the environment; the server normalizes.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::log::{Header, Sample, Score, Usage, typed};
use crate::protocol::{ImportRun, ImportedEvent, NormalizerValues};
use crate::session::agent::{Message, ModelCallRecord, Role, ToolCall};
use crate::session::event::ExecRecord;
use crate::session::{AgentIdentity, EndReason, EventKind, ImportedFrom, ScoreEntry, ScorePhase};

/// Who records the imported run's events.
pub const BY: &str = "inspect";
/// Longest message text or tool output kept per message (as the built-in scaffold's records).
const TEXT_LIMIT: usize = 64 * 1024;

/// What the command line decided for every sample of a log.
#[derive(Debug, Clone, Default)]
pub struct Choices {
    /// The environment's folder, when rebench knows it.
    pub env_dir: Option<String>,
    pub environment: String,
    pub profile: Option<String>,
    pub normalizer: Option<NormalizerValues>,
    /// The scorer whose value is the score (default: the sample's only, or first, one).
    pub scorer: Option<String>,
    /// The agent's name (default: `MODEL (SCAFFOLD)`).
    pub agent: Option<String>,
    /// The budget, instead of the log's limits.
    pub budget_ms: Option<u64>,
}

/// The run of `sample`; an error names the field that prevents it.
pub fn run(
    file: &str,
    log_id: &str,
    header: &Header,
    sample: &Sample,
    choices: &Choices,
) -> Result<ImportRun, String> {
    if let Some(error) = &sample.error {
        let first = error.message.lines().next().unwrap_or_default();
        return Err(format!(
            "field error: the sample failed in Inspect ({first}); not imported"
        ));
    }
    let started = sample.started_at.unwrap_or(header.eval.created);
    let working_ms = secs_to_ms(
        sample
            .working_time
            .or(sample.total_time)
            .unwrap_or_default(),
    );
    let completed = sample.completed_at.unwrap_or_else(|| {
        started
            + chrono::Duration::milliseconds(
                secs_to_ms(sample.total_time.unwrap_or_default()) as i64
            )
    });
    let budget_ms = match choices.budget_ms {
        Some(ms) => ms,
        None => budget(header, sample)?,
    };
    let scaffold = header.scaffold();
    let model = header.eval.model.clone();
    let name = choices
        .agent
        .clone()
        .unwrap_or_else(|| format!("{model} ({scaffold})"));
    let mut walk = Walk {
        started,
        working_ms,
        at: started,
        active: 0,
        seen_messages: 0,
        usage_seen: false,
        pool: sample
            .events_data
            .as_ref()
            .map(|d| d.messages.clone())
            .unwrap_or_default(),
        events: vec![ImportedEvent {
            at: started,
            active_ms: 0,
            kind: EventKind::Started { by: BY.into() },
        }],
    };
    for (i, event) in sample.events.iter().enumerate() {
        walk.event(event)
            .map_err(|e| format!("field events[{i}]: {e}"))?;
    }
    if !walk.usage_seen && !sample.model_usage.is_empty() {
        let total = sample
            .model_usage
            .values()
            .fold(Usage::default(), |mut sum, u| {
                sum.input_tokens += u.input_tokens;
                sum.output_tokens += u.output_tokens;
                sum.total_cost = match (sum.total_cost, u.total_cost) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or_default() + b.unwrap_or_default()),
                };
                sum
            });
        walk.push(
            completed,
            working_ms,
            EventKind::Usage {
                tokens_in: total.input_tokens,
                tokens_out: total.output_tokens,
                cost_usd: total.total_cost.unwrap_or_default(),
            },
        );
    }
    let final_entry = final_score(sample, choices.scorer.as_deref(), working_ms)?;
    walk.push(
        completed,
        working_ms,
        EventKind::Scored {
            entry: Box::new(final_entry),
        },
    );
    let (reason, note) = end_reason(sample);
    walk.push(
        completed,
        working_ms,
        EventKind::Ended {
            reason,
            by: BY.into(),
            note,
        },
    );
    Ok(ImportRun {
        source: ImportedFrom {
            format: "inspect".into(),
            file: file.to_string(),
            log: log_id.to_string(),
            task: header.eval.task.clone(),
            sample: sample.id.to_string(),
            epoch: sample.epoch,
            normalization_given: false,
        },
        env_dir: choices.env_dir.clone(),
        environment: choices.environment.clone(),
        profile: choices.profile.clone(),
        normalizer: choices.normalizer,
        participant: name.clone(),
        agent: AgentIdentity {
            name,
            model,
            scaffold,
        },
        budget_ms,
        created_at: started,
        instructions: input_text(&sample.input),
        events: walk.events,
    })
}

/// The time limit the sample hit, else its working limit (the time that
/// excludes waits, as our budget does), else its clock limit: its own, else
/// the eval's.
fn budget(header: &Header, sample: &Sample) -> Result<u64, String> {
    // The limit the sample hit is the one it ran under.
    let hit = sample
        .limit
        .as_ref()
        .filter(|l| matches!(l.kind.as_str(), "working" | "time"))
        .and_then(|l| l.limit);
    let limit = [
        hit,
        sample.limits.working_limit,
        header.eval.config.working_limit,
        sample.limits.time_limit,
        header.eval.config.time_limit,
    ]
    .into_iter()
    .flatten()
    .find(|s| s.is_finite() && *s > 0.0);
    limit.map(secs_to_ms).ok_or_else(|| {
        "fields working_limit, time_limit: the log has no time limit for the sample; give --budget"
            .to_string()
    })
}

fn secs_to_ms(secs: f64) -> u64 {
    if secs.is_finite() && secs > 0.0 {
        (secs * 1000.0).round() as u64
    } else {
        0
    }
}

/// Why the sample ended: the limit it hit, else it finished (submitted).
fn end_reason(sample: &Sample) -> (EndReason, Option<String>) {
    let Some(limit) = &sample.limit else {
        return (EndReason::Submitted, None);
    };
    let reason = match limit.kind.as_str() {
        "time" | "working" => EndReason::BudgetExhausted,
        "token" => EndReason::TokenLimit,
        "cost" => EndReason::CostLimit,
        _ => EndReason::Submitted,
    };
    let value = limit.limit.map(|l| format!(" ({l})")).unwrap_or_default();
    (
        reason,
        Some(format!(
            "Inspect's {} limit{value} ended the sample",
            limit.kind
        )),
    )
}

/// The final score: the chosen scorer's value in `scores`.
fn final_score(sample: &Sample, scorer: Option<&str>, active: u64) -> Result<ScoreEntry, String> {
    let scores = sample.scores.clone().unwrap_or_default();
    let picked = match scorer {
        Some(name) => scores.get(name).ok_or_else(|| {
            let known: Vec<&str> = scores.keys().map(String::as_str).collect();
            format!(
                "field scores: no scorer {name:?} (the sample has {})",
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            )
        })?,
        None => match scores.values().next() {
            Some(score) => score,
            None => {
                return Ok(entry(
                    ScorePhase::Final,
                    Err("the sample has no score".into()),
                    None,
                    active,
                ));
            }
        },
    };
    Ok(entry(
        ScorePhase::Final,
        raw_value(&picked.value),
        Some(picked),
        active,
    ))
}

/// A score value as a number, as Inspect's `value_to_float` reads it:
/// numbers, booleans, C/I/P/N, and numeric text.
pub fn raw_value(value: &Value) -> Result<f64, String> {
    let number = match value {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::String(text) => match text.trim() {
            "C" => Some(1.0),
            "I" | "N" => Some(0.0),
            "P" => Some(0.5),
            t if t.eq_ignore_ascii_case("yes") || t.eq_ignore_ascii_case("true") => Some(1.0),
            t if t.eq_ignore_ascii_case("no") || t.eq_ignore_ascii_case("false") => Some(0.0),
            t => t.parse::<f64>().ok(),
        },
        _ => None,
    };
    number
        .filter(|n| n.is_finite())
        .ok_or_else(|| format!("the score value {value} is not a number"))
}

fn entry(
    phase: ScorePhase,
    raw: Result<f64, String>,
    score: Option<&Score>,
    active: u64,
) -> ScoreEntry {
    let said = score
        .and_then(|s| s.explanation.clone().or_else(|| s.answer.clone()))
        .unwrap_or_default();
    let message = match &raw {
        Ok(_) => said.clone(),
        Err(why) => why.clone(),
    };
    ScoreEntry {
        phase,
        requested_by: BY.into(),
        requested_active_ms: active,
        valid: raw.is_ok(),
        raw: raw.ok(),
        normalized: None,
        message: cut(&message),
        scorer_message: Value::String(cut(&said)),
        details: score.map_or(Value::Null, |s| {
            serde_json::json!({"value": s.value, "answer": s.answer, "explanation": s.explanation})
        }),
        output: String::new(),
        exit_code: None,
        duration_ms: 0,
    }
}

/// The walk through a sample's events, turning those rebench keeps into its own.
struct Walk {
    started: DateTime<Utc>,
    working_ms: u64,
    at: DateTime<Utc>,
    active: u64,
    /// Messages the model calls so far have seen (their inputs and outputs).
    seen_messages: usize,
    usage_seen: bool,
    /// The sample's message pool (`events_data`), for inputs given as ranges.
    pool: Vec<Value>,
    events: Vec<ImportedEvent>,
}

#[derive(Deserialize)]
struct Timing {
    timestamp: Option<DateTime<Utc>>,
    #[serde(default)]
    working_start: Option<f64>,
}

#[derive(Deserialize)]
struct ModelEvent {
    model: String,
    #[serde(default)]
    input: Vec<Value>,
    #[serde(default)]
    input_refs: Option<Vec<(usize, usize)>>,
    output: Output,
    #[serde(default)]
    working_time: Option<f64>,
}

#[derive(Deserialize)]
struct Output {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Value,
    #[serde(default)]
    stop_reason: String,
}

#[derive(Deserialize)]
struct ToolEvent {
    function: String,
    #[serde(default)]
    arguments: serde_json::Map<String, Value>,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    error: Option<ToolError>,
    #[serde(default)]
    working_time: Option<f64>,
}

#[derive(Deserialize)]
struct ToolError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
struct ScoreEvent {
    score: Score,
    #[serde(default)]
    intermediate: bool,
}

#[derive(Deserialize)]
struct InfoEvent {
    #[serde(default)]
    source: Option<String>,
    data: Value,
}

impl Walk {
    fn event(&mut self, event: &Value) -> Result<(), String> {
        let kind = event
            .get("event")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !matches!(kind, "model" | "tool" | "score" | "info") {
            return Ok(());
        }
        let field = |e: anyhow::Error| format!("{kind} event: {e:#}");
        let timing: Timing = typed(event.clone(), "timing").map_err(field)?;
        let (at, active) = self.when(&timing);
        let kind = match kind {
            "model" => self.model_call(typed(event.clone(), "").map_err(field)?)?,
            "tool" => match exec(typed(event.clone(), "").map_err(field)?) {
                Some(record) => EventKind::Exec(Box::new(record)),
                None => return Ok(()),
            },
            "score" => {
                let score: ScoreEvent = typed(event.clone(), "").map_err(field)?;
                if !score.intermediate {
                    // The final scorers' run: the sample's `scores` hold it.
                    return Ok(());
                }
                EventKind::Scored {
                    entry: Box::new(entry(
                        ScorePhase::Intermediate,
                        raw_value(&score.score.value),
                        Some(&score.score),
                        active,
                    )),
                }
            }
            _ => {
                let info: InfoEvent = typed(event.clone(), "").map_err(field)?;
                let text = match &info.data {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                EventKind::Note {
                    text: cut(&text),
                    by: info.source.unwrap_or_else(|| BY.into()),
                }
            }
        };
        self.push(at, active, kind);
        Ok(())
    }

    /// When an event happened: its working time since the sample started
    /// (Inspect's `working_start`), else its clock time since the start;
    /// never before the previous event, never past the sample's working time.
    fn when(&self, timing: &Timing) -> (DateTime<Utc>, u64) {
        let at = timing.timestamp.unwrap_or(self.at).max(self.at);
        let by_clock = (at - self.started).num_milliseconds().max(0) as u64;
        let active = match timing.working_start {
            Some(s) if s.is_finite() && s >= 0.0 && secs_to_ms(s) <= self.working_ms => {
                secs_to_ms(s)
            }
            _ => by_clock,
        };
        (
            at,
            active.clamp(self.active, self.working_ms.max(self.active)),
        )
    }

    fn push(&mut self, at: DateTime<Utc>, active: u64, kind: EventKind) {
        let at = at.max(self.at);
        let active = active.max(self.active);
        (self.at, self.active) = (at, active);
        self.events.push(ImportedEvent {
            at,
            active_ms: active,
            kind,
        });
    }

    fn model_call(&mut self, call: ModelEvent) -> Result<EventKind, String> {
        let input: Vec<Value> = match &call.input_refs {
            Some(ranges) if call.input.is_empty() => {
                let mut input = Vec::new();
                for &(start, end) in ranges {
                    let slice = self.pool.get(start..end).ok_or_else(|| {
                        format!(
                            "model event: field input_refs: {start}..{end} is outside the message pool ({} messages)",
                            self.pool.len()
                        )
                    })?;
                    input.extend_from_slice(slice);
                }
                input
            }
            _ => call.input.clone(),
        };
        // Each call's input repeats the conversation: keep what is new.
        let new = if input.len() >= self.seen_messages {
            &input[self.seen_messages..]
        } else {
            &input[..]
        };
        let request_bytes = serde_json::to_vec(&input).map_or(0, |b| b.len());
        let input_messages = new.iter().map(message).collect();
        self.seen_messages = input.len() + 1;
        let (output, stop_reason) = match call.output.choices.first() {
            Some(choice) => (message(&choice.message), choice.stop_reason.clone()),
            None => (Message::new(Role::Assistant, ""), String::new()),
        };
        let usage = call.output.usage.unwrap_or_default();
        self.usage_seen |=
            usage.input_tokens + usage.output_tokens > 0 || usage.total_cost.is_some();
        Ok(EventKind::ModelCall(Box::new(ModelCallRecord {
            model: call.model,
            input: input_messages,
            output,
            request_messages: input.len(),
            request_bytes,
            tokens_in: usage.input_tokens,
            tokens_out: usage.output_tokens,
            cost_usd: usage
                .total_cost
                .filter(|c| c.is_finite() && *c >= 0.0)
                .unwrap_or_default(),
            latency_ms: call.working_time.map_or(0, secs_to_ms),
            stop_reason,
        })))
    }
}

/// A shell-like tool call as an exec record (`bash`'s command, `python`'s
/// code as the equivalent shell command); other tools stay in the model calls.
fn exec(tool: ToolEvent) -> Option<ExecRecord> {
    let arg = |name: &str| {
        tool.arguments
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let command = match tool.function.as_str() {
        "bash" | "bash_session" => arg("cmd").or_else(|| arg("command"))?,
        "python" => format!("python3 - <<'EOF'\n{}\nEOF", arg("code")?),
        _ => return None,
    };
    let output = content_text(&tool.result);
    let (stderr, exit_code, timed_out) = match &tool.error {
        Some(error) => (error.message.clone(), None, error.kind == "timeout"),
        None => (String::new(), Some(0), false),
    };
    Some(ExecRecord {
        command: cut(&command),
        cwd: String::new(),
        exit_code,
        signal: None,
        timed_out,
        duration_ms: tool.working_time.map_or(0, secs_to_ms),
        stdout_truncated: output.len() > TEXT_LIMIT,
        stderr_truncated: stderr.len() > TEXT_LIMIT,
        stdout: cut(&output),
        stderr: cut(&stderr),
    })
}

/// An Inspect chat message in rebench's shape.
fn message(value: &Value) -> Message {
    let role = match value.get("role").and_then(Value::as_str) {
        Some("system") => Role::System,
        Some("assistant") => Role::Assistant,
        Some("tool") => Role::Tool,
        _ => Role::User,
    };
    let tool_calls = value
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|call| ToolCall {
                    id: text_field(call, "id"),
                    name: text_field(call, "function"),
                    arguments: call
                        .get("arguments")
                        .map(|a| match a {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    Message {
        role,
        text: cut(&content_text(value.get("content").unwrap_or(&Value::Null))),
        tool_calls,
        tool_call_id: value
            .get("tool_call_id")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

fn text_field(value: &Value, name: &str) -> String {
    value
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A content value's text: a string, or a list of content parts (text,
/// reasoning; other kinds by their type).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|part| match part.get("type").and_then(Value::as_str) {
                Some("text") => text_field(part, "text"),
                Some("reasoning") => format!("[reasoning] {}", text_field(part, "reasoning")),
                Some(other) => format!("[{other}]"),
                None => content_text(part),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The sample's input as instructions: its text, or its messages' texts.
fn input_text(input: &Value) -> String {
    match input {
        Value::Array(messages) => messages
            .iter()
            .map(|m| content_text(m.get("content").unwrap_or(&Value::Null)))
            .collect::<Vec<_>>()
            .join("\n\n"),
        other => content_text(other),
    }
}

/// At most TEXT_LIMIT bytes of `text`, cut at a character boundary.
fn cut(text: &str) -> String {
    if text.len() <= TEXT_LIMIT {
        return text.to_string();
    }
    let mut end = TEXT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn header(config: Value) -> Header {
        serde_json::from_value(json!({
            "version": 2,
            "eval": {"task": "t", "model": "m/x", "created": "2026-01-01T00:00:00Z",
                     "config": config},
            "plan": {"steps": [{"solver": "a"}, {"solver": "b"}]},
        }))
        .unwrap()
    }

    fn sample(extra: Value) -> Sample {
        let mut base = json!({
            "id": 7, "epoch": 1, "input": "do it",
            "started_at": "2026-01-01T00:00:00Z",
            "completed_at": "2026-01-01T00:01:40Z",
            "total_time": 100.0, "working_time": 60.0,
            "scores": {"s": {"value": "C"}},
        });
        for (k, v) in extra.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    fn kinds(run: &ImportRun) -> Vec<&'static str> {
        run.events.iter().map(|e| e.kind.name()).collect()
    }

    #[test]
    fn score_values_read_as_inspect_reads_them() {
        for (value, want) in [
            (json!(0.25), Some(0.25)),
            (json!(true), Some(1.0)),
            (json!("C"), Some(1.0)),
            (json!("I"), Some(0.0)),
            (json!("P"), Some(0.5)),
            (json!(" 3.5 "), Some(3.5)),
            (json!("yes"), Some(1.0)),
            (json!("maybe"), None),
            (json!([1, 2]), None),
            (json!({"a": 1}), None),
        ] {
            assert_eq!(raw_value(&value).ok(), want, "{value}");
        }
        assert!(
            raw_value(&json!("maybe"))
                .unwrap_err()
                .contains("\"maybe\"")
        );
    }

    #[test]
    fn the_budget_is_the_working_limit_first_then_the_time_limit() {
        let s = sample(json!({}));
        let both = header(json!({"time_limit": 600, "working_limit": 300}));
        assert_eq!(budget(&both, &s), Ok(300_000));
        let time_only = header(json!({"time_limit": 600}));
        assert_eq!(budget(&time_only, &s), Ok(600_000));
        let own = sample(json!({"time_limit": 120}));
        assert_eq!(budget(&time_only, &own), Ok(120_000));
        let none = header(json!({}));
        assert!(budget(&none, &s).unwrap_err().contains("--budget"));
    }

    #[test]
    fn a_sample_becomes_started_events_final_score_ended() {
        let s = sample(json!({
            "limit": {"type": "working", "limit": 60},
            "events_data": {"messages": [
                {"role": "user", "content": "do it"},
                {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                 "tool_calls": [{"id": "c1", "function": "bash", "arguments": {"cmd": "ls"}}]},
                {"role": "tool", "content": "a b", "tool_call_id": "c1"},
            ]},
            "events": [
                {"event": "span_begin", "timestamp": "2026-01-01T00:00:00Z", "working_start": 9999.0, "name": "init"},
                {"event": "model", "timestamp": "2026-01-01T00:00:01Z", "working_start": 1.0,
                 "model": "m/x", "input": [], "input_refs": [[0, 1]],
                 "output": {"choices": [{"message": {"role": "assistant", "content": "ok",
                    "tool_calls": [{"id": "c1", "function": "bash", "arguments": {"cmd": "ls"}}]},
                    "stop_reason": "tool_calls"}],
                    "usage": {"input_tokens": 10, "output_tokens": 2, "total_cost": 0.01}}},
                {"event": "tool", "timestamp": "2026-01-01T00:00:02Z", "working_start": 2.0,
                 "function": "bash", "arguments": {"cmd": "ls"}, "result": "a b"},
                {"event": "score", "timestamp": "2026-01-01T00:00:30Z", "working_start": 30.0,
                 "score": {"value": 0.5}, "intermediate": true},
                {"event": "model", "timestamp": "2026-01-01T00:00:40Z", "working_start": 40.0,
                 "model": "m/x", "input": [], "input_refs": [[0, 3]],
                 "output": {"choices": [{"message": {"role": "assistant", "content": "done"}}]}},
                {"event": "score", "timestamp": "2026-01-01T00:01:39Z", "working_start": 59.0,
                 "score": {"value": "C"}, "intermediate": false},
            ],
        }));
        let run = run("f.eval", "E1", &header(json!({})), &s, &Choices::default()).unwrap();
        assert_eq!(
            kinds(&run),
            [
                "started",
                "model_call",
                "exec",
                "scored",
                "model_call",
                "scored",
                "ended"
            ]
        );
        assert_eq!(run.budget_ms, 60_000, "the sample's limit wins");
        assert_eq!(run.agent.name, "m/x (a+b)");
        assert_eq!(run.source.sample, "7");
        assert_eq!(run.instructions, "do it");
        let active: Vec<u64> = run.events.iter().map(|e| e.active_ms).collect();
        assert_eq!(active, [0, 1000, 2000, 30_000, 40_000, 60_000, 60_000]);
        let EventKind::ModelCall(second) = &run.events[4].kind else {
            panic!()
        };
        // Only what the first call had not seen: the tool's result.
        assert_eq!(second.input.len(), 1);
        assert_eq!(second.input[0].role, Role::Tool);
        assert_eq!(second.request_messages, 3);
        let EventKind::ModelCall(first) = &run.events[1].kind else {
            panic!()
        };
        assert_eq!(
            (first.tokens_in, first.tokens_out, first.cost_usd),
            (10, 2, 0.01)
        );
        assert_eq!(first.output.tool_calls[0].arguments, r#"{"cmd":"ls"}"#);
        let EventKind::Scored { entry } = &run.events[5].kind else {
            panic!()
        };
        assert_eq!((entry.phase, entry.raw), (ScorePhase::Final, Some(1.0)));
        let EventKind::Ended { reason, note, .. } = &run.events[6].kind else {
            panic!()
        };
        assert_eq!(*reason, EndReason::BudgetExhausted);
        assert!(note.as_deref().unwrap().contains("working limit"));
    }

    #[test]
    fn a_reference_outside_the_pool_names_the_event_and_field() {
        let s = sample(json!({"events": [
            {"event": "model", "timestamp": "2026-01-01T00:00:01Z", "model": "m",
             "input": [], "input_refs": [[0, 5]], "output": {"choices": []}},
        ]}));
        let err = run(
            "f",
            "E",
            &header(json!({"time_limit": 10})),
            &s,
            &Choices::default(),
        )
        .unwrap_err();
        assert!(
            err.starts_with("field events[0]: model event: field input_refs"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_scorer_is_named_with_the_ones_there() {
        let s = sample(json!({}));
        let choices = Choices {
            scorer: Some("other".into()),
            ..Choices::default()
        };
        let err = run("f", "E", &header(json!({"time_limit": 10})), &s, &choices).unwrap_err();
        assert!(
            err.contains("no scorer \"other\" (the sample has s)"),
            "{err}"
        );
    }
}
