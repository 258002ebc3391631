//! One call into a family's code: the helper run as root in the family's
//! directory (`/root`) in a container, through an argv prefix (the
//! session's `sandbox-enter` as root, or `docker exec` during a build),
//! with a time limit kept inside the container, so nothing it started
//! outlives it there.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::environment::family::helper::{self, CallError};

/// Where family images hold the family's own files.
pub const FAMILY_DIR: &str = "/root";

/// What a call gave.
#[derive(Debug)]
pub struct Called {
    pub result: Result<Value, CallError>,
    /// stdout and stderr, bounded, for the record.
    pub output: String,
}

const OUTPUT_KEPT: usize = 16 * 1024;

/// Runs `operation` of `family` through `prefix`, `request` on stdin.
pub fn call(
    prefix: &[String],
    operation: &str,
    family: &str,
    request: &Value,
    limit: Duration,
) -> Result<Called, String> {
    let separator = helper::separator();
    let (program, rest) = prefix
        .split_first()
        .ok_or_else(|| "no way to run commands in the container".to_string())?;
    let mut args: Vec<String> = rest.to_vec();
    // The limit holds in the container: the helper and its children are
    // killed there, whatever becomes of this side.
    args.extend([
        "timeout".to_string(),
        "--kill-after=5".to_string(),
        format!("{}", limit.as_secs().max(1)),
        "python3".to_string(),
    ]);
    args.extend(helper::args(
        helper::IMAGE_PATH,
        operation,
        FAMILY_DIR,
        family,
    ));
    let mut child = Command::new(program)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {program}: {e}"))?;
    let body = helper::with_separator(request, &separator).to_string();
    if let Some(mut stdin) = child.stdin.take() {
        // On a thread: a helper that dies early must not block us on a full pipe.
        std::thread::spawn(move || {
            let _ = stdin.write_all(body.as_bytes());
        });
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for the family's helper: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut result = helper::parse(&stdout, &stderr, &separator);
    if out.status.code() == Some(124) || out.status.code() == Some(137) {
        result = Err(CallError::NoResult(format!(
            "{operation} ran past its limit of {}s and was killed",
            limit.as_secs()
        )));
    }
    let body = stdout
        .rsplit_once(&separator)
        .and_then(|(before, _)| before.rsplit_once(&separator))
        .map_or(stdout.as_ref(), |(before, _)| before);
    Ok(Called {
        result,
        output: bounded(&format!("{body}{stderr}")),
    })
}

fn bounded(text: &str) -> String {
    if text.len() <= OUTPUT_KEPT {
        return text.to_string();
    }
    let mut cut = text.len() - OUTPUT_KEPT;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    format!("[... {cut} bytes cut ...]\n{}", &text[cut..])
}
