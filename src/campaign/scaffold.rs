//! The built-in reference scaffold: a plain tool-use loop. The prompt has
//! the environment's instructions and the time and token budget; the
//! tools are `bash` (the session's exec), `score` (the scorer's message,
//! never its details) and `submit`. Every model call is recorded in the
//! session (`model_call` events), and a resumed run rebuilds the
//! conversation from them. Model API outages are retried, then the
//! session is paused (`api_outage`) until the endpoint answers again.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::model_api::{ApiError, Completion, Endpoint, ToolSpec};
use super::spec::{AgentSpec, OutagePolicy};
use crate::client::{Client, ClientError};
use crate::environment::duration::format_duration;
use crate::protocol::{
    Credentials, ErrorCode, ExecReply, InstructionsReply, Request, ScoreView, SessionView,
};
use crate::session::agent::{Message, ModelCallRecord, Role};
use crate::session::{Event, EventKind, PauseReason, Phase};

/// What a bash command's output is cut to, per stream (head and tail kept).
const OUTPUT_CHARS: usize = 8_000;
/// What one message's text is cut to in a `model_call` record.
const RECORD_TEXT_CHARS: usize = 64_000;
/// The longest one bash command may run.
const EXEC_TIMEOUT: Duration = Duration::from_secs(600);
/// Answers that cannot be read are retried this often before the run fails.
const MALFORMED_RETRIES: u32 = 3;
const NUDGE: &str = "Use the tools to work on the task: bash, score, submit.";
const DROPPED: &str = "[output dropped to keep the conversation within the model's context]";

/// How a run of the scaffold ended without the session ending.
#[derive(Debug)]
pub enum RunError {
    /// The server went away: the session is left as it is, for a resume.
    Lost(ClientError),
    /// The agent cannot go on (its endpoint refuses it): end the run.
    Failed(String),
}

impl From<ClientError> for RunError {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Server { .. } | ClientError::Protocol(_) => {
                RunError::Failed(e.to_string())
            }
            other => RunError::Lost(other),
        }
    }
}

pub fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "bash",
            description: "Run a shell command in the workspace (a fresh bash each time; \
                          cd and variables do not persist). Returns exit code, stdout and stderr.",
            parameters: json!({"type": "object",
                "properties": {"command": {"type": "string", "description": "the command"}},
                "required": ["command"]}),
        },
        ToolSpec {
            name: "score",
            description: "Score the workspace as it is now with the task's scoring function.",
            parameters: json!({"type": "object", "properties": {}}),
        },
        ToolSpec {
            name: "submit",
            description: "End the task now. The score log decides the result.",
            parameters: json!({"type": "object",
                "properties": {"answer": {"type": "string", "description": "an answer, if the task asks for one"}}}),
        },
    ]
}

pub struct Scaffold {
    pub endpoint: Endpoint,
    pub agent: AgentSpec,
    pub outage: OutagePolicy,
}

/// The session as the scaffold drives it: a participant connection for
/// what the agent does, the runner's admin connection for what only the
/// campaign may do (pause the clock for an outage).
struct Seat<'a> {
    client: Client,
    admin: &'a mut Client,
    session: String,
}

impl Seat<'_> {
    async fn view(&mut self) -> Result<SessionView, RunError> {
        Ok(self
            .client
            .call(Request::Show {
                session: self.session.clone(),
            })
            .await?)
    }

    /// Ends the scaffold's own outage pause. A pause a proctor took since
    /// stays: `running` then waits for it.
    async fn end_outage(&mut self) {
        match self.view().await {
            Ok(view) if view.pause_reason == Some(PauseReason::ApiOutage) => {}
            _ => return,
        }
        let resumed = self
            .admin
            .call::<SessionView>(Request::Resume {
                session: self.session.clone(),
            })
            .await;
        if let Err(e) = resumed {
            tracing::info!("resume after the outage: {e}");
        }
    }

    /// Waits while the session is paused (by a proctor, say); None once it ended.
    async fn running(&mut self) -> Result<Option<SessionView>, RunError> {
        loop {
            let view = self.view().await?;
            match view.state {
                Phase::Running => return Ok(Some(view)),
                Phase::Ended => return Ok(None),
                Phase::Paused | Phase::Created | Phase::Queued => {
                    tokio::time::sleep(Duration::from_millis(500)).await
                }
            }
        }
    }
}

