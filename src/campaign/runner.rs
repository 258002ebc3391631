//! `campaign run FILE`: registers the campaign with the server (becoming
//! its runner) and works through its runs, at most `concurrency` at once.
//! Each run is a session of kind agent: created with the agent's identity
//! and limits, begun, and driven by the built-in scaffold or the agent's
//! command. Everything a resume needs is on the server: which run has
//! which session (the session says), and the conversation (its
//! `model_call` events). Running it again after a crash of either side
//! continues where it stopped; a run never gets a second session.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::task::JoinHandle;

use super::model_api::Endpoint;
use super::scaffold::{RunError, Scaffold};
use super::spec::{Api, CampaignSpec};
use crate::client::Client;
use crate::command_line::printable;
use crate::environment::discovery;
use crate::paths::DataPaths;
use crate::protocol::{CampaignView, CreateSession, Request, SessionView};
use crate::session::campaign::{RunPlan, RunState};
use crate::session::{AgentIdentity, CampaignRunRef, Kind, PauseReason, Phase};

/// How often the runner looks at its campaign.
const POLL: Duration = Duration::from_millis(500);
const CLIENT_NAME: &str = "rebench campaign";

/// What every run task needs.
struct Shared {
    spec: CampaignSpec,
    paths: DataPaths,
    /// Environment id → its folder, resolved once (the server needs a path).
    env_dirs: HashMap<String, PathBuf>,
    endpoints: HashMap<String, Endpoint>,
    /// The plan's runs by id, expanded once.
    runs: HashMap<String, RunPlan>,
}

pub async fn run(file: &Path, paths: &DataPaths, json: bool) -> anyhow::Result<i32> {
    let mut spec = CampaignSpec::load(file)?;
    let search = discovery::search_path(&paths.root);
    let mut env_dirs = HashMap::new();
    for (i, env) in spec.environments.iter_mut().enumerate() {
        let found = discovery::resolve(&env.id, &search)
            .with_context(|| format!("{}: environments[{i}].id: {}", spec.file, env.id))?;
        if found.family.is_some() {
            anyhow::bail!(
                "{}: environments[{i}].id: {} is a Task Standard task; campaigns run rebench environments",
                spec.file,
                env.id
            );
        }
        let dir = std::path::absolute(&found.dir).unwrap_or(found.dir.clone());
        // A folder names its environment by the id in its manifest.
        env.id = found.id().to_string();
        if env_dirs
            .insert(env.id.clone(), dir.clone())
            .is_some_and(|d| d != dir)
        {
            anyhow::bail!(
                "{}: environments[{i}].id: two folders hold environment {}",
                spec.file,
                env.id
            );
        }
    }
    let mut endpoints = HashMap::new();
    for agent in &spec.agents {
        if agent.api != Api::Command {
            endpoints.insert(
                agent.name.clone(),
                Endpoint::for_agent(agent, spec.outage.request_timeout)?,
            );
        }
    }
    let mut plan = spec.plan();
    plan.file = std::path::absolute(file)
        .unwrap_or(file.to_path_buf())
        .display()
        .to_string();
    let keys: Vec<String> = spec
        .agents
        .iter()
        .filter_map(|a| a.key_env.clone())
        .collect();
    let mut runner = Client::connect_admin_hiding(paths, CLIENT_NAME, &keys).await?;
    let opened: CampaignView = runner
        .call(Request::CampaignOpen {
            plan: Box::new(plan),
        })
        .await?;
    let name = spec.name.clone();
    say(
        json,
        &format!(
            "campaign {name}: {} runs ({} done, {} failed, {} to run), {} at a time",
            opened.runs.len(),
            opened.counts.done,
            opened.counts.failed,
            opened.counts.queued + opened.counts.running,
            spec.concurrency
        ),
    );
    let runs = spec.runs().into_iter().map(|r| (r.id.clone(), r)).collect();
    let shared = Arc::new(Shared {
        runs,
        spec,
        paths: paths.clone(),
        env_dirs,
        endpoints,
    });
    let mut tasks: HashMap<String, JoinHandle<()>> = HashMap::new();
    // A finished run wakes the loop at once, so the next one starts without
    // waiting for the next look.
    let finished = Arc::new(tokio::sync::Notify::new());
    let mut last_states: HashMap<String, RunState> = HashMap::new();
    loop {
        let view: CampaignView = match runner
            .call(Request::CampaignShow { name: name.clone() })
            .await
        {
            Ok(v) => v,
            Err(e) => {
                for task in tasks.values() {
                    task.abort();
                }
                return Err(anyhow::Error::from(e).context(format!(
                    "lost the server; `rebench campaign run {}` continues campaign {name}",
                    file.display()
                )));
            }
        };
        report_changes(json, &view, &mut last_states);
        tasks.retain(|_, task| !task.is_finished());
        if view.stopped_at.is_some() {
            for task in tasks.values() {
                task.abort();
            }
            say(json, &format!("campaign {name} was stopped"));
            print_final(json, &view);
            return Ok(0);
        }
        // Interrupted runs first: they hold a session (and its clock).
        for run in view.runs.iter().filter(|r| r.state == RunState::Running) {
            if !tasks.contains_key(&run.id) {
                let Some(session) = run.session.clone() else {
                    continue;
                };
                let shared = shared.clone();
                let id = run.id.clone();
                let finished = finished.clone();
                tasks.insert(
                    id.clone(),
                    tokio::spawn(async move {
                        drive(shared, id, session).await;
                        finished.notify_one();
                    }),
                );
            }
        }
        let concurrency = shared.spec.concurrency as usize;
        for run in view.runs.iter().filter(|r| r.state == RunState::Queued) {
            if tasks.len() >= concurrency {
                break;
            }
            if tasks.contains_key(&run.id) {
                continue;
            }
            let Some(plan) = plan_of(&shared, &run.id) else {
                continue;
            };
            let shared = shared.clone();
            let finished = finished.clone();
            tasks.insert(
                run.id.clone(),
                tokio::spawn(async move {
                    start(shared, plan).await;
                    finished.notify_one();
                }),
            );
        }
        if tasks.is_empty()
            && view
                .runs
                .iter()
                .all(|r| matches!(r.state, RunState::Done | RunState::Failed))
        {
            print_final(json, &view);
            return Ok(if view.counts.failed > 0 { 2 } else { 0 });
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = finished.notified() => {}
        }
    }
}

