//! The scorer's result line: `{"raw": number|null, "message": ..., "details": ...}`
//! as the last non-blank stdout line, and what it means for the score.

use serde_json::{Map, Value};

use super::capture::{LAST_LINE_LIMIT, LastLine, LastLineTracker};
use super::lenient_json;

/// How much of a non-JSON last line is quoted back in the failure message.
const QUOTED_LINE_CHARS: usize = 80;
/// Rendered messages are for one-line display; longer ones are cut.
const MESSAGE_CHARS: usize = 1000;

/// What the result line says.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedResult {
    /// The finite raw score, or why there is none.
    pub score: Result<f64, String>,
    /// The scorer's `message`, rendered compactly for people ("" if none).
    pub message_text: String,
    /// The scorer's `message` as given (Null if absent or unparsable).
    pub scorer_message: Value,
    /// The scorer's `details` as given (Null if absent or unparsable).
    pub details: Value,
}

impl ParsedResult {
    fn failed(reason: String) -> Self {
        ParsedResult {
            score: Err(reason),
            message_text: String::new(),
            scorer_message: Value::Null,
            details: Value::Null,
        }
    }
}

/// Interprets a whole stdout (the runner feeds the same tracker incrementally).
pub fn parse_stdout(stdout: &[u8]) -> ParsedResult {
    let mut tracker = LastLineTracker::default();
    tracker.push(stdout);
    parse_last_line(&tracker.finish())
}

pub(crate) fn parse_last_line(last_line: &LastLine) -> ParsedResult {
    let line = match last_line {
        LastLine::Empty => {
            return ParsedResult::failed("scorer printed no JSON result (stdout was empty)".into());
        }
        LastLine::TooLong => {
            return ParsedResult::failed(format!(
                "scorer printed no JSON result (last stdout line is over {LAST_LINE_LIMIT} bytes)"
            ));
        }
        LastLine::Line(line) => line,
    };
    let value = match lenient_json::parse(line) {
        Ok(value) => value,
        // Only a line that looks like an object was meant as the result.
        Err(error) if line.starts_with('{') => {
            return ParsedResult::failed(format!("malformed JSON result: {error}"));
        }
        Err(_) => {
            return ParsedResult::failed(format!(
                "scorer printed no JSON result (last stdout line: {})",
                quote_prefix(line, QUOTED_LINE_CHARS)
            ));
        }
    };
    match value {
        Value::Object(fields) => parse_fields(fields),
        other => ParsedResult::failed(format!(
            "scorer result is not a JSON object (got {})",
            kind_of(&other)
        )),
    }
}

fn parse_fields(mut fields: Map<String, Value>) -> ParsedResult {
    let mut scorer_message = fields.remove("message").unwrap_or(Value::Null);
    let mut details = fields.remove("details").unwrap_or(Value::Null);
    lenient_json::sentinels_to_text(&mut scorer_message);
    lenient_json::sentinels_to_text(&mut details);
    let message_text = render_message(&scorer_message);
    let score = match fields.get("raw") {
        None => Err("scorer result has no \"raw\" field".to_string()),
        Some(Value::Null) if message_text.is_empty() => Err("scorer reported no score".to_string()),
        Some(Value::Null) => Err(format!("no score: {message_text}")),
        Some(Value::Number(number)) => number
            .as_f64()
            .ok_or_else(|| format!("\"raw\" is not representable as a float: {number}")),
        Some(raw) => match lenient_json::non_finite(raw) {
            Some(nan) if nan.is_nan() => Err("raw is NaN".to_string()),
            Some(_) => Err("raw is not finite".to_string()),
            None => Err(format!(
                "\"raw\" must be a number or null, got {}: {}",
                kind_of(raw),
                quote_prefix(&raw.to_string(), QUOTED_LINE_CHARS)
            )),
        },
    };
    ParsedResult {
        score,
        message_text,
        scorer_message,
        details,
    }
}

/// Object → `k: v, k: v`; string as is; null → ""; anything else as JSON.
pub fn render_message(message: &Value) -> String {
    let text = match message {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Object(fields) => fields
            .iter()
            .map(|(key, value)| format!("{key}: {}", render_scalar(value)))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    };
    truncate_chars(text.trim(), MESSAGE_CHARS)
}

