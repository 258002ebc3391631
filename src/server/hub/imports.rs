//! Runs made elsewhere, stored as ended, read-only agent sessions
//! (`import_run`, from `rebench import inspect`). The server normalizes
//! their raw scores with the environment's plan, as it does its own, and
//! keeps each run's source key so that none is imported twice.

use std::path::PathBuf;
use std::sync::Arc;

use crate::environment::normalize::{Aggregate, Normalizer, Transform};
use crate::environment::{Environment, ScoringPlan};
use crate::protocol::{ErrorCode, ImportRun, ImportedEvent, SessionView};
use crate::session::ids::new_secret;
use crate::session::{Event, EventKind, ImportedFrom, Kind, ScorePhase, SessionMeta, SessionState};

use super::{Actor, Hub, MAX_MODEL_CALL_BYTES, check_agent, check_participant};
use crate::server::host::{OpError, OpResult};

/// Most events one imported run may carry.
const MAX_IMPORTED_EVENTS: usize = 500_000;

/// Holds a source key while its run is being imported: a second import
/// of it meanwhile is refused (the store's claim alone cannot tell a claim
/// in progress from one a crash left).
struct Importing<'a> {
    hub: &'a Hub,
    key: String,
}

impl Drop for Importing<'_> {
    fn drop(&mut self) {
        self.hub
            .imports_in_progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

impl Hub {
    fn importing(&self, key: &str) -> OpResult<Importing<'_>> {
        let mut held = self
            .imports_in_progress
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !held.insert(key.to_string()) {
            return Err(OpError::new(
                ErrorCode::Refused,
                "imported already (an import of this run is in progress)",
            ));
        }
        Ok(Importing {
            hub: self,
            key: key.to_string(),
        })
    }

    /// Where a session came from, when it was imported (such a session is read-only).
    pub fn imported_from(&self, session: &str) -> Option<ImportedFrom> {
        self.host(session).ok()?.meta.imported.clone()
    }

    pub async fn import_run(self: &Arc<Self>, req: ImportRun, by: &Actor) -> OpResult<SessionView> {
        check_agent(&req.agent)?;
        let participant = check_participant(&req.participant)?;
        check_source(&req.source)?;
        let (env, plan) = import_plan(&req)?;
        check_events(&req, &req.events)?;
        let key = req.source.key();
        let _importing = self.importing(&key)?;
        let id = self.fresh_id()?;
        if let Some(earlier) = self
            .store
            .reserve_import(&key, &id, |earlier| self.host(earlier).is_ok())
            .map_err(OpError::internal)?
        {
            return Err(OpError::new(
                ErrorCode::Refused,
                format!("imported already, as session {earlier}"),
            ));
        }
        let meta = SessionMeta {
            id: id.clone(),
            env_id: req.environment.clone(),
            env_title: env
                .as_ref()
                .map_or_else(|| req.source.task.clone(), |e| e.manifest.title.clone()),
            env_summary: env
                .as_ref()
                .map(|e| e.manifest.summary.clone())
                .unwrap_or_default(),
            env_dir: env.as_ref().map(|e| e.dir.clone()).unwrap_or_default(),
            manifest_hash: env
                .as_ref()
                .map(|e| e.manifest_hash.clone())
                .unwrap_or_default(),
            profile: plan.profile.clone(),
            participant,
            kind: Kind::Agent,
            budget_ms: req.budget_ms,
            workspace: PathBuf::new(),
            created_at: req.created_at,
            allow_missing_hardware: false,
            hardware_missing: Vec::new(),
            protected: Default::default(),
            token: new_secret(),
            sandbox_tag: new_secret(),
            record_input: false,
            prepared: None,
            sandbox: None,
            sandbox_warning: None,
            container: Default::default(),
            grant: None,
            task_family: None,
            agent: Some(req.agent.clone()),
            campaign: None,
            limits: Default::default(),
            imported: Some(ImportedFrom {
                normalization_given: req.normalizer.is_some(),
                ..req.source.clone()
            }),
            instructions: Some(req.instructions.clone()),
            scoring: plan,
        };
        let mut events = vec![Event {
            seq: 0,
            at: req.created_at,
            active_ms: 0,
            origin: by.origin.clone(),
            kind: EventKind::Created {
                by: by.name.clone(),
            },
        }];
        for (seq, imported) in (1..).zip(req.events) {
            events.push(Event {
                seq,
                at: imported.at,
                active_ms: imported.active_ms,
                origin: None,
                kind: normalized(imported.kind, &meta.scoring),
            });
        }
        if let Err(e) = self.store.import_session(&meta, &events).await {
            let _ = self.store.forget_import(&key, &id);
            return Err(OpError::internal(e));
        }
        let state = SessionState::from_events(meta.budget_ms, &events);
        let host = self.install(meta, state);
        for event in events {
            let _ = self.events.send((id.clone(), event));
        }
        Ok(host.view(by.audience, true).await)
    }
}