/// A connection for a run's task. Never starts a server: when the server
/// is gone the runner says so and stops (a server it started would get the
/// runner's environment, model keys included).
async fn connect(paths: &DataPaths) -> crate::client::Result<Client> {
    Client::connect(&paths.socket(), None, CLIENT_NAME).await
}

/// Whether a pause is one a runner ends when it takes a run up again.
fn ours(reason: PauseReason, view: &SessionView) -> bool {
    let by_system = view
        .pauses
        .last()
        .is_some_and(|p| p.by == crate::session::SYSTEM);
    match reason {
        PauseReason::CrashRecovery | PauseReason::ServerShutdown | PauseReason::ApiOutage => true,
        PauseReason::TechnicalIssue => by_system,
        PauseReason::Break | PauseReason::Proctor | PauseReason::Scoring => false,
    }
}

fn plan_of(shared: &Shared, id: &str) -> Option<RunPlan> {
    shared.runs.get(id).cloned()
}

fn say(json: bool, line: &str) {
    if !json {
        println!("{line}");
    }
}

fn report_changes(json: bool, view: &CampaignView, last: &mut HashMap<String, RunState>) {
    for run in &view.runs {
        if last.get(&run.id) == Some(&run.state) {
            continue;
        }
        let first_look = !last.contains_key(&run.id);
        last.insert(run.id.clone(), run.state);
        if first_look && run.state == RunState::Queued {
            continue;
        }
        if json {
            println!(
                "{}",
                serde_json::json!({"run": run.id, "state": run.state, "session": run.session})
            );
            continue;
        }
        let session = run.session.as_deref().unwrap_or("-");
        match run.state {
            RunState::Running => println!("run {}: session {session} running", run.id),
            RunState::Done => println!(
                "run {}: done ({}), final score {}",
                run.id,
                run.end_reason.map(|r| r.label()).unwrap_or_default(),
                super::status::final_text(run)
            ),
            RunState::Failed => println!(
                "run {}: failed: {}",
                run.id,
                printable(&run.failure.clone().unwrap_or_default())
            ),
            RunState::Queued => {}
        }
    }
}

fn print_final(json: bool, view: &CampaignView) {
    if json {
        println!(
            "{}",
            serde_json::to_string(view).unwrap_or_else(|_| "{}".into())
        );
    } else {
        print!("{}", super::status::table(view));
    }
}

