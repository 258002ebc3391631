//! What an agent session carries beyond a human one: who the agent is, the
//! campaign run it belongs to, its token and cost limits, and the record
//! of each model call (the conversation, so a resumed run continues it).

use serde::{Deserialize, Serialize};

/// The agent behind a session: compared in the report under `name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentIdentity {
    pub name: String,
    /// The model, as the endpoint names it; empty for an external scaffold that gave none.
    #[serde(default)]
    pub model: String,
    /// `builtin` (rebench's reference loop) or the external scaffold's command.
    pub scaffold: String,
}

/// The campaign run a session was made for (at most one session per run).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CampaignRunRef {
    pub campaign: String,
    pub run: String,
}

/// Per-run limits on what the model may use; crossing one ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct RunLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

impl RunLimits {
    /// The end reason a run with these totals has reached, if any.
    pub fn crossed(&self, usage: &UsageTotals) -> Option<super::EndReason> {
        if self
            .max_tokens
            .is_some_and(|max| usage.tokens_in.saturating_add(usage.tokens_out) >= max)
        {
            return Some(super::EndReason::TokenLimit);
        }
        if self.max_cost_usd.is_some_and(|max| usage.cost_usd >= max) {
            return Some(super::EndReason::CostLimit);
        }
        None
    }
}

/// Tokens and cost summed over a session's `usage` and `model_call` events.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct UsageTotals {
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cost_usd: f64,
    /// Model calls recorded (`model_call` events).
    #[serde(default)]
    pub model_calls: u64,
}

impl UsageTotals {
    /// Counts an event that carries usage (`usage`, `model_call`); others are ignored.
    pub fn count(&mut self, kind: &super::EventKind) {
        match kind {
            super::EventKind::Usage {
                tokens_in,
                tokens_out,
                cost_usd,
            } => self.add(*tokens_in, *tokens_out, *cost_usd),
            super::EventKind::ModelCall(call) => {
                self.add(call.tokens_in, call.tokens_out, call.cost_usd);
                self.model_calls += 1;
            }
            _ => {}
        }
    }

    pub fn add(&mut self, tokens_in: u64, tokens_out: u64, cost_usd: f64) {
        self.tokens_in = self.tokens_in.saturating_add(tokens_in);
        self.tokens_out = self.tokens_out.saturating_add(tokens_out);
        if cost_usd.is_finite() && cost_usd > 0.0 {
            self.cost_usd += cost_usd;
        }
    }
}

/// Who speaks in a conversation with a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    /// A tool's result, answering the assistant's call `tool_call_id`.
    Tool,
}

/// A tool the model asked to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (JSON text; it may be malformed).
    pub arguments: String,
}

/// One message of a conversation, in neither API's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            text: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    pub fn tool_result(call_id: &str, text: impl Into<String>) -> Self {
        Message {
            role: Role::Tool,
            text: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.to_string()),
        }
    }
}

/// One call to the model: what was added to the conversation since the
/// previous call, what came back, and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCallRecord {
    pub model: String,
    /// Messages sent this time that the previous calls had not (the
    /// prompt first, then tool results); earlier ones are in earlier records.
    pub input: Vec<Message>,
    /// The model's answer: text and tool calls.
    pub output: Message,
    /// Messages in the request, and its size in bytes.
    pub request_messages: usize,
    pub request_bytes: usize,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cost_usd: f64,
    pub latency_ms: u64,
    /// Why the model stopped (`tool_use`, `end_turn`, `stop`, …).
    #[serde(default)]
    pub stop_reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_name_the_one_crossed() {
        let limits = RunLimits {
            max_tokens: Some(100),
            max_cost_usd: Some(1.0),
        };
        let mut usage = UsageTotals::default();
        usage.add(40, 59, 0.5);
        assert_eq!(limits.crossed(&usage), None);
        usage.add(0, 1, 0.0);
        assert_eq!(
            limits.crossed(&usage),
            Some(super::super::EndReason::TokenLimit)
        );
        let cost_only = RunLimits {
            max_tokens: None,
            max_cost_usd: Some(1.0),
        };
        usage.add(0, 0, 0.6);
        assert_eq!(
            cost_only.crossed(&usage),
            Some(super::super::EndReason::CostLimit)
        );
        usage.add(0, 0, f64::NAN);
        assert!(usage.cost_usd.is_finite());
    }
}