/// The environment (when rebench knows it) and the plan its scores are normalized by.
fn import_plan(req: &ImportRun) -> OpResult<(Option<Environment>, ScoringPlan)> {
    let bad = |m: String| OpError::new(ErrorCode::BadRequest, m);
    let Some(dir) = &req.env_dir else {
        let values = req.normalizer.ok_or_else(|| {
            bad(format!(
                "environment {} is not known here: give its starting and reference scores",
                req.environment
            ))
        })?;
        let normalizer = Normalizer {
            transform: Transform::Identity,
            starting: values.starting,
            reference: values.reference,
        };
        check_normalizer(&normalizer)?;
        return Ok((None, foreign_plan(req.profile.clone(), normalizer)));
    };
    let env = Environment::load(std::path::Path::new(dir)).map_err(|e| {
        OpError::new(
            ErrorCode::Refused,
            format!("environment {dir} is not usable:\n{e}"),
        )
    })?;
    if env.id() != req.environment {
        return Err(bad(format!(
            "the folder {dir} holds environment {}, not {}",
            env.id(),
            req.environment
        )));
    }
    let mut plan = env
        .scoring(req.profile.as_deref())
        .map_err(|e| OpError::new(ErrorCode::Refused, e.to_string()))?;
    if let Some(values) = req.normalizer {
        plan.normalizer.starting = values.starting;
        plan.normalizer.reference = values.reference;
        plan.unnormalized = false;
        check_normalizer(&plan.normalizer)?;
    }
    Ok((Some(env), plan))
}

fn check_normalizer(normalizer: &Normalizer) -> OpResult<()> {
    if normalizer.position(normalizer.reference) != Some(1.0) {
        return Err(OpError::new(
            ErrorCode::BadRequest,
            format!(
                "starting {} and reference {} cannot normalize scores (they must be finite, different and in the transform's domain)",
                normalizer.starting, normalizer.reference
            ),
        ));
    }
    Ok(())
}

/// The plan of an environment rebench does not have: raw scores normalized
/// by the given starting and reference, the last valid score counting (the
/// log's final score is its last).
fn foreign_plan(profile: Option<String>, normalizer: Normalizer) -> ScoringPlan {
    ScoringPlan {
        profile,
        command: Vec::new(),
        timeout: std::time::Duration::ZERO,
        metric_name: "score".into(),
        metric_unit: String::new(),
        normalizer,
        aggregate: Aggregate::Last,
        visible: true,
        protected: Vec::new(),
        env: Default::default(),
        pass_env: Vec::new(),
        starting_setup: None,
        intermediate: true,
        exclusive: false,
        score_at_start: false,
        score_at_budget_end: false,
        unnormalized: false,
        calibration: None,
    }
}

