//! The calling convention of rebench's helper (`assets/taskhelper.py`),
//! through which every call into a family's code goes: the argv, the
//! request on stdin, and the result read back from between two separator
//! lines (the family's own prints come before them and are kept only as
//! output). Running it is the caller's business: on this machine (`probe`)
//! or as root in a session's container (`crate::taskstd`).

use serde_json::Value;

/// The helper's source, written into every family image and, for a probe,
/// into a temporary folder.
pub const SOURCE: &str = include_str!("../../../assets/taskhelper.py");
/// Where family images hold the helper.
pub const IMAGE_PATH: &str = "/opt/rebench/taskhelper.py";

/// The helper's argv after the interpreter. The separator goes in the
/// request on stdin ([`with_separator`]), never here: a command line is
/// readable by every user of the machine, the participant included.
pub fn args(helper: &str, operation: &str, family_dir: &str, family: &str) -> Vec<String> {
    [helper, operation, family_dir, family]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// `request` with the call's separator in it.
pub fn with_separator(request: &Value, separator: &str) -> Value {
    let mut request = match request {
        Value::Object(_) => request.clone(),
        _ => Value::Object(Default::default()),
    };
    request["separator"] = separator.into();
    request
}

/// A fresh separator: the family cannot guess it ahead of the call.
pub fn separator() -> String {
    format!("--rebench-result-{:032x}--", rand::random::<u128>())
}

/// A JSON array's strings (the helper's lists: tasks, variables,
/// permissions); anything else is empty.
pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Why a call into the family gave no result.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The family's code raised: the step (importing, start, …) and its traceback.
    Raised { step: String, traceback: String },
    /// No result between separators: the helper died (killed, out of
    /// memory) or never ran; the output's tail says more.
    NoResult(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Raised { step, traceback } => {
                write!(
                    f,
                    "the family's code failed in {step}:\n{}",
                    traceback.trim_end()
                )
            }
            CallError::NoResult(why) => write!(f, "the family's helper gave no result: {why}"),
        }
    }
}

/// The result object from the helper's stdout: the last text between two
/// `separator` lines.
pub fn parse(stdout: &str, stderr: &str, separator: &str) -> Result<Value, CallError> {
    // What follows the last separator (a process the family started that
    // prints late) is not the result; it cannot hold the separator, which
    // only the helper's stdin carried.
    let mut parts = stdout.rsplit(separator);
    let _after = parts.next();
    let inside = parts.next();
    let Some(inside) = inside else {
        let tail: String = format!("{stdout}{stderr}")
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(CallError::NoResult(if tail.trim().is_empty() {
            "it printed nothing".into()
        } else {
            format!("its output ended with:\n{tail}")
        }));
    };
    let value: Value = serde_json::from_str(inside.trim())
        .map_err(|e| CallError::NoResult(format!("its result is not JSON: {e}")))?;
    if let Some(error) = value.get("error") {
        return Err(CallError::Raised {
            step: error["step"].as_str().unwrap_or("?").to_string(),
            traceback: error["traceback"].as_str().unwrap_or("").to_string(),
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_is_the_last_one_between_separators() {
        let sep = "--s--";
        let out = format!(
            "noise\n{sep}\n{{\"fake\": 1}}\n{sep}\nmore\n{sep}\n{{\"tasks\": [\"a\"]}}\n{sep}\n"
        );
        assert_eq!(parse(&out, "", sep).unwrap()["tasks"][0], "a");
        let raised = format!(
            "{sep}\n{{\"error\": {{\"step\": \"start\", \"traceback\": \"Boom\"}}}}\n{sep}\n"
        );
        let err = parse(&raised, "", sep).unwrap_err();
        assert_eq!(
            err,
            CallError::Raised {
                step: "start".into(),
                traceback: "Boom".into()
            }
        );
        assert!(err.to_string().contains("failed in start"));
        let died = parse("partial\n", "Killed\n", sep).unwrap_err();
        assert!(died.to_string().contains("Killed"), "{died}");
        assert_ne!(separator(), separator());
    }
}
