//! Running METR Task Standard families: their images, the calls into
//! their code as root in a session's container, a session's setup and its
//! scoring. Reading a family folder is `environment::family`'s job. See
//! `docs/task-standard.md`.

pub mod call;
pub mod image;
pub mod score_cmd;
pub mod setup;

/// The scorer's variables of a family task's scoring run.
pub mod vars {
    /// JSON argv prefix that runs a command as root in the session's container.
    pub const ROOT: &str = "REBENCH_TASK_ROOT";
    pub const FAMILY: &str = "REBENCH_TASK_FAMILY";
    pub const TASK: &str = "REBENCH_TASK_NAME";
    /// The helper operation: `intermediate_score`, `final`, `score`.
    pub const OPERATION: &str = "REBENCH_TASK_OPERATION";
    /// Seconds one call may take.
    pub const TIMEOUT_S: &str = "REBENCH_TASK_TIMEOUT_S";
    /// A file holding the request for the helper (score log, submission).
    pub const REQUEST: &str = "REBENCH_TASK_REQUEST";
}

/// The values of `names` from this process's environment; Err names the
/// missing ones.
pub fn required_values(names: &[String]) -> Result<Vec<(String, String)>, String> {
    let missing: Vec<&str> = names
        .iter()
        .filter(|n| std::env::var_os(n).is_none())
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the family needs these environment variables, unset here: {} (set them where the server runs)",
            missing.join(", ")
        ));
    }
    Ok(names
        .iter()
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
        .collect())
}