fn render_scalar(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn quote_prefix(text: &str, max_chars: usize) -> String {
    format!("{:?}", truncate_chars(text, max_chars))
}

fn truncate_chars(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reason(stdout: &str) -> String {
        parse_stdout(stdout.as_bytes()).score.unwrap_err()
    }

    #[test]
    fn valid_results() {
        let cases: &[(&str, f64, &str)] = &[
            (
                r#"{"raw": 0.75, "message": {"loss": 1.5, "note": "ok"}, "details": {"x": 1}}"#,
                0.75,
                "loss: 1.5, note: ok",
            ),
            (
                r#"{"raw": 3, "message": "fast enough"}"#,
                3.0,
                "fast enough",
            ),
            (r#"{"raw": -2.5e3}"#, -2500.0, ""),
            (
                "progress 10%\nprogress 100%\n{\"raw\": 1}\n\n  \n\r\n",
                1.0,
                "",
            ),
            (
                r#"  {"raw": 1, "message": {"nested": {"a": [1]}, "bad": NaN}}  "#,
                1.0,
                "bad: NaN, nested: {\"a\":[1]}",
            ),
        ];
        for (stdout, raw, message) in cases {
            let parsed = parse_stdout(stdout.as_bytes());
            assert_eq!(parsed.score, Ok(*raw), "{stdout}");
            assert_eq!(parsed.message_text, *message, "{stdout}");
        }
    }

    #[test]
    fn message_and_details_are_kept_as_given() {
        let parsed = parse_stdout(br#"{"raw": null, "message": {"why": "wrong answer"}, "details": {"answer": 41, "loss": Infinity}}"#);
        assert_eq!(parsed.score, Err("no score: why: wrong answer".into()));
        assert_eq!(parsed.scorer_message, json!({"why": "wrong answer"}));
        assert_eq!(parsed.details, json!({"answer": 41, "loss": "Infinity"}));
    }

    #[test]
    fn invalid_results_name_the_cause() {
        let cases: &[(&str, &str)] = &[
            ("", "scorer printed no JSON result (stdout was empty)"),
            (
                "\n\n   \n",
                "scorer printed no JSON result (stdout was empty)",
            ),
            (
                "{\"raw\": 1}\ndone",
                "scorer printed no JSON result (last stdout line: \"done\")",
            ),
            (r#"{"raw": null}"#, "scorer reported no score"),
            (
                r#"{"raw": null, "message": "wrong answer at index 3"}"#,
                "no score: wrong answer at index 3",
            ),
            (r#"{"raw": NaN, "message": "diverged"}"#, "raw is NaN"),
            (r#"{"raw": Infinity}"#, "raw is not finite"),
            (r#"{"raw": -Infinity}"#, "raw is not finite"),
            (
                "[1, 2]",
                "scorer result is not a JSON object (got an array)",
            ),
            ("0.5", "scorer result is not a JSON object (got a number)"),
            (
                "\"0.5\"",
                "scorer result is not a JSON object (got a string)",
            ),
            (r#"{"message": "hi"}"#, "scorer result has no \"raw\" field"),
            (
                r#"{"raw": "0.5"}"#,
                "\"raw\" must be a number or null, got a string: \"\\\"0.5\\\"\"",
            ),
            (
                r#"{"raw": [1]}"#,
                "\"raw\" must be a number or null, got an array: \"[1]\"",
            ),
            (
                r#"{"raw": true}"#,
                "\"raw\" must be a number or null, got a boolean: \"true\"",
            ),
        ];
        for (stdout, expected) in cases {
            assert_eq!(reason(stdout), *expected, "{stdout}");
        }
    }

    #[test]
    fn malformed_json_reports_the_parser_error() {
        let message = reason(r#"{"raw": 1,"#);
        assert!(message.starts_with("malformed JSON result: "), "{message}");
        assert!(message.contains("line 1"), "{message}");
        assert!(reason(r#"{"raw": NaNa}"#).starts_with("malformed JSON result: "));
    }

    #[test]
    fn long_non_json_line_is_quoted_briefly() {
        let line = "x".repeat(500);
        let message = reason(&line);
        assert!(message.len() < 150, "{message}");
        assert!(
            message.contains(&format!("\"{}…\"", "x".repeat(80))),
            "{message}"
        );
    }

    #[test]
    fn long_messages_are_cut() {
        let stdout = format!(r#"{{"raw": 1, "message": "{}"}}"#, "m".repeat(5000));
        let parsed = parse_stdout(stdout.as_bytes());
        assert_eq!(parsed.message_text.chars().count(), MESSAGE_CHARS + 1);
        assert_eq!(parsed.scorer_message.as_str().map(str::len), Some(5000));
    }
}
