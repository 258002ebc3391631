//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`)
//! with function tools.

use serde_json::{Value, json};

use super::{Completion, Endpoint, ToolSpec, completion, field};
use crate::session::agent::{Message, Role, ToolCall};

pub fn request(
    endpoint: &Endpoint,
    conversation: &[Message],
    tools: &[ToolSpec],
) -> (String, Vec<(&'static str, String)>, Value) {
    let messages: Vec<Value> = conversation.iter().map(message).collect();
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}})
        })
        .collect();
    let body = json!({
        "model": endpoint.model,
        "messages": messages,
        "tools": tools,
        "max_tokens": endpoint.max_output_tokens,
    });
    let mut headers = Vec::new();
    if let Some(key) = &endpoint.key {
        headers.push(("authorization", format!("Bearer {key}")));
    }
    (
        format!("{}/chat/completions", endpoint.base_url),
        headers,
        body,
    )
}

fn message(m: &Message) -> Value {
    match m.role {
        Role::System => json!({"role": "system", "content": m.text}),
        Role::User => json!({"role": "user", "content": m.text}),
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
            "content": m.text,
        }),
        Role::Assistant => {
            let mut out = json!({"role": "assistant", "content": m.text});
            if !m.tool_calls.is_empty() {
                out["tool_calls"] = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect();
            }
            out
        }
    }
}

pub fn answer(answer: &Value) -> Result<Completion, String> {
    let choice = field(answer, "choices.0")?;
    let reply = field(choice, "message")?;
    let text = reply
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut tool_calls = Vec::new();
    if let Some(calls) = reply.get("tool_calls").and_then(Value::as_array) {
        for (i, call) in calls.iter().enumerate() {
            let name = field(call, "function.name")?.as_str().ok_or_else(|| {
                format!("choices.0.message.tool_calls.{i}.function.name is not text")
            })?;
            // Arguments are JSON text; some servers send an object instead.
            let arguments = match call.get("function").and_then(|f| f.get("arguments")) {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            tool_calls.push(ToolCall {
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("call_{i}"), str::to_string),
                name: name.to_string(),
                arguments,
            });
        }
    }
    Ok(completion(
        text,
        tool_calls,
        answer.get("usage"),
        (&["prompt_tokens"], "completion_tokens"),
        choice.get("finish_reason"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_and_usage_are_read() {
        let answer = json!({
            "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "c1", "type": "function",
                                "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3}
        });
        let c = super::answer(&answer).unwrap();
        assert_eq!(c.message.tool_calls[0].name, "bash");
        assert_eq!(c.message.tool_calls[0].arguments, "{\"command\": \"ls\"}");
        assert_eq!((c.tokens_in, c.tokens_out), (12, 3));
        assert_eq!(c.stop_reason, "tool_calls");
        let err = super::answer(&json!({"choices": []})).unwrap_err();
        assert!(err.contains("choices.0"), "{err}");
    }

    #[test]
    fn a_tool_result_answers_its_call() {
        let m = message(&Message::tool_result("c1", "ok"));
        assert_eq!(m["role"], "tool");
        assert_eq!(m["tool_call_id"], "c1");
    }
}
