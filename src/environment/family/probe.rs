//! Asking a family's own code on this machine, with the helper and the
//! machine's `python3`: its task names, for listing a family whose
//! manifest.yaml lists none. Sessions never use this; they ask in the
//! family's image.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::helper;

/// How long listing a family's tasks may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// `get_tasks()`'s names, sorted; Err says why (with the family's traceback).
pub fn task_names(dir: &Path, family: &str) -> Result<Vec<String>, String> {
    let value = describe(dir, family, None)?;
    Ok(helper::strings(&value["tasks"]))
}

/// The helper's `describe` of the family (and of `task`), run here.
pub fn describe(dir: &Path, family: &str, task: Option<&str>) -> Result<serde_json::Value, String> {
    let scratch = tempfile::tempdir().map_err(|e| format!("a scratch folder: {e}"))?;
    let script = scratch.path().join("taskhelper.py");
    std::fs::write(&script, helper::SOURCE).map_err(|e| format!("writing the helper: {e}"))?;
    let separator = helper::separator();
    let mut child = Command::new("python3")
        .args(helper::args(
            &script.to_string_lossy(),
            "describe",
            &dir.to_string_lossy(),
            family,
        ))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running python3 to ask the family for its tasks: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let request = helper::with_separator(&serde_json::json!({ "task": task }), &separator);
        let _ = stdin.write_all(request.to_string().as_bytes());
    }
    // Read while it runs (a chatty family would fill the pipe), with a limit.
    let pid = child.id() as i32;
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let out = match wait.recv_timeout(PROBE_TIMEOUT) {
        Ok(out) => out.map_err(|e| e.to_string())?,
        Err(_) => {
            // SAFETY: kill with the pid of our own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            return Err(format!(
                "the family's get_tasks() did not answer within {}s",
                PROBE_TIMEOUT.as_secs()
            ));
        }
    };
    helper::parse(
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
        &separator,
    )
    .map_err(|e| {
        format!("{e}\n(list the tasks in manifest.yaml when the family cannot be imported outside its image)")
    })
}