/// A queued run: its session made (with the starting score), begun, driven.
async fn start(shared: Arc<Shared>, plan: RunPlan) {
    let result = async {
        let mut admin = connect(&shared.paths).await?;
        let agent = shared
            .spec
            .agent(&plan.agent)
            .context("the plan names an agent the file does not")?;
        let env_dir = shared
            .env_dirs
            .get(&plan.environment)
            .context("the plan names an environment the file does not")?;
        let scaffold = match &agent.command {
            Some(command) if agent.api == Api::Command => command.join(" "),
            _ => crate::session::meta::BUILTIN_SCAFFOLD.to_string(),
        };
        let view: SessionView = admin
            .call(Request::CreateSession(Box::new(CreateSession {
                budget_s: Some(plan.length_s),
                profile: plan.profile.clone(),
                agent: Some(AgentIdentity {
                    name: agent.name.clone(),
                    model: agent.model.clone().unwrap_or_default(),
                    scaffold,
                }),
                campaign: Some(CampaignRunRef {
                    campaign: shared.spec.name.clone(),
                    run: plan.id.clone(),
                }),
                limits: shared.spec.limits,
                ..CreateSession::new(
                    env_dir.display().to_string(),
                    agent.name.clone(),
                    Kind::Agent,
                )
            })))
            .await?;
        anyhow::Ok(view.id)
    }
    .await;
    match result {
        Ok(session) => drive(shared, plan.id, session).await,
        Err(e) => {
            // Left queued: the next look tries again (and a run that
            // cannot be made keeps saying why).
            eprintln!(
                "run {}: could not start: {}",
                plan.id,
                printable(&format!("{e:#}"))
            );
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }
}

/// The session's view once it holds its hardware and its starting score
/// is taken: a run whose hardware is taken waits in the server's queue
/// (docs/hardware.md), like any session.
async fn until_placed(admin: &mut Client, session: &str) -> Result<SessionView, RunError> {
    loop {
        let view: SessionView = admin
            .call(Request::Show {
                session: session.to_string(),
            })
            .await?;
        let starting_score =
            view.state == Phase::Created && view.pauses.last().is_some_and(|p| p.end.is_none());
        if view.state != Phase::Queued && !starting_score {
            return Ok(view);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A run with a session: begun or resumed as needed, then driven until it ends.
async fn drive(shared: Arc<Shared>, run: String, session: String) {
    let outcome = drive_inner(&shared, &run, &session).await;
    match outcome {
        Ok(()) => {}
        Err(RunError::Lost(e)) => {
            tracing::info!("run {run}: connection lost: {e}");
        }
        Err(RunError::Failed(why)) => {
            eprintln!("run {run}: the agent failed: {}", printable(&why));
            if let Ok(mut admin) = connect(&shared.paths).await {
                let _ = admin
                    .call::<SessionView>(Request::End {
                        session: session.clone(),
                        reason: Some("abandoned".into()),
                        note: Some(format!("the agent failed: {why}")),
                    })
                    .await;
            }
        }
    }
}

async fn drive_inner(shared: &Shared, run: &str, session: &str) -> Result<(), RunError> {
    let mut admin = connect(&shared.paths).await?;
    let view = until_placed(&mut admin, session).await?;
    match (view.state, view.pause_reason) {
        (Phase::Ended, _) => return Ok(()),
        (Phase::Created, _) => {
            admin
                .call::<SessionView>(Request::Begin {
                    session: session.to_string(),
                })
                .await?;
        }
        // Pauses the runner's absence, a crash, an outage or an orderly
        // stop caused end here; a scoring run ends by itself, and a
        // proctor's pause stays until the proctor ends it (the scaffold waits).
        (Phase::Paused, Some(reason)) if ours(reason, &view) => {
            admin
                .call::<SessionView>(Request::Resume {
                    session: session.to_string(),
                })
                .await?;
        }
        _ => {}
    }
    let plan = plan_of(shared, run).ok_or_else(|| RunError::Failed("unknown run".into()))?;
    let agent = shared
        .spec
        .agent(&plan.agent)
        .ok_or_else(|| RunError::Failed(format!("unknown agent {}", plan.agent)))?;
    match (&agent.command, shared.endpoints.get(&agent.name)) {
        (Some(command), _) if agent.api == Api::Command => {
            super::external::run(&mut admin, session, command, agent).await
        }
        (_, Some(endpoint)) => {
            let scaffold = Scaffold {
                endpoint: endpoint.clone(),
                agent: agent.clone(),
                outage: shared.spec.outage,
            };
            scaffold.run(&mut admin, session).await
        }
        _ => Err(RunError::Failed(format!(
            "agent {} has neither a command nor an endpoint",
            agent.name
        ))),
    }
}
