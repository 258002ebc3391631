//! Taking a score for a session: protected-file check, the scorer run,
//! normalization, and the score-log entry.

use crate::sandbox::SessionMarker;
use crate::sandbox::cgroup::Cgroup;
use crate::sandbox::environ;
use crate::scoring::{OUTPUT_LIMIT, ScorerInvocation, protected, run_scorer};
use crate::session::{ScoreEntry, ScorePhase, SessionMeta};

/// The scorer's variable holding the prefix that runs participant code, a
/// JSON array of strings.
pub const JAIL_VAR: &str = "REBENCH_JAIL";

/// What holds a scoring run's processes, so that all of them, participant
/// code it started included, die when it ends.
pub struct ScorerContainment {
    pub cgroup: Option<Cgroup>,
    /// Groups that hold it to the session's cores (a split hierarchy's
    /// cpuset; empty where they are set on `cgroup`).
    pub limits: Vec<std::path::PathBuf>,
    /// Carried by the scorer and inherited by what it starts (the fallback
    /// without cgroups; not the session's marker, so a pause does not stop
    /// a measurement in progress).
    pub marker: SessionMarker,
}

/// What a scoring run reaches beyond its workspace: `jail`, the prefix that
/// runs participant code (Err: it could not be made), and variables of its
/// own (a family's way into its container as root, its request).
pub struct ScorerReach {
    pub jail: Result<Vec<String>, String>,
    pub env: Vec<(String, String)>,
}

/// The cgroup name of a session's scoring runs.
pub fn scoring_group_name(session: &str) -> String {
    format!("{session}.scoring")
}

/// The marker of a session's scoring runs.
pub fn scoring_marker(host: &super::host::Host) -> SessionMarker {
    SessionMarker::new(format!("{}.scoring", host.meta.sandbox_tag))
}

/// The scorer's whole environment: the allowlisted `base` (`sandbox::environ`),
/// the variables its manifest grants by name (`pass_env`), the protocol's
/// three, the profile's, and the environment's preparation (its venv first
/// on PATH, `REBENCH_PREPARED`).
pub fn scorer_env(base: &[(String, String)], meta: &SessionMeta) -> Vec<(String, String)> {
    let mut vars = base.to_vec();
    vars.extend(environ::granted_from_here(&meta.scoring.pass_env));
    vars.extend(meta.scoring.scorer_env(&meta.env_dir, &meta.workspace));
    if let Some(prepared) = &meta.prepared {
        let path = vars
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsString::from(v));
        vars.extend(prepared.scorer_env(path.as_deref()));
    }
    vars
}

/// Runs the session's scorer on its workspace and builds the entry. Never fails:
/// every problem becomes an invalid entry that says why.
///
/// `jail` is the argv prefix that runs participant code as a session
/// process would (scrubbed environment; in the session's jail when it is
/// isolated), given to the scorer as `REBENCH_JAIL`; Err = it could not be
/// made (the jail did not start).
///
/// Err: the machine could not run the scorer (the jail did not start, no
/// descriptors or processes left, protected files unreadable for want of
/// them): the participant's workspace is not to blame and nothing should
/// be recorded as their score.
pub async fn take_score(
    base_env: &[(String, String)],
    meta: &SessionMeta,
    phase: ScorePhase,
    requested_by: &str,
    requested_active_ms: u64,
    reach: ScorerReach,
    containment: &ScorerContainment,
) -> Result<ScoreEntry, String> {
    let ScorerReach {
        jail,
        env: extra_env,
    } = reach;
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
    match protected::check(&meta.workspace, &meta.protected) {
        Ok(()) => {}
        Err(protected::Refusal::Participant(message)) => return Ok(invalid(message)),
        Err(protected::Refusal::Infrastructure(message)) => return Err(message),
    }
    let jail = jail?;
    let mut env = scorer_env(base_env, meta);
    env.push((
        JAIL_VAR.to_string(),
        serde_json::Value::from(jail).to_string(),
    ));
    env.push(containment.marker.env_pair());
    env.extend(extra_env);
    let plan = &meta.scoring;
    let invocation = ScorerInvocation {
        argv: plan.argv(&meta.env_dir, &meta.workspace),
        cwd: meta.workspace.clone(),
        env,
        env_clear: true,
        cgroups: containment
            .cgroup
            .as_ref()
            .map(Cgroup::procs_file)
            .into_iter()
            .chain(containment.limits.iter().map(|d| d.join("cgroup.procs")))
            .collect(),
        timeout: plan.timeout,
        output_limit: OUTPUT_LIMIT,
    };
    let outcome = run_scorer(&invocation).await;
    if let Some(reason) = outcome.infrastructure {
        return Err(reason);
    }
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
        let normalized = if plan.unnormalized {
            Some(raw)
        } else {
            plan.normalizer.normalize(raw)
        };
        match normalized {
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
    Ok(entry)
}

/// Normalizes a new session with the values measured on this machine when
/// there are some (`environment::calibration`); one that cannot be used is
/// logged and the manifest's values stand.
pub fn use_calibration(
    plan: &mut crate::environment::ScoringPlan,
    env: &crate::environment::Environment,
    prepared_dir: &std::path::Path,
) {
    if let Err(why) = crate::environment::calibration::use_here(plan, env, prepared_dir) {
        tracing::warn!(env = %env.id(), "calibration not used: {why}");
    }
}
