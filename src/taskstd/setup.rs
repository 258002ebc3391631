//! A family task's session before its clock can start: in its container,
//! the family is asked about the task (instructions, permissions, which
//! scoring it has), `/home/agent` (the session's workspace) gets what the
//! image held there, `start(t)` runs as root, then `/home/agent` is handed
//! to `agent` (but files of group `protected`, and hidden top-level folders
//! other than `.ssh`) and the instructions are written to
//! `/home/agent/instructions.txt`.

use std::time::Duration;

use serde_json::Value;

use super::call::call;
use super::image::{AGENT_HOME_SKELETON, FamilyImage, run_shell};
use super::required_values;
use crate::environment::family::TaskRef;
use crate::environment::family::helper::strings;
use crate::session::meta::FamilySession;

/// How long `start(t)` may take.
const START_LIMIT: Duration = Duration::from_secs(3600);

/// Sets the session up through `root` (an argv prefix that runs a command
/// as root in its container); the session's record of its family. Err says
/// which step failed, with the family's traceback.
pub fn setup(
    root: &[String],
    task: &TaskRef,
    image: &FamilyImage,
) -> Result<FamilySession, String> {
    let fail =
        |step: &str, e: String| format!("task {}/{}: {step} failed: {e}", task.family, task.task);
    if let Some(refusal) = image.refusal(&task.task) {
        return Err(fail("checking the task", refusal));
    }
    let info = &image.info;
    let required: Vec<String> = strings(&info["required_environment_variables"]);
    let env = required_values(&required).map_err(|e| fail("reading required variables", e))?;
    let has = |what: &str| info[what].as_bool() == Some(true);
    let final_op = if has("has_intermediate_score") && has("has_aggregate_scores") {
        "final"
    } else if has("has_score") {
        "score"
    } else if has("has_intermediate_score") {
        "intermediate_score"
    } else {
        return Err(fail(
            "checking the family",
            "it has neither score(t, submission) nor intermediate_score(t)".into(),
        ));
    };
    run_shell(
        root,
        &format!("cp -a {AGENT_HOME_SKELETON}/. /home/agent/ 2>/dev/null || true"),
    )
    .map_err(|e| fail("filling /home/agent", format!("{e:#}")))?;
    // start(t), then the instructions (with the manifest's word on
    // scoring) written to /home/agent/instructions.txt by the helper.
    let extra = serde_json::json!({"scoring_instructions": task.scoring_instructions});
    let started =
        ask(root, task, "start", &env, &extra, START_LIMIT).map_err(|e| fail("start", e))?;
    let instructions = started["instructions"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // What start made is the agent's, but for the protected files and
    // hidden top-level folders (other than .ssh).
    let hand_over = "cd /home/agent && find . -mindepth 1 \\( -path './.*' -type d ! -name .ssh -prune \\) \
        -o \\( ! -group protected -exec chown -h agent:agent {} + \\) && chown agent:agent /home/agent";
    run_shell(root, hand_over)
        .map_err(|e| fail("handing /home/agent to agent", format!("{e:#}")))?;
    Ok(FamilySession {
        task: task.clone(),
        image: image.tag.clone(),
        instructions,
        permissions: image.permissions(&task.task),
        required_env: required,
        final_op: final_op.to_string(),
        teardown: has("has_teardown"),
    })
}

/// `teardown(t)`, when the session ends; Err says why it failed.
pub fn teardown(root: &[String], session: &FamilySession) -> Result<(), String> {
    let env = required_values(&session.required_env)?;
    ask(
        root,
        &session.task,
        "teardown",
        &env,
        &serde_json::json!({}),
        START_LIMIT,
    )
    .map(|_| ())
}

fn ask(
    root: &[String],
    task: &TaskRef,
    operation: &str,
    env: &[(String, String)],
    extra: &Value,
    limit: Duration,
) -> Result<Value, String> {
    let mut request = extra.clone();
    request["task"] = task.task.clone().into();
    request["env"] = serde_json::json!(
        env.iter()
            .cloned()
            .collect::<std::collections::HashMap<_, _>>()
    );
    let called = call(root, operation, &task.family, &request, limit)?;
    called.result.map_err(|e| {
        let output = called.output.trim_end();
        if output.is_empty() {
            e.to_string()
        } else {
            format!("{e}\noutput:\n{output}")
        }
    })
}
