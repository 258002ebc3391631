//! `rebench task-family-score`: the scorer of a family task's session.
//! The server runs it like any scorer (its own process group, cgroup,
//! timeout and output limit); it calls the family's `intermediate_score`,
//! `score` or the final aggregate as root in the session's container and
//! prints the result as the scorer protocol's last line
//! (`docs/scorer-protocol.md`): `score: None` becomes `"raw": null` (no
//! score), NaN `"raw": NaN` (invalid).

use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use super::call::call;
use super::{required_values, vars};
use crate::environment::family::helper::strings;

/// Runs the call the server's variables describe; the exit code.
pub fn run() -> anyhow::Result<i32> {
    let var = |name: &str| std::env::var(name).with_context(|| format!("{name} is not set"));
    let root: Vec<String> =
        serde_json::from_str(&var(vars::ROOT)?).context("REBENCH_TASK_ROOT is not a JSON argv")?;
    let family = var(vars::FAMILY)?;
    let task = var(vars::TASK)?;
    let operation = var(vars::OPERATION)?;
    let limit = Duration::from_secs(var(vars::TIMEOUT_S)?.parse().unwrap_or(1800));
    let mut request: Value = match std::env::var(vars::REQUEST) {
        Ok(path) => {
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
            serde_json::from_str(&text).with_context(|| format!("parsing {path}"))?
        }
        Err(_) => json!({}),
    };
    let required = strings(&request["required_env"]);
    let env = required_values(&required).map_err(anyhow::Error::msg)?;
    request["task"] = json!(task);
    request["env"] = json!(env.into_iter().collect::<std::collections::HashMap<_, _>>());
    let called = call(&root, &operation, &family, &request, limit).map_err(anyhow::Error::msg)?;
    // The family's own output, for the run's record.
    print!("{}", called.output);
    let result = match called.result {
        Ok(result) => result,
        Err(e) => {
            eprintln!("{e}");
            return Ok(1);
        }
    };
    println!("\n{}", result_line(&result));
    Ok(0)
}

/// The scorer protocol's result line for the helper's score result.
fn result_line(result: &Value) -> String {
    let message = &result["message"];
    let details = &result["details"];
    match (result["score"].as_f64(), result["why"].as_str()) {
        (Some(score), _) => {
            json!({"raw": score, "message": message, "details": details}).to_string()
        }
        (None, Some("nan")) => {
            // The protocol's own token for an invalid attempt.
            format!("{{\"raw\": NaN, \"message\": {message}, \"details\": {details}}}")
        }
        (None, why) => {
            let text = match why {
                Some("none") | None => "the family gave no score (None)".to_string(),
                Some(other) => format!("the family's score is {other}"),
            };
            let message = if message.is_null() {
                json!(text)
            } else {
                message.clone()
            };
            json!({"raw": null, "message": message, "details": details}).to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_none_and_nan_become_protocol_lines() {
        let line =
            result_line(&json!({"score": 0.5, "message": {"acc": 0.5}, "details": {"n": 3}}));
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["raw"], 0.5);
        assert_eq!(parsed["message"]["acc"], 0.5);
        let none: Value =
            serde_json::from_str(&result_line(&json!({"score": null, "why": "none"}))).unwrap();
        assert!(none["raw"].is_null());
        assert!(none["message"].as_str().unwrap().contains("None"));
        let nan =
            result_line(&json!({"score": null, "why": "nan", "message": null, "details": null}));
        assert!(nan.starts_with("{\"raw\": NaN"), "{nan}");
    }
}