/// A score entry normalized by `plan` (the client sends raw values only);
/// other events as they are.
fn normalized(kind: EventKind, plan: &ScoringPlan) -> EventKind {
    let EventKind::Scored { mut entry } = kind else {
        return kind;
    };
    entry.normalized = None;
    if entry.valid {
        let value = entry.raw.and_then(|raw| {
            if plan.unnormalized {
                raw.is_finite().then_some(raw)
            } else {
                plan.normalizer.normalize(raw)
            }
        });
        match value {
            Some(value) => entry.normalized = Some(value),
            None => {
                entry.valid = false;
                let raw = entry.raw.map_or_else(|| "none".into(), |r| r.to_string());
                entry.message = format!(
                    "{} (the raw score {raw} cannot be normalized)",
                    entry.message
                );
            }
        }
    }
    EventKind::Scored { entry }
}

fn check_source(source: &ImportedFrom) -> OpResult<()> {
    let printable = |s: &str| !s.is_empty() && s.len() <= 4096 && !s.chars().any(char::is_control);
    if ![
        &source.format,
        &source.file,
        &source.log,
        &source.sample,
        &source.task,
    ]
    .into_iter()
    .all(|s| printable(s))
    {
        return Err(OpError::new(
            ErrorCode::BadRequest,
            "source: format, file, log, task and sample must be printable and not empty",
        ));
    }
    Ok(())
}

/// The events of a whole run: `started` first, `ended` last, time never
/// going back, and only what a run does (no `created`, no second start).
fn check_events(req: &ImportRun, events: &[ImportedEvent]) -> OpResult<()> {
    let bad = |i: usize, m: String| {
        Err(OpError::new(
            ErrorCode::BadRequest,
            format!("events[{i}]: {m}"),
        ))
    };
    if events.len() < 2 || events.len() > MAX_IMPORTED_EVENTS {
        return Err(OpError::new(
            ErrorCode::BadRequest,
            format!("a run has 2 to {MAX_IMPORTED_EVENTS} events (started … ended)"),
        ));
    }
    if req.budget_ms == 0
        || req.budget_ms > crate::environment::duration::MAX_DURATION.as_millis() as u64
    {
        return Err(OpError::new(
            ErrorCode::BadRequest,
            "budget_ms must be more than 0 and at most the longest budget",
        ));
    }
    let last = events.len() - 1;
    let (mut at, mut active) = (req.created_at, 0);
    for (i, event) in events.iter().enumerate() {
        if event.at < at || event.active_ms < active {
            return bad(i, "time goes back".into());
        }
        (at, active) = (event.at, event.active_ms);
        let allowed = match &event.kind {
            EventKind::Started { .. } => i == 0,
            EventKind::Ended { .. } => i == last,
            EventKind::Scored { entry } => entry.phase != ScorePhase::Starting,
            EventKind::ModelCall(call) => {
                let size = serde_json::to_vec(call).map_or(usize::MAX, |b| b.len());
                if size > MAX_MODEL_CALL_BYTES {
                    return bad(
                        i,
                        format!("a model call record is limited to {MAX_MODEL_CALL_BYTES} bytes"),
                    );
                }
                call.cost_usd.is_finite() && call.cost_usd >= 0.0
            }
            EventKind::Usage { cost_usd, .. } => cost_usd.is_finite() && *cost_usd >= 0.0,
            EventKind::Paused { .. }
            | EventKind::Resumed { .. }
            | EventKind::Note { .. }
            | EventKind::Exec(_) => true,
            _ => false,
        };
        if !allowed {
            return bad(
                i,
                format!(
                    "{} is not allowed here in an imported run",
                    event.kind.name()
                ),
            );
        }
    }
    if !matches!(events[0].kind, EventKind::Started { .. })
        || !matches!(events[last].kind, EventKind::Ended { .. })
    {
        return Err(OpError::new(
            ErrorCode::BadRequest,
            "an imported run starts with started and ends with ended",
        ));
    }
    Ok(())
}
