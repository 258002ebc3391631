//! A stand-in model server on 127.0.0.1 for campaign tests: it speaks the
//! OpenAI chat-completions and Anthropic Messages shapes (by path) and
//! answers from a script that looks only at the conversation it is sent
//! (how many tool results it holds), so a resumed run continues its
//! script. Faults (5xx, 429, hung connections, malformed tool calls, a
//! gate that holds answers) are switched on by the test.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// One step of a scripted agent: a tool call (name, arguments).
pub type Step = (&'static str, Value);

/// What the server does with the next requests, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// HTTP status with an error body.
    Status(u16),
    /// Accepts and never answers (until the client gives up).
    Hang,
    /// A tool call whose arguments are not JSON.
    MalformedToolCall,
}

#[derive(Default)]
struct State {
    faults: Vec<Fault>,
    /// Answers 503 to everything until then.
    down_until: Option<Instant>,
    /// Every request's path and body, in order.
    seen: Vec<(String, Value)>,
    /// Every request's credential header (`authorization` or `x-api-key`).
    credentials: Vec<String>,
}

pub struct ModelServer {
    pub port: u16,
    state: Arc<Mutex<State>>,
    /// While set, answers for step `gate_step` wait.
    gate_closed: Arc<AtomicBool>,
    gate_step: Arc<AtomicUsize>,
    /// Requests waiting at the gate.
    pub waiting: Arc<AtomicUsize>,
}

impl ModelServer {
    /// Serves `scripts`: the model name picks the script (`model` in the request).
    pub fn start(scripts: Vec<(&'static str, Vec<Step>)>) -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let gate_closed = Arc::new(AtomicBool::new(false));
        let gate_step = Arc::new(AtomicUsize::new(usize::MAX));
        let waiting = Arc::new(AtomicUsize::new(0));
        let scripts = Arc::new(scripts);
        {
            let (state, gate_closed, gate_step, waiting) = (
                state.clone(),
                gate_closed.clone(),
                gate_step.clone(),
                waiting.clone(),
            );
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let (state, scripts, gate_closed, gate_step, waiting) = (
                        state.clone(),
                        scripts.clone(),
                        gate_closed.clone(),
                        gate_step.clone(),
                        waiting.clone(),
                    );
                    std::thread::spawn(move || {
                        let _ = serve(stream, &state, &scripts, &gate_closed, &gate_step, &waiting);
                    });
                }
            });
        }
        ModelServer {
            port,
            state,
            gate_closed,
            gate_step,
            waiting,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn push_faults(&self, faults: &[Fault]) {
        self.state.lock().unwrap().faults.extend_from_slice(faults);
    }

    /// Every request fails with 503 for `for_how_long` from now.
    pub fn go_down(&self, for_how_long: Duration) {
        self.state.lock().unwrap().down_until = Some(Instant::now() + for_how_long);
    }

    /// Holds answers for script step `step` until `open_gate`.
    pub fn close_gate(&self, step: usize) {
        self.gate_step.store(step, Ordering::SeqCst);
        self.gate_closed.store(true, Ordering::SeqCst);
    }

    pub fn open_gate(&self) {
        self.gate_closed.store(false, Ordering::SeqCst);
    }

    /// The credential header of each request so far ("" when none).
    pub fn credentials(&self) -> Vec<String> {
        self.state.lock().unwrap().credentials.clone()
    }

    /// Requests received so far (path, body).
    pub fn seen(&self) -> Vec<(String, Value)> {
        self.state.lock().unwrap().seen.clone()
    }
}

fn serve(
    stream: TcpStream,
    state: &Mutex<State>,
    scripts: &[(&'static str, Vec<Step>)],
    gate_closed: &AtomicBool,
    gate_step: &AtomicUsize,
    waiting: &AtomicUsize,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_string();
    let mut length = 0usize;
    let mut credential = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
            if name.eq_ignore_ascii_case("authorization") || name.eq_ignore_ascii_case("x-api-key")
            {
                credential = value.trim().to_string();
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let anthropic = path.ends_with("/messages");
    let fault = {
        let mut s = state.lock().unwrap();
        s.seen.push((path.clone(), body.clone()));
        s.credentials.push(credential);
        if s.down_until.is_some_and(|t| Instant::now() < t) {
            Some(Fault::Status(503))
        } else if s.faults.is_empty() {
            None
        } else {
            Some(s.faults.remove(0))
        }
    };
    let step = tool_results(&body, anthropic);
    if gate_step.load(Ordering::SeqCst) == step && gate_closed.load(Ordering::SeqCst) {
        waiting.fetch_add(1, Ordering::SeqCst);
        while gate_closed.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        waiting.fetch_sub(1, Ordering::SeqCst);
    }
    let (status, answer) = match fault {
        Some(Fault::Status(code)) => (code, json!({"error": {"message": "stand-in fault"}})),
        Some(Fault::Hang) => {
            std::thread::sleep(Duration::from_secs(600));
            return Ok(());
        }
        Some(Fault::MalformedToolCall) => (200, reply(anthropic, "bash", None, step)),
        None => {
            let model = body["model"].as_str().unwrap_or("");
            let script = scripts
                .iter()
                .find(|(name, _)| *name == model)
                .map(|(_, s)| s.as_slice())
                .unwrap_or(&[]);
            match script.get(step) {
                Some((tool, args)) => (200, reply(anthropic, tool, Some(args), step)),
                // Past its script the agent submits.
                None => (200, reply(anthropic, "submit", Some(&json!({})), step)),
            }
        }
    };
    let text = answer.to_string();
    let reason = if status == 200 { "OK" } else { "Error" };
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    )?;
    out.flush()
}

/// Tool results in a request: the step the conversation has reached.
fn tool_results(body: &Value, anthropic: bool) -> usize {
    let Some(messages) = body["messages"].as_array() else {
        return 0;
    };
    if anthropic {
        messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .count()
    } else {
        messages.iter().filter(|m| m["role"] == "tool").count()
    }
}

/// An answer calling `tool` (with malformed arguments when `args` is None).
fn reply(anthropic: bool, tool: &str, args: Option<&Value>, step: usize) -> Value {
    let thought = format!("Step {step}: I will call {tool}.");
    if anthropic {
        let input = args.cloned().unwrap_or_else(|| json!("{not json"));
        json!({
            "id": format!("msg_{step}"), "type": "message", "role": "assistant",
            "content": [{"type": "text", "text": thought},
                        {"type": "tool_use", "id": format!("toolu_{step}"), "name": tool, "input": input}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 100 + 10 * step, "output_tokens": 20}
        })
    } else {
        let arguments = args.map_or_else(|| "{not json".to_string(), Value::to_string);
        json!({
            "id": format!("chatcmpl-{step}"), "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": thought,
                "tool_calls": [{"id": format!("call_{step}"), "type": "function",
                                "function": {"name": tool, "arguments": arguments}}]}}],
            "usage": {"prompt_tokens": 100 + 10 * step, "completion_tokens": 20}
        })
    }
}