impl Scaffold {
    /// Drives `session` until it ends. `admin` reads its log (to resume).
    pub async fn run(&self, admin: &mut Client, session: &str) -> Result<(), RunError> {
        let creds: Credentials = admin
            .call(Request::Credentials {
                session: session.to_string(),
            })
            .await?;
        let client = Client::connect(
            std::path::Path::new(&creds.socket),
            Some(&creds.token),
            "rebench built-in scaffold",
        )
        .await?;
        let events: Vec<Event> = admin
            .call(Request::Events {
                session: session.to_string(),
            })
            .await?;
        let mut seat = Seat {
            client,
            admin,
            session: session.to_string(),
        };
        let mut conversation = conversation_from(&events);
        let mut pending = match conversation.last() {
            None => self.prompt(&mut seat).await?,
            Some(last) if !last.tool_calls.is_empty() => last
                .tool_calls
                .iter()
                .map(|c| {
                    Message::tool_result(
                        &c.id,
                        "(interrupted: the harness restarted while this call ran; \
                         it may or may not have taken effect)",
                    )
                })
                .collect(),
            Some(_) => vec![Message::new(Role::User, NUDGE)],
        };
        loop {
            let Some(view) = seat.running().await? else {
                return Ok(());
            };
            if view.remaining_s < reserve_s(view.budget_s) {
                return self.submit(&mut seat, None).await;
            }
            add_status(&mut pending, &view);
            let mut request = conversation.clone();
            request.extend(pending.iter().cloned());
            fit_context(&mut request, self.agent.context_chars);
            let completion = match self.call_model(&mut seat, &request).await? {
                Some(c) => c,
                None => return Ok(()),
            };
            let record = self.record(&pending, &completion, request.len());
            match seat
                .client
                .call::<Value>(Request::ModelCall {
                    session: session.to_string(),
                    call: Box::new(record),
                })
                .await
            {
                Ok(_) => {}
                Err(ClientError::Server { .. }) if seat.view().await?.state == Phase::Ended => {
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
            conversation.append(&mut pending);
            conversation.push(completion.message.clone());
            if completion.message.tool_calls.is_empty() {
                pending.push(Message::new(Role::User, NUDGE));
                continue;
            }
            for call in &completion.message.tool_calls {
                let outcome = self
                    .use_tool(&mut seat, &call.name, &call.arguments)
                    .await?;
                match outcome {
                    ToolOutcome::Result(text) => pending.push(Message::tool_result(&call.id, text)),
                    ToolOutcome::SessionEnded => return Ok(()),
                }
            }
        }
    }

    async fn prompt(&self, seat: &mut Seat<'_>) -> Result<Vec<Message>, RunError> {
        let instructions: InstructionsReply = seat
            .client
            .call(Request::Instructions {
                session: seat.session.clone(),
            })
            .await?;
        let view = seat.view().await?;
        let system = "You are an AI agent doing a research-engineering task on a Linux machine, \
            under a time limit. You act only through tools: `bash` runs a command in your \
            workspace, `score` runs the task's scoring function on the workspace as it is now, \
            `submit` ends the task. Time passes while you think and while commands run; the \
            task ends by itself when the time is up. Work step by step, score your progress, \
            and submit before the time runs out.";
        let tokens = match view.limits.max_tokens {
            Some(max) => format!(" You may use at most {max} tokens in all."),
            None => String::new(),
        };
        let task = format!(
            "# {}\n\n{}\n\nYou have {} in all.{tokens}",
            instructions.title,
            instructions.instructions.trim(),
            format_duration(Duration::from_secs_f64(view.budget_s))
        );
        Ok(vec![
            Message::new(Role::System, system),
            Message::new(Role::User, task),
        ])
    }

    fn record(&self, input: &[Message], c: &Completion, messages: usize) -> ModelCallRecord {
        let cost = (c.tokens_in as f64 * self.agent.price_in
            + c.tokens_out as f64 * self.agent.price_out)
            / 1e6;
        // The record stays far under the server's 1 MiB per call, whatever a
        // tool printed; the conversation in memory keeps every character.
        let bounded = |m: &Message| Message {
            text: head_and_tail(&m.text, RECORD_TEXT_CHARS),
            ..m.clone()
        };
        ModelCallRecord {
            model: self.endpoint.model.clone(),
            input: input.iter().map(bounded).collect(),
            output: bounded(&c.message),
            request_messages: messages,
            request_bytes: c.request_bytes,
            tokens_in: c.tokens_in,
            tokens_out: c.tokens_out,
            cost_usd: cost,
            latency_ms: c.latency.as_millis() as u64,
            stop_reason: c.stop_reason.clone(),
        }
    }

    /// One model call, through outages: retried for `retry_for`, then the
    /// session pauses (`api_outage`) and the call is tried every
    /// `probe_every` until it answers. None: the session ended meanwhile.
    async fn call_model(
        &self,
        seat: &mut Seat<'_>,
        request: &[Message],
    ) -> Result<Option<Completion>, RunError> {
        let tools = tools();
        let first_failure = Instant::now();
        let mut delay = Duration::from_millis(500);
        let mut malformed = 0;
        loop {
            match self.endpoint.complete(request, &tools).await {
                Ok(c) => return Ok(Some(c)),
                Err(ApiError::Fatal(e)) => return Err(RunError::Failed(format!("model API: {e}"))),
                Err(ApiError::Malformed(e)) => {
                    malformed += 1;
                    if malformed > MALFORMED_RETRIES {
                        return Err(RunError::Failed(format!("model API: {e}")));
                    }
                }
                Err(ApiError::Transient(e)) => {
                    if first_failure.elapsed() + delay > self.outage.retry_for {
                        return self.wait_out_outage(seat, request, &e).await;
                    }
                    tracing::info!("model API failed, retrying in {delay:?}: {e}");
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(8));
        }
    }

    async fn wait_out_outage(
        &self,
        seat: &mut Seat<'_>,
        request: &[Message],
        why: &str,
    ) -> Result<Option<Completion>, RunError> {
        let paused = seat
            .admin
            .call::<SessionView>(Request::Pause {
                session: seat.session.clone(),
                reason: PauseReason::ApiOutage,
                note: Some(format!("model API unreachable: {}", cut(why, 500))),
            })
            .await;
        match paused {
            Ok(_) => {}
            Err(ClientError::Server { .. }) if seat.view().await?.state == Phase::Ended => {
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        }
        let tools = tools();
        loop {
            tokio::time::sleep(self.outage.probe_every).await;
            if seat.view().await?.state == Phase::Ended {
                return Ok(None);
            }
            match self.endpoint.complete(request, &tools).await {
                Ok(c) => {
                    seat.end_outage().await;
                    return Ok(Some(c));
                }
                Err(ApiError::Transient(e)) => tracing::info!("model API still down: {e}"),
                Err(other) => {
                    seat.end_outage().await;
                    return Err(RunError::Failed(format!("model API: {other}")));
                }
            }
        }
    }

    async fn use_tool(
        &self,
        seat: &mut Seat<'_>,
        name: &str,
        arguments: &str,
    ) -> Result<ToolOutcome, RunError> {
        let args: Value = if arguments.trim().is_empty() {
            json!({})
        } else {
            match serde_json::from_str(arguments) {
                Ok(v @ Value::Object(_)) => v,
                _ => {
                    return Ok(ToolOutcome::Result(format!(
                        "error: the arguments of {name} must be a JSON object; got {}",
                        cut(arguments, 200)
                    )));
                }
            }
        };
        let Some(view) = seat.running().await? else {
            return Ok(ToolOutcome::SessionEnded);
        };
        match name {
            "bash" => {
                let Some(command) = args.get("command").and_then(Value::as_str) else {
                    return Ok(ToolOutcome::Result(
                        "error: bash needs {\"command\": \"...\"}".into(),
                    ));
                };
                let timeout = EXEC_TIMEOUT.as_secs_f64().min(view.remaining_s.max(1.0));
                let reply = seat
                    .client
                    .call::<ExecReply>(Request::Exec {
                        session: seat.session.clone(),
                        command: command.to_string(),
                        timeout_s: Some(timeout),
                        cwd: None,
                    })
                    .await;
                self.tool_reply(seat, reply.map(|r| exec_text(&r))).await
            }
            "score" => {
                let reply = seat
                    .client
                    .call::<ScoreView>(Request::Score {
                        session: seat.session.clone(),
                    })
                    .await;
                self.tool_reply(seat, reply.map(|s| score_text(&s))).await
            }
            "submit" => {
                let answer = args
                    .get("answer")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.submit(seat, answer).await?;
                Ok(ToolOutcome::SessionEnded)
            }
            other => Ok(ToolOutcome::Result(format!(
                "error: there is no tool {other:?} (use bash, score or submit)"
            ))),
        }
    }

    /// A tool's reply as text for the model; a refusal because the
    /// session ended stops the run.
    async fn tool_reply(
        &self,
        seat: &mut Seat<'_>,
        reply: Result<String, ClientError>,
    ) -> Result<ToolOutcome, RunError> {
        match reply {
            Ok(text) => Ok(ToolOutcome::Result(text)),
            Err(ClientError::Server { code, message }) => {
                if seat.view().await?.state == Phase::Ended {
                    return Ok(ToolOutcome::SessionEnded);
                }
                let code = serde_json::to_value(code).unwrap_or_default();
                Ok(ToolOutcome::Result(format!("error ({code}): {message}")))
            }
            Err(e) => Err(RunError::Lost(e)),
        }
    }

    async fn submit(&self, seat: &mut Seat<'_>, answer: Option<String>) -> Result<(), RunError> {
        let submitted = seat
            .client
            .call::<SessionView>(Request::Submit {
                session: seat.session.clone(),
                answer,
            })
            .await;
        match submitted {
            Ok(_) => Ok(()),
            Err(ClientError::Server {
                code: ErrorCode::InvalidState | ErrorCode::Busy,
                ..
            }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

enum ToolOutcome {
    Result(String),
    SessionEnded,
}

/// The conversation so far, from the session's recorded model calls.
pub fn conversation_from(events: &[Event]) -> Vec<Message> {
    let mut conversation = Vec::new();
    for event in events {
        if let EventKind::ModelCall(call) = &event.kind {
            conversation.extend(call.input.iter().cloned());
            conversation.push(call.output.clone());
        }
    }
    conversation
}

/// Time kept back for the final submit: 2% of the budget, 5 s to 2 min.
fn reserve_s(budget_s: f64) -> f64 {
    (budget_s * 0.02).clamp(5.0, 120.0)
}

fn add_status(pending: &mut [Message], view: &SessionView) {
    let mut status = format!(
        "[time left: {} of {}",
        format_duration(Duration::from_secs_f64(view.remaining_s)),
        format_duration(Duration::from_secs_f64(view.budget_s))
    );
    if let Some(max) = view.limits.max_tokens {
        let used = view.usage.tokens_in + view.usage.tokens_out;
        status.push_str(&format!("; tokens used: {used} of {max}"));
    }
    status.push(']');
    if let Some(last) = pending.last_mut() {
        last.text = format!("{}\n\n{status}", last.text);
    }
}

/// Drops old tool outputs (oldest first, the last few kept) until the
/// conversation fits in `limit` characters.
pub fn fit_context(conversation: &mut [Message], limit: usize) {
    let size = |c: &[Message]| c.iter().map(|m| m.text.len()).sum::<usize>();
    let mut total = size(conversation);
    let keep_from = conversation.len().saturating_sub(6);
    for message in conversation[..keep_from].iter_mut() {
        if total <= limit {
            break;
        }
        if message.role == Role::Tool && message.text.len() > DROPPED.len() {
            total -= message.text.len() - DROPPED.len();
            message.text = DROPPED.to_string();
        }
    }
}

fn exec_text(r: &ExecReply) -> String {
    let status = match (r.exit_code, r.signal, r.timed_out) {
        (_, _, true) => "timed out".to_string(),
        (Some(code), _, _) => format!("exit code {code}"),
        (None, Some(signal), _) => format!("killed by signal {signal}"),
        (None, None, _) => "ended".to_string(),
    };
    let mut text = format!("{status} after {:.1}s", r.duration_ms as f64 / 1000.0);
    for (name, stream) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        if !stream.is_empty() {
            text.push_str(&format!(
                "\n--- {name} ---\n{}",
                head_and_tail(stream, OUTPUT_CHARS)
            ));
        }
    }
    text
}

fn score_text(s: &ScoreView) -> String {
    match (s.valid, s.normalized) {
        (Some(false), _) => format!("invalid: {}", s.message),
        (_, Some(n)) => format!("normalized score {n:.3}: {}", s.message),
        _ => format!("scored: {}", s.message),
    }
}

fn head_and_tail(text: &str, limit: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= limit {
        return text.to_string();
    }
    let half = limit / 2;
    let head: String = chars[..half].iter().collect();
    let tail: String = chars[chars.len() - half..].iter().collect();
    format!(
        "{head}\n[... {} characters cut ...]\n{tail}",
        chars.len() - 2 * half
    )
}

fn cut(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_tool_outputs_go_first_and_the_recent_ones_stay() {
        let mut conversation = vec![
            Message::new(Role::System, "s"),
            Message::new(Role::User, "u"),
        ];
        for i in 0..10 {
            conversation.push(Message::tool_result(&format!("c{i}"), "x".repeat(1000)));
        }
        fit_context(&mut conversation, 7_000);
        let dropped = conversation.iter().filter(|m| m.text == DROPPED).count();
        assert!(dropped >= 3, "{dropped}");
        assert_eq!(conversation[2].text, DROPPED);
        assert!(conversation[6..].iter().all(|m| m.text.len() == 1000));
        let total: usize = conversation.iter().map(|m| m.text.len()).sum();
        assert!(total <= 7_000, "{total}");
    }

    #[test]
    fn long_output_keeps_its_head_and_tail() {
        let text = format!("{}{}", "a".repeat(10_000), "b".repeat(10_000));
        let cut = head_and_tail(&text, 100);
        assert!(cut.starts_with("aaaa") && cut.ends_with("bbbb"));
        assert!(cut.contains("19900 characters cut"), "{cut}");
    }

    #[test]
    fn the_reserve_grows_with_the_budget_within_bounds() {
        assert_eq!(reserve_s(60.0), 5.0);
        assert_eq!(reserve_s(1800.0), 36.0);
        assert_eq!(reserve_s(8.0 * 3600.0), 120.0);
    }
}
