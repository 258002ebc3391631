//! Taking a score for a session: protected-file check, the scorer run,
//! normalization, and the score-log entry.

use crate::scoring::{OUTPUT_LIMIT, ScorerInvocation, protected, run_scorer};
use crate::session::{ScoreEntry, ScorePhase, SessionMeta};

/// Variables of the session sandbox that the scorer must not inherit.
const SANDBOX_VARS: [&str; 4] = [
    "REBENCH_TOKEN",
    "REBENCH_SANDBOX",
    "REBENCH_SOCKET",
    "REBENCH_SESSION",
];

/// The scorer's variables: the protocol's three, the profile's, and the
/// environment's preparation (its venv first on PATH, `REBENCH_PREPARED`).
/// The scorer's variable holding the jail prefix, a JSON array of strings.
pub const JAIL_VAR: &str = "REBENCH_JAIL";

pub fn scorer_env(meta: &SessionMeta) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = meta
        .scoring
        .scorer_env(&meta.env_dir, &meta.workspace)
        .into_iter()
        .collect();
    if let Some(prepared) = &meta.prepared {
        let path = std::env::var_os("PATH");
        vars.extend(prepared.scorer_env(path.as_deref()));
    }
    vars
}

/// Runs the session's scorer on its workspace and builds the entry. Never fails:
/// every problem becomes an invalid entry that says why.
///
/// `jail` is the argv prefix that runs a command inside the session's jail
/// (isolated sessions; empty otherwise), given to the scorer as
/// `REBENCH_JAIL` so that it can run participant code there; Err = the jail
/// could not start, and the run is invalid.
pub async fn take_score(
    meta: &SessionMeta,
    phase: ScorePhase,
    requested_by: &str,
    requested_active_ms: u64,
    jail: Result<Vec<String>, String>,
) -> ScoreEntry {
    let invalid = |message: String| ScoreEntry {
        phase,
        requested_by: requested_by.to_string(),
        requested_active_ms,
        valid: false,
        raw: None,
        normalized: None,
        message,
        scorer_message: serde_json::Value::Null,
        details: serde_json::Value::Null,
        output: String::new(),
        exit_code: None,
        duration_ms: 0,
    };
    if let Err(message) = protected::check_files(&meta.workspace, &meta.protected) {
        return invalid(message);
    }
    let jail = match jail {
        Ok(prefix) => prefix,
        Err(message) => return invalid(message),
    };
    let mut env = scorer_env(meta);
    if !jail.is_empty() {
        env.push((
            JAIL_VAR.to_string(),
            serde_json::Value::from(jail).to_string(),
        ));
    }
    let plan = &meta.scoring;
    let invocation = ScorerInvocation {
        argv: plan.argv(&meta.env_dir, &meta.workspace),
        cwd: meta.workspace.clone(),
        env,
        env_remove: SANDBOX_VARS.iter().map(|v| v.to_string()).collect(),
        timeout: plan.timeout,
        output_limit: OUTPUT_LIMIT,
    };
    let outcome = run_scorer(&invocation).await;
    let mut entry = ScoreEntry {
        phase,
        requested_by: requested_by.to_string(),
        requested_active_ms,
        valid: outcome.valid,
        raw: outcome.raw,
        normalized: None,
        message: outcome.message,
        scorer_message: outcome.scorer_message,
        details: outcome.details,
        output: outcome.output,
        exit_code: outcome.exit_code,
        duration_ms: outcome.duration_ms,
    };
    if let Some(raw) = entry.raw.filter(|_| entry.valid) {
        match plan.normalizer.normalize(raw) {
            Some(n) => entry.normalized = Some(n),
            None => {
                entry.valid = false;
                entry.raw = None;
                entry.message = format!(
                    "raw value {raw} is outside the domain of the {} transform",
                    plan.normalizer.transform
                );
            }
        }
    }
    entry
}
