//! Model API clients: OpenAI-compatible chat completions and the Anthropic
//! Messages API, both with tools, over one neutral conversation type
//! (`session::agent::Message`). Each turns a conversation and the tools
//! into a request and the answer back into a message with tool calls.

mod anthropic;
mod http;
mod openai;

use std::time::{Duration, Instant};

use crate::session::agent::Message;

use super::spec::{AgentSpec, Api};

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// Worth retrying: no connection, a timeout, HTTP 5xx or 429.
    #[error("{0}")]
    Transient(String),
    /// The request itself is wrong (HTTP 4xx): retrying will not help.
    #[error("{0}")]
    Fatal(String),
    /// The answer could not be read (not JSON, or not the API's shape).
    #[error("{0}")]
    Malformed(String),
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// JSON Schema of its arguments.
    pub parameters: serde_json::Value,
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub message: Message,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub stop_reason: String,
    pub request_bytes: usize,
    pub latency: Duration,
}

/// A model endpoint of one agent.
#[derive(Clone)]
pub struct Endpoint {
    pub api: Api,
    pub base_url: String,
    pub model: String,
    key: Option<String>,
    pub max_output_tokens: u32,
    http: http::HttpClient,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Endpoint")
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish()
    }
}

impl Endpoint {
    /// The agent's endpoint, its key read from the variable it names.
    pub fn for_agent(agent: &AgentSpec, timeout: Duration) -> anyhow::Result<Endpoint> {
        let key = match &agent.key_env {
            None => None,
            Some(var) => Some(std::env::var(var).map_err(|_| {
                anyhow::anyhow!(
                    "agent {}: the key variable {var} (key_env) is not set in this environment",
                    agent.name
                )
            })?),
        };
        Ok(Endpoint {
            api: agent.api,
            base_url: agent
                .base_url
                .clone()
                .unwrap_or_default()
                .trim_end_matches('/')
                .to_string(),
            model: agent.model.clone().unwrap_or_default(),
            key,
            max_output_tokens: agent.max_output_tokens,
            http: http::HttpClient::new(timeout),
        })
    }

    /// One call: the conversation (system message first, if any) and the tools.
    pub async fn complete(
        &self,
        conversation: &[Message],
        tools: &[ToolSpec],
    ) -> Result<Completion, ApiError> {
        let started = Instant::now();
        let (url, headers, body) = match self.api {
            Api::Openai => openai::request(self, conversation, tools),
            Api::Anthropic => anthropic::request(self, conversation, tools),
            Api::Command => {
                return Err(ApiError::Fatal(
                    "an external scaffold has no endpoint".into(),
                ));
            }
        };
        let body = serde_json::to_vec(&body).map_err(|e| ApiError::Fatal(e.to_string()))?;
        let request_bytes = body.len();
        let answer = self.http.post_json(&url, &headers, body).await?;
        let mut completion = match self.api {
            Api::Anthropic => anthropic::answer(&answer),
            _ => openai::answer(&answer),
        }
        .map_err(|e| ApiError::Malformed(format!("{url}: {e}")))?;
        completion.request_bytes = request_bytes;
        completion.latency = started.elapsed();
        Ok(completion)
    }
}

/// An answer's message and its usage counts (`usage.KEY`, 0 when absent).
fn completion(
    text: String,
    tool_calls: Vec<crate::session::agent::ToolCall>,
    usage: Option<&serde_json::Value>,
    token_keys: (&[&str], &str),
    stop_reason: Option<&serde_json::Value>,
) -> Completion {
    let count = |key: &str| {
        usage
            .and_then(|u| u.get(key))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    Completion {
        message: Message {
            role: crate::session::agent::Role::Assistant,
            text,
            tool_calls,
            tool_call_id: None,
        },
        tokens_in: token_keys.0.iter().map(|k| count(k)).sum(),
        tokens_out: count(token_keys.1),
        stop_reason: stop_reason
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string(),
        request_bytes: 0,
        latency: Duration::ZERO,
    }
}

/// The answer's text for a field that should be a string, or a clear error.
fn field<'a>(value: &'a serde_json::Value, path: &str) -> Result<&'a serde_json::Value, String> {
    let mut at = value;
    for part in path.split('.') {
        at = match part.parse::<usize>() {
            Ok(i) => at.get(i),
            Err(_) => at.get(part),
        }
        .ok_or_else(|| format!("the answer has no {path}"))?;
    }
    Ok(at)
}
