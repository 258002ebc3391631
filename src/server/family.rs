//! The server's side of Task Standard family sessions: the family's image
//! before a session is made, and what a scoring run of one gets (the way
//! into its container as root, the operation, the score log and the
//! submitted answer).

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::host::{Host, OpError, OpResult};
use crate::environment::family::TaskRef;
use crate::protocol::ErrorCode;
use crate::session::ScorePhase;
use crate::session::meta::FamilySession;
use crate::taskstd::image::{self, FamilyImage};
use crate::taskstd::{call::FAMILY_DIR, vars};

/// The family's image on the engine sessions run on, built when missing
/// (its install() can take long: `rebench env prepare` does it ahead).
pub async fn family_image(task: &TaskRef) -> OpResult<FamilyImage> {
    let name = task.family.clone();
    image::ensure_for_task(task, &|line| tracing::info!(family = %name, "{line}"))
        .await
        .map_err(|e| OpError::new(ErrorCode::Refused, format!("{e:#}")))
}

/// The scoring run's variables for a family session; the request (score
/// log, answer) goes into a file in `dir`. Err: the container cannot be
/// reached (nothing is recorded).
pub async fn family_scorer_env(
    host: &Arc<Host>,
    family: &FamilySession,
    phase: ScorePhase,
    dir: &Path,
) -> Result<Vec<(String, String)>, String> {
    let sandbox_host = host.clone();
    let root = tokio::task::spawn_blocking(move || {
        sandbox_host.sandbox().admin_launcher(Path::new(FAMILY_DIR))
    })
    .await
    .map_err(|e| e.to_string())??;
    let operation = match phase {
        ScorePhase::Final => family.final_op.as_str(),
        _ => "intermediate_score",
    };
    let log: Vec<serde_json::Value> = {
        let live = host.live.lock().await;
        live.state
            .scores
            .iter()
            .map(|s| {
                json!({
                    "score": s.entry.raw.filter(|_| s.entry.valid),
                    "message": s.entry.scorer_message,
                    "details": s.entry.details,
                    "scoredAt": s.at.to_rfc3339(),
                    "elapsedTime": s.entry.requested_active_ms,
                    "elapsed_seconds": s.entry.requested_active_ms as f64 / 1000.0,
                })
            })
            .collect()
    };
    let submission = host
        .submission
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let request = json!({
        "required_env": family.required_env,
        "submission": submission,
        "score_log": log,
        "now": chrono::Utc::now().to_rfc3339(),
        "elapsed_ms": host.active_ms(),
    });
    let file = dir.join("request.json");
    std::fs::write(&file, request.to_string())
        .map_err(|e| format!("writing {}: {e}", file.display()))?;
    Ok(vec![
        (vars::ROOT.into(), serde_json::Value::from(root).to_string()),
        (vars::FAMILY.into(), family.task.family.clone()),
        (vars::TASK.into(), family.task.task.clone()),
        (vars::OPERATION.into(), operation.into()),
        (
            vars::TIMEOUT_S.into(),
            host.meta.scoring.timeout.as_secs().to_string(),
        ),
        (vars::REQUEST.into(), file.display().to_string()),
    ])
}
