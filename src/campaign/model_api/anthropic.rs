//! The Anthropic Messages API (`POST {base_url}/messages`) with tools. The
//! system prompt is a field of its own; tool results are `tool_result`
//! blocks of a user turn, consecutive ones in one turn.

use serde_json::{Value, json};

use super::{Completion, Endpoint, ToolSpec, completion, field};
use crate::session::agent::{Message, Role, ToolCall};

const VERSION: &str = "2023-06-01";

pub fn request(
    endpoint: &Endpoint,
    conversation: &[Message],
    tools: &[ToolSpec],
) -> (String, Vec<(&'static str, String)>, Value) {
    let system: Vec<&str> = conversation
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.text.as_str())
        .collect();
    let mut turns: Vec<Value> = Vec::new();
    for m in conversation.iter().filter(|m| m.role != Role::System) {
        let (role, blocks) = blocks(m);
        // The API wants user and assistant to alternate: merge neighbours.
        match turns.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.extend(blocks);
                }
            }
            _ => turns.push(json!({"role": role, "content": blocks})),
        }
    }
    let tools: Vec<Value> = tools
        .iter()
        .map(
            |t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}),
        )
        .collect();
    let mut body = json!({
        "model": endpoint.model,
        "max_tokens": endpoint.max_output_tokens,
        "messages": turns,
        "tools": tools,
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    let mut headers = vec![("anthropic-version", VERSION.to_string())];
    if let Some(key) = &endpoint.key {
        headers.push(("x-api-key", key.clone()));
    }
    (format!("{}/messages", endpoint.base_url), headers, body)
}

fn blocks(m: &Message) -> (&'static str, Vec<Value>) {
    match m.role {
        Role::Tool => (
            "user",
            vec![json!({"type": "tool_result",
                        "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                        "content": m.text})],
        ),
        Role::Assistant => {
            let mut out = Vec::new();
            if !m.text.is_empty() {
                out.push(json!({"type": "text", "text": m.text}));
            }
            for call in &m.tool_calls {
                // The input must be an object; a malformed one is sent as empty.
                let input: Value = serde_json::from_str(&call.arguments)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                out.push(
                    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}),
                );
            }
            ("assistant", out)
        }
        Role::User | Role::System => ("user", vec![json!({"type": "text", "text": m.text})]),
    }
}

pub fn answer(answer: &Value) -> Result<Completion, String> {
    let content = field(answer, "content")?
        .as_array()
        .ok_or("the answer's content is not a list")?;
    let mut text = Vec::new();
    let mut tool_calls = Vec::new();
    for (i, block) in content.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            ),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: block
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("toolu_{i}"), str::to_string),
                name: field(block, "name")?
                    .as_str()
                    .ok_or_else(|| format!("content.{i}.name is not text"))?
                    .to_string(),
                arguments: block.get("input").map(Value::to_string).unwrap_or_default(),
            }),
            // Thinking and other blocks are not part of the tool loop.
            _ => {}
        }
    }
    Ok(completion(
        text.join("\n"),
        tool_calls,
        answer.get("usage"),
        (
            &[
                "input_tokens",
                "cache_read_input_tokens",
                "cache_creation_input_tokens",
            ],
            "output_tokens",
        ),
        answer.get("stop_reason"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_use_blocks_become_calls() {
        let answer = json!({
            "content": [{"type": "text", "text": "Let me look."},
                        {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 20, "output_tokens": 5}
        });
        let c = super::answer(&answer).unwrap();
        assert_eq!(c.message.text, "Let me look.");
        assert_eq!(c.message.tool_calls[0].id, "t1");
        let args: Value = serde_json::from_str(&c.message.tool_calls[0].arguments).unwrap();
        assert_eq!(args["command"], "ls");
        assert_eq!((c.tokens_in, c.tokens_out), (20, 5));
    }

    #[test]
    fn consecutive_tool_results_share_one_user_turn() {
        let mut call = Message::new(Role::Assistant, "");
        call.tool_calls = vec![
            ToolCall {
                id: "a".into(),
                name: "bash".into(),
                arguments: "{}".into(),
            },
            ToolCall {
                id: "b".into(),
                name: "score".into(),
                arguments: "not json".into(),
            },
        ];
        let conversation = vec![
            Message::new(Role::System, "be brief"),
            Message::new(Role::User, "go"),
            call,
            Message::tool_result("a", "ok"),
            Message::tool_result("b", "0.5"),
        ];
        let endpoint = Endpoint {
            api: crate::campaign::spec::Api::Anthropic,
            base_url: "http://x".into(),
            model: "m".into(),
            key: None,
            max_output_tokens: 10,
            http: super::super::http::HttpClient::new(std::time::Duration::from_secs(1)),
        };
        let (_, _, body) = request(&endpoint, &conversation, &[]);
        let turns = body["messages"].as_array().unwrap();
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(body["system"], "be brief");
        assert_eq!(turns[1]["content"][1]["input"], json!({}));
    }
}
