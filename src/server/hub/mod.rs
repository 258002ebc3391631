//! The hub: every hosted session, and the operations on them.

mod budget;
mod campaigns;
mod imports;
mod placement;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::broadcast;

use crate::environment::{Environment, files, hardware, prepare};
use crate::hardware::{Decision, DeviceGrant};
use crate::paths::DataPaths;
use crate::protocol::{Audience, CreateSession, ErrorCode, ExecReply, ScoreView, SessionView};
use crate::sandbox::SessionMarker;
use crate::sandbox::backend::{Backend, Factory, Groups, Sandbox, Spec, Unavailable};
use crate::sandbox::cgroup::CgroupRoot;
use crate::sandbox::enter::ENTER_PROGRAM;
use crate::sandbox::exec::{ExecResult, ExecSpec, exec, exec_via};
use crate::sandbox::jail::{DefaultBackend, Isolation, Layout};
use crate::sandbox::procs;
use crate::sandbox::spawner::{SERVE_FLAG, SpawnError, Spawner};
use crate::scoring::protected;
use crate::session::event::ExecRecord;
use crate::session::ids::{is_valid_session_id, new_secret, new_session_id};
use crate::session::{
    EndReason, Event, EventKind, MonotonicClock, PauseReason, Phase, ScorePhase, SessionMeta,
    SessionState,
};
use crate::store::Store;

use crate::server::family::{family_image, family_scorer_env};
use crate::server::host::{Host, OpError, OpResult, SandboxSlot};
use crate::server::scoring::{
    ScorerContainment, ScorerReach, scoring_group_name, scoring_marker, take_score, use_calibration,
};
use crate::server::shells::ShellEnded;

/// Who asks: shown as `by` in the event log.
#[derive(Debug, Clone, PartialEq)]
pub struct Actor {
    pub name: String,
    pub audience: Audience,
    /// The process behind an admin connection (events it causes carry it).
    pub origin: Option<crate::session::Origin>,
    /// The connection asking (0: the server itself).
    pub connection: u64,
}

pub use crate::session::SYSTEM;
/// Default and largest timeout of an agent's exec.
const EXEC_DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
const EXEC_MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
const EXEC_OUTPUT_LIMIT: usize = 1024 * 1024;
/// Exec output kept in the event log (the reply carries up to EXEC_OUTPUT_LIMIT).
const EXEC_LOG_LIMIT: usize = 64 * 1024;
/// How long in-shell `rebench task` clients keep running after a pause, to
/// get their reply; then they are frozen too.
const TASK_CLIENT_GRACE: Duration = Duration::from_secs(2);
/// Tries at a starting or final score the machine could not run.
const SCORER_ATTEMPTS: u32 = 3;
/// The largest model call record (its new messages and the answer).
const MAX_MODEL_CALL_BYTES: usize = 1024 * 1024;
/// The longest answer a submission may carry.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;
const SCORER_RETRY_DELAY: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct ScoringStarted {
    pub session: String,
    pub phase: ScorePhase,
    pub by: String,
}

/// What session shells start with.
pub struct ShellRc {
    /// The session's own rc (`assets/session.bashrc`, written at start).
    pub file: PathBuf,
    /// Whether the operator's config asks for their `~/.bashrc` too.
    pub operator_bashrc: bool,
}

pub struct Hub {
    pub store: Store,
    pub clock: Arc<dyn MonotonicClock>,
    pub paths: DataPaths,
    hosts: Mutex<HashMap<String, Arc<Host>>>,
    pub events: broadcast::Sender<(String, Event)>,
    /// Scoring runs starting (not logged: the entry is logged when it ends).
    pub scoring_started: broadcast::Sender<ScoringStarted>,
    /// The session shell rc file.
    pub rc_file: PathBuf,
    /// Session shells also load the operator's `~/.bashrc` (the operator's
    /// config asks; an environment can ask for its own sessions).
    pub operator_bashrc: bool,
    /// The running `rebench` binary (`sandbox-enter` for jailed sessions).
    exe: Option<PathBuf>,
    /// Its folder (put on the shells' PATH).
    pub bin_dir: Option<PathBuf>,
    /// Where sessions that do not ask for a backend run (`--sandbox`).
    pub default_backend: DefaultBackend,
    /// `REBENCH_KEEP_CONTAINERS=1`: an ended container session's container
    /// is stopped, not removed (for an operator to inspect).
    pub keep_containers: bool,
    /// The server's allowlisted variables (`sandbox::environ`), read once:
    /// the base of every session process's and scorer's environment.
    pub base_env: Vec<(String, String)>,
    /// Where sessions' cgroups are made; None where the machine allows none.
    pub cgroups: Option<CgroupRoot>,
    /// Where the cgroups that hold sessions to their grants are made (read
    /// once, with `cgroups`); None where the machine has no controllers.
    limit_root: Option<crate::sandbox::limits::LimitRoot>,
    /// Each campaign's runner: the connection that opened it (`campaigns`).
    pub campaign_runners: Mutex<HashMap<String, campaigns::Runner>>,
    /// Campaign runs whose session is being made right now.
    pub campaign_runs_starting: Mutex<std::collections::HashSet<crate::session::CampaignRunRef>>,
    /// Source keys of runs being imported right now (`imports`).
    pub imports_in_progress: Mutex<std::collections::HashSet<String>>,
    pub shutdown: tokio::sync::Notify,
    /// One placement at a time (`placement`): no device is granted twice.
    placing: tokio::sync::Mutex<()>,
    /// Wakes the queue's watcher: hardware may have been freed.
    pub queue_wake: tokio::sync::Notify,
    /// What the operator keeps for the system (`[machine]` in config.toml).
    pub reserve: crate::hardware::Reserve,
    /// Set once the server begins an orderly stop; every connection then
    /// pushes `server_shutdown` to its client.
    pub closing: tokio::sync::watch::Sender<bool>,
}

impl Hub {
    pub fn new(
        store: Store,
        clock: Arc<dyn MonotonicClock>,
        paths: DataPaths,
        shell_rc: ShellRc,
        default_backend: DefaultBackend,
    ) -> Arc<Hub> {
        let (events, _) = broadcast::channel(4096);
        let (scoring_started, _) = broadcast::channel(256);
        let exe = std::env::current_exe().ok();
        let bin_dir = exe
            .as_ref()
            .and_then(|p| p.parent().map(|d| d.to_path_buf()));
        let cgroups = {
            let namespace = crate::sandbox::cgroup::namespace_for(&paths.root);
            let found = CgroupRoot::detect(&namespace);
            match &found {
                Some(root) => tracing::info!(?root, "sessions are contained by cgroups"),
                None => tracing::warn!(
                    "no usable cgroup hierarchy: sessions are contained by their jail's pid namespace or their marker"
                ),
            }
            found
        };
        let limit_root = cgroups.as_ref().and_then(|c| {
            crate::sandbox::limits::LimitRoot::detect(
                &crate::sandbox::cgroup::namespace_for(&paths.root),
                c.unified_hierarchy(),
            )
        });
        Arc::new(Hub {
            store,
            clock,
            paths,
            hosts: Mutex::new(HashMap::new()),
            events,
            scoring_started,
            rc_file: shell_rc.file,
            operator_bashrc: shell_rc.operator_bashrc,
            exe,
            bin_dir,
            cgroups,
            limit_root,
            base_env: crate::sandbox::environ::passed_from_here(),
            default_backend,
            keep_containers: std::env::var("REBENCH_KEEP_CONTAINERS").is_ok_and(|v| v == "1"),
            campaign_runners: Mutex::new(HashMap::new()),
            campaign_runs_starting: Mutex::new(std::collections::HashSet::new()),
            imports_in_progress: Mutex::new(std::collections::HashSet::new()),
            shutdown: tokio::sync::Notify::new(),
            placing: tokio::sync::Mutex::new(()),
            queue_wake: tokio::sync::Notify::new(),
            reserve: machine_reserve(),
            closing: tokio::sync::watch::Sender::new(false),
        })
    }

    pub fn subscribe_closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closing.subscribe()
    }

    fn hosts(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Host>>> {
        self.hosts.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn host(&self, id: &str) -> OpResult<Arc<Host>> {
        if !is_valid_session_id(id) {
            return Err(OpError::new(
                ErrorCode::BadRequest,
                format!("{id:?} is not a session id"),
            ));
        }
        self.hosts()
            .get(id)
            .cloned()
            .ok_or_else(|| OpError::new(ErrorCode::NotFound, format!("no session {id}")))
    }

    /// Every session, in no particular order: for periodic work that
    /// visits each (sorting 200 sessions every heartbeat was a third of an
    /// idle server's time).
    pub fn hosts_unordered(&self) -> Vec<Arc<Host>> {
        self.hosts().values().cloned().collect()
    }

    /// Every session, oldest first.
    pub fn all_hosts(&self) -> Vec<Arc<Host>> {
        let mut hosts = self.hosts_unordered();
        hosts.sort_by(|a, b| {
            a.meta
                .created_at
                .cmp(&b.meta.created_at)
                .then(a.meta.id.cmp(&b.meta.id))
        });
        hosts
    }

    /// The session whose token this is.
    pub fn session_for_token(&self, token: &str) -> Option<String> {
        self.hosts()
            .values()
            .find(|h| constant_time_eq(h.meta.token.as_bytes(), token.as_bytes()))
            .map(|h| h.meta.id.clone())
    }

    /// Hosts a session loaded from (or just written to) the store. Its
    /// sandbox opens with its grant; a session still queued gets a
    /// stand-in that starts nothing until the queue grants it.
    pub fn install(self: &Arc<Self>, meta: SessionMeta, state: SessionState) -> Arc<Host> {
        let grant = granted(&meta, &state);
        let sandbox = if state.phase() == Phase::Queued {
            SandboxSlot::Waiting(Box::new(Unavailable::new(
                backend_name(
                    meta.sandbox
                        .as_deref()
                        .unwrap_or(self.default_backend.backend.backend_name()),
                ),
                "it waits for its hardware",
                Groups::bare(&meta.sandbox_tag),
            )))
        } else {
            SandboxSlot::Open(self.open_sandbox(&meta, &state, grant.as_ref()), grant)
        };
        let (host, exits) = Host::new(
            meta,
            state,
            self.store.clone(),
            self.clock.clone(),
            self.events.clone(),
            sandbox,
        );
        self.hosts().insert(host.meta.id.clone(), host.clone());
        tokio::spawn(budget::run_timer(self.clone(), host.clone()));
        tokio::spawn(watch_shell_exits(host.clone(), exits));
        host
    }

    /// The session's sandbox: the backend it recorded (`local`, `bwrap`),
    /// or the default for one made before the choice was recorded. A
    /// recorded backend that no longer works here starts nothing, with the
    /// reason (it never silently runs unisolated).
    fn open_sandbox(
        &self,
        meta: &SessionMeta,
        state: &SessionState,
        grant: Option<&crate::hardware::DeviceGrant>,
    ) -> Box<dyn Sandbox> {
        let mut groups = self.session_groups(meta, state);
        if meta.imported.is_some() {
            return Box::new(Unavailable::new(
                "local",
                "an imported run: nothing of it runs here",
                groups,
            ));
        }
        let isolation = match meta.sandbox.as_deref() {
            None => Ok(self.default_backend.backend.clone()),
            Some(name) if name == self.default_backend.backend.backend_name() => {
                Ok(self.default_backend.backend.clone())
            }
            Some(name) => Isolation::named(name).map_err(|e| (name, e)),
        };
        match isolation {
            Ok(isolation) => {
                if state.phase() != Phase::Ended
                    && let Some(grant) = grant
                    && !matches!(isolation, Isolation::Docker(_))
                {
                    // The engine holds a container to its grant; here,
                    // the session's cgroups do.
                    match self.limit_groups(&meta.id, grant) {
                        Ok(limits) => groups.limits = limits,
                        Err(e) => {
                            tracing::error!(session = %meta.id, "its hardware limits cannot be set: {e:#}");
                            return Box::new(Unavailable::new(
                                isolation.backend_name(),
                                format!("its hardware limits cannot be set here: {e:#}"),
                                groups,
                            ));
                        }
                    }
                }
                let mut layout = self.jail_layout(meta);
                layout.devices = grant.map(granted_device_nodes).unwrap_or_default();
                let spec = Spec {
                    session: meta.id.clone(),
                    workspace: meta.workspace.clone(),
                    container: meta.container.clone(),
                    grant: grant.cloned(),
                    groups,
                    layout,
                };
                let factory = Factory {
                    exe: self.exe.clone(),
                    keep_containers: self.keep_containers,
                };
                Backend::open(&factory, &isolation, spec)
            }
            Err((name, e)) => {
                tracing::error!(session = %meta.id, "the session's sandbox {name} does not work here: {e:#}");
                Box::new(Unavailable::new(
                    backend_name(name),
                    format!("{e:#}"),
                    groups,
                ))
            }
        }
    }

    /// The session's cgroups (none for an ended session: it runs nothing)
    /// and its marker.
    fn session_groups(&self, meta: &SessionMeta, state: &SessionState) -> Groups {
        let group = |name: String| {
            self.cgroups
                .as_ref()
                .and_then(|root| match root.group(&name) {
                    Ok(group) => Some(group),
                    Err(e) => {
                        tracing::warn!(session = %meta.id, "no cgroup for the session: {e:#}");
                        None
                    }
                })
        };
        let cgroup = (state.phase() != Phase::Ended)
            .then(|| group(meta.id.clone()))
            .flatten();
        let clients = cgroup
            .as_ref()
            .and_then(|_| group(format!("{}.clients", meta.id)));
        Groups {
            cgroup,
            clients,
            marker: SessionMarker::new(meta.sandbox_tag.clone()),
            limits: None,
        }
    }

    /// The limit groups that hold a session to its grant's cores and
    /// memory (None where this machine has no controllers for them: the
    /// grant then stands in the log and the variables only).
    fn limit_groups(
        &self,
        session: &str,
        grant: &crate::hardware::DeviceGrant,
    ) -> anyhow::Result<Option<crate::sandbox::backend::SessionLimits>> {
        let Some(root) = self.limit_root.clone() else {
            return Ok(None);
        };
        // v2: the session's own group; v1: a group of that name in each controller.
        let name = session.to_string();
        let group = root.apply(&name, &crate::sandbox::limits::Limits::of_session(grant))?;
        Ok(Some(crate::sandbox::backend::SessionLimits {
            root,
            name,
            group,
        }))
    }

    /// Copies the store into `dir` (a new data dir) while the server runs:
    /// no event is appended during the copy (every session is locked), so
    /// every log is whole. Terminal output arriving meanwhile may or may not
    /// be in the copy. Workspaces are not copied.
    pub async fn backup(&self, dir: &Path) -> OpResult<crate::protocol::BackupReply> {
        if !dir.is_absolute() {
            return Err(OpError::new(
                ErrorCode::BadRequest,
                format!(
                    "the backup folder {} must be an absolute path",
                    dir.display()
                ),
            ));
        }
        if dir.exists()
            && std::fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_some())
        {
            return Err(OpError::new(
                ErrorCode::Refused,
                format!(
                    "{} exists and is not empty; give a new folder",
                    dir.display()
                ),
            ));
        }
        let hosts = self.all_hosts();
        let mut guards = Vec::with_capacity(hosts.len());
        for host in &hosts {
            guards.push(host.live.lock().await);
        }
        self.store.flush_all().await.map_err(OpError::internal)?;
        let store = self.store.clone();
        let target = DataPaths::new(dir).database();
        let copied = tokio::task::spawn_blocking(move || store.backup_to(&target))
            .await
            .map_err(OpError::internal)?
            .map_err(|e| OpError::internal(format!("the backup failed: {e}")))?;
        drop(guards);
        Ok(crate::protocol::BackupReply {
            dir: dir.display().to_string(),
            sessions: hosts.len(),
            trees: copied,
        })
    }

    // ----- creation -------------------------------------------------------

    pub async fn create(self: &Arc<Self>, req: CreateSession, by: &Actor) -> OpResult<SessionView> {
        let reservation = self.reserve_campaign_run(&req, by)?;
        check_agent_fields(&req)?;
        let participant = check_participant(&req.participant)?;
        let dir = std::path::Path::new(&req.env_dir);
        let env = match &req.task {
            Some(task) => crate::environment::family::open_task(dir, task),
            None => Environment::load(dir),
        }
        .map_err(|e| {
            OpError::new(
                ErrorCode::Refused,
                format!("environment {} is not usable:\n{e}", req.env_dir),
            )
        })?;
        if let Some(run) = reservation.as_ref().map(|r| &r.plan)
            && (env.id() != run.environment
                || req.budget_s != Some(run.length_s)
                || req.profile != run.profile)
        {
            return Err(OpError::new(
                ErrorCode::BadRequest,
                format!(
                    "run {} is planned on {} ({}s, profile {:?}): the request differs",
                    run.id, run.environment, run.length_s, run.profile
                ),
            ));
        }
        let mut plan = env
            .scoring(req.profile.as_deref())
            .map_err(|e| OpError::new(ErrorCode::Refused, e.to_string()))?;
        if env.family.is_some() && req.sandbox.as_deref().is_some_and(|s| s != "docker") {
            return Err(OpError::new(
                ErrorCode::BadRequest,
                format!(
                    "{} is a Task Standard task: it runs in a container (--sandbox docker)",
                    env.id()
                ),
            ));
        }
        let needs = env.hardware_for(req.profile.as_deref());
        let machine = placement::inventory(self).await;
        let missing = hardware::missing(&needs, &machine);
        let mut request = needs.request(plan.exclusive);
        if req.allow_missing_hardware {
            request = crate::hardware::allocate::capped(&machine, &request);
        }
        if !missing.is_empty() && !req.allow_missing_hardware {
            // A profile this machine can run is the better way out.
            let fitting: Vec<String> = env
                .profile_names()
                .into_iter()
                .filter(|p| req.profile.as_deref() != Some(p.as_str()))
                .filter(|p| hardware::missing(&env.hardware_for(Some(p)), &machine).is_empty())
                .collect();
            let way_out = match fitting.as_slice() {
                [] => "Use".to_string(),
                [one] => format!("Its profile {one} runs here (--profile {one}); or use"),
                many => format!(
                    "Its profiles {} run here (--profile NAME); or use",
                    many.join(", ")
                ),
            };
            return Err(OpError::new(
                ErrorCode::Refused,
                format!(
                    "this machine lacks the hardware environment {} needs: {}. {} --allow-missing-hardware to start anyway (it is recorded on the session)",
                    env.id(),
                    missing.join("; "),
                    way_out
                ),
            ));
        }
        let prepared =
            prepare::check(&env, req.profile.as_deref(), &self.paths.root).map_err(|e| {
                if e.needs_prepare() {
                    OpError::new(ErrorCode::Refused, e.to_string())
                } else {
                    OpError::internal(e)
                }
            })?;
        use_calibration(&mut plan, &env, &prepared.dir);
        let budget_ms = match req.budget_s {
            Some(0) => {
                return Err(OpError::new(
                    ErrorCode::BadRequest,
                    "a budget of 0 leaves no time to work: give one like 2h or 90m",
                ));
            }
            Some(s) if s > crate::environment::duration::MAX_DURATION.as_secs() => {
                return Err(OpError::new(
                    ErrorCode::BadRequest,
                    format!(
                        "a budget of {} is too long: at most {}",
                        crate::environment::duration::format_duration(Duration::from_secs(s)),
                        crate::environment::duration::format_duration(
                            crate::environment::duration::MAX_DURATION
                        )
                    ),
                ));
            }
            Some(s) => s * 1000,
            None => env.default_budget().as_millis() as u64,
        };
        let family_image = match &env.family {
            Some(task) => Some(family_image(task).await?),
            None => None,
        };
        let sandbox_choice = if family_image.is_some() {
            Some("docker")
        } else {
            req.sandbox.as_deref()
        };
        let (sandbox, sandbox_warning) = match sandbox_choice {
            Some(name) => {
                let backend = Isolation::named(name).map_err(|e| {
                    OpError::new(ErrorCode::Refused, format!("--sandbox {name}: {e:#}"))
                })?;
                (backend.backend_name().to_string(), None)
            }
            None => (
                self.default_backend.backend.backend_name().to_string(),
                self.default_backend.warning.clone(),
            ),
        };
        let id = self.fresh_id()?;
        let workspace = self.paths.workspace(&id);
        let source = env.workspace_dir();
        let ws = workspace.clone();
        let prepared_dir = prepared.dir.clone();
        let is_family = env.family.is_some();
        tokio::task::spawn_blocking(move || {
            if is_family {
                // The family's start(t) fills it, in the container.
                std::fs::create_dir_all(&ws)
            } else {
                files::assemble_workspace(&source, Some(&prepared_dir), &ws)
            }
        })
        .await
        .map_err(OpError::internal)?
        .map_err(|e| {
            OpError::internal(format!(
                "could not copy the workspace to {}: {e}",
                workspace.display()
            ))
        })?;
        let protected =
            protected::hash_files(&workspace, &plan.protected).map_err(OpError::internal)?;
        let mut container = env.manifest.sandbox.clone();
        if let (Some(image), Some(task)) = (&family_image, &env.family) {
            let exe = std::env::current_exe().map_err(OpError::internal)?;
            plan.command = vec![exe.display().to_string(), "task-family-score".into()];
            plan.pass_env = image.required_env();
            let online = image
                .permissions(&task.task)
                .iter()
                .any(|p| p == "full_internet");
            container = crate::environment::manifest::SandboxSettings {
                image: Some(image.tag.clone()),
                network: Some(if online { "bridge" } else { "none" }.into()),
                task_standard: true,
                operator_bashrc: false,
            };
        }
        let mut meta = SessionMeta {
            id: id.clone(),
            env_id: env.id().to_string(),
            env_title: env.manifest.title.clone(),
            env_summary: env.manifest.summary.clone(),
            env_dir: env.dir.clone(),
            manifest_hash: env.manifest_hash.clone(),
            profile: plan.profile.clone(),
            participant,
            kind: req.kind,
            budget_ms,
            workspace,
            created_at: Utc::now(),
            allow_missing_hardware: req.allow_missing_hardware,
            hardware_missing: missing,
            protected,
            scoring: plan,
            token: new_secret(),
            sandbox_tag: new_secret(),
            prepared: Some(prepared),
            record_input: env.manifest.recording.input && !req.no_input_recording,
            sandbox: Some(sandbox),
            sandbox_warning,
            container,
            grant: None,
            task_family: None,
            agent: req.agent.clone(),
            campaign: req.campaign.clone(),
            limits: req.limits,
            imported: None,
            instructions: None,
        };
        // The grant is decided and stored before any process of the
        // session starts; nothing else is placed meanwhile.
        let placing = self.placing.lock().await;
        let second = match self.decide(&request).await {
            Decision::Grant(grant) => EventKind::Granted { grant },
            Decision::Wait(why) if env.family.is_none() => EventKind::Queued {
                waiting_for: why,
                priority: req.priority,
                needs: request.clone(),
            },
            Decision::Wait(why) => {
                // A family task's container is made with its session: it
                // cannot wait for its hardware.
                let _ = std::fs::remove_dir_all(&meta.workspace);
                return Err(OpError::new(
                    ErrorCode::Busy,
                    format!(
                        "the hardware {} needs is taken ({why}); try again when a session ends",
                        env.id()
                    ),
                ));
            }
            Decision::Never(lacking) => {
                let _ = std::fs::remove_dir_all(&meta.workspace);
                return Err(OpError::new(
                    ErrorCode::Refused,
                    format!(
                        "this machine lacks the hardware environment {} needs: {}",
                        env.id(),
                        lacking.join("; ")
                    ),
                ));
            }
        };
        if let (Some(image), Some(task), EventKind::Granted { grant }) =
            (family_image, &env.family, &second)
        {
            meta.task_family = Some(
                self.set_up_family(&meta, grant, task, image, budget_ms)
                    .await?,
            );
            if let Some(family) = &meta.task_family {
                meta.scoring.intermediate = family.final_op != "score";
            }
        }
        let first = Event {
            seq: 0,
            at: meta.created_at,
            active_ms: 0,
            origin: by.origin.clone(),
            kind: EventKind::Created {
                by: by.name.clone(),
            },
        };
        self.store
            .create_session(&meta, &first)
            .await
            .map_err(OpError::internal)?;
        let second = Event {
            seq: 1,
            at: Utc::now(),
            active_ms: 0,
            origin: None,
            kind: second,
        };
        self.store
            .append(&id, &second)
            .await
            .map_err(OpError::internal)?;
        let mut state = SessionState::new(budget_ms);
        state.apply(&first);
        state.apply(&second);
        let queued = state.phase() == Phase::Queued;
        let host = self.install(meta, state);
        drop(placing);
        let _ = self.events.send((id.clone(), first));
        let _ = self.events.send((id.clone(), second));
        drop(reservation);
        self.end_if_campaign_stopped(&host).await?;
        if queued {
            // Its place in line, for its first view.
            self.serve_queue().await;
        } else if host.meta.scoring.score_at_start {
            self.score_starting(&host).await?;
        }
        Ok(host.view(by.audience, true).await)
    }

    /// A family task's session before it exists: its container made from
    /// the family's image, `start(t)` run and `/home/agent` handed over.
    /// On failure nothing is left: container and workspace are removed.
    async fn set_up_family(
        self: &Arc<Self>,
        meta: &SessionMeta,
        grant: &crate::hardware::DeviceGrant,
        task: &crate::environment::family::TaskRef,
        image: crate::taskstd::image::FamilyImage,
        budget_ms: u64,
    ) -> OpResult<crate::session::meta::FamilySession> {
        let sandbox = self.open_sandbox(meta, &SessionState::new(budget_ms), Some(grant));
        let (task, workspace) = (task.clone(), meta.workspace.clone());
        tokio::task::spawn_blocking(move || {
            let made = sandbox
                .admin_launcher(Path::new(crate::taskstd::call::FAMILY_DIR))
                .and_then(|root| crate::taskstd::setup::setup(&root, &task, &image));
            if made.is_err() {
                sandbox.stop();
                let _ = std::fs::remove_dir_all(&workspace);
            }
            made
        })
        .await
        .map_err(OpError::internal)?
        .map_err(|e| OpError::new(ErrorCode::Refused, e))
    }

    fn fresh_id(&self) -> OpResult<String> {
        for _ in 0..100 {
            let id = new_session_id();
            let taken = self.hosts().contains_key(&id) || self.paths.workspace(&id).exists();
            if !taken {
                return Ok(id);
            }
        }
        Err(OpError::internal("could not find a free session id"))
    }

    /// The starting solution's score, before the clock starts, under a scoring pause.
    pub async fn score_starting(&self, host: &Arc<Host>) -> OpResult<()> {
        let _scoring = host.scoring.lock().await;
        {
            let mut live = host.live.lock().await;
            if live.state.open_pause().is_none() {
                host.append(
                    &mut live,
                    EventKind::Paused {
                        reason: PauseReason::Scoring,
                        by: SYSTEM.into(),
                        note: Some("starting solution".into()),
                    },
                )
                .await?;
            }
        }
        if let Some(setup) = host.meta.scoring.starting_setup.clone() {
            self.run_starting_setup(host, &setup).await?;
        }
        let entry = self
            .run_scorer_until_done(host, ScorePhase::Starting, 0)
            .await;
        let mut live = host.live.lock().await;
        host.append(
            &mut live,
            EventKind::Scored {
                entry: Box::new(entry),
            },
        )
        .await?;
        host.append(&mut live, EventKind::Resumed { by: SYSTEM.into() })
            .await?;
        Ok(())
    }

    /// The starting solution's build step, as a session process in the
    /// workspace (under the starting score's pause, off the clock). A
    /// failure is noted in the log; the starting score then says what is
    /// missing.
    async fn run_starting_setup(
        &self,
        host: &Arc<Host>,
        setup: &crate::environment::StartingSetup,
    ) -> OpResult<()> {
        let workspace = host.meta.workspace.clone();
        let spec = ExecSpec {
            command: setup.command.clone(),
            cwd: workspace.clone(),
            env: self.session_env(host),
            env_clear: true,
            prefix: self.launcher(host, &workspace, true)?,
            timeout: setup.timeout,
            output_limit: EXEC_LOG_LIMIT,
            stdin: None,
        };
        let failure = match exec(&spec).await {
            Ok(done) if done.exit_code == Some(0) && !done.timed_out => None,
            Ok(done) => Some(format!(
                "exit {:?}{}: {}",
                done.exit_code,
                if done.timed_out { " (timed out)" } else { "" },
                done.stderr.lines().last().unwrap_or_default()
            )),
            Err(e) => Some(format!("{e:#}")),
        };
        if let Some(why) = failure {
            tracing::error!(session = %host.id(), "the starting solution's setup failed: {why}");
            let mut live = host.live.lock().await;
            host.append(
                &mut live,
                EventKind::Note {
                    text: format!(
                        "the starting solution's setup `{}` failed: {why}",
                        setup.command
                    ),
                    by: SYSTEM.into(),
                },
            )
            .await?;
        }
        Ok(())
    }

    // ----- the clock ------------------------------------------------------

    pub async fn begin(&self, id: &str, by: &Actor) -> OpResult<SessionView> {
        let host = self.host(id)?;
        {
            let mut live = host.live.lock().await;
            match live.state.phase() {
                Phase::Queued => return Err(Hub::still_queued(&host)),
                Phase::Created if live.state.open_pause().is_some() => {
                    return Err(OpError::new(
                        ErrorCode::Busy,
                        "the starting solution is still being scored; try again in a moment",
                    ));
                }
                Phase::Created => {}
                other => {
                    return Err(OpError::state(format!(
                        "session {id} has already started (it is {})",
                        other.as_str()
                    )));
                }
            }
            host.append(
                &mut live,
                EventKind::Started {
                    by: by.name.clone(),
                },
            )
            .await?;
            // Shells opened before the start were held frozen.
            self.start_clock(&host, &live).await;
        }
        Ok(host.view(by.audience, false).await)
    }

    pub async fn pause(
        &self,
        id: &str,
        reason: PauseReason,
        note: Option<String>,
        by: &Actor,
    ) -> OpResult<SessionView> {
        let host = self.host(id)?;
        if reason.system_only() {
            return Err(OpError::new(
                ErrorCode::Forbidden,
                format!(
                    "pause reason {reason} is recorded by the server itself; pause with break, proctor, technical_issue or api_outage"
                ),
            ));
        }
        if by.audience == Audience::Participant && !reason.participant_may_pause() {
            return Err(OpError::new(
                ErrorCode::Forbidden,
                format!("a participant cannot pause with reason {reason}"),
            ));
        }
        if by.audience == Audience::Participant && host.meta.clock_kept_by_campaign() {
            // Code the agent runs holds its token too: a pause from it would
            // freeze the run (and the campaign) with nobody to end it.
            return Err(OpError::new(
                ErrorCode::Forbidden,
                "this agent's clock is paused only by its campaign (for model API outages)",
            ));
        }
        {
            let mut live = host.live.lock().await;
            match live.state.phase() {
                Phase::Running => {}
                Phase::Paused => {
                    return Err(OpError::state(format!("session {id} is already paused")));
                }
                other => {
                    return Err(OpError::state(format!(
                        "session {id} is not running (it is {})",
                        other.as_str()
                    )));
                }
            }
            let active = host.set_clock_running(&live, false);
            let paused = host
                .append_at(
                    &mut live,
                    EventKind::Paused {
                        reason,
                        by: by.name.clone(),
                        note,
                    },
                    active,
                )
                .await;
            if let Err(e) = paused {
                // Not on record, so not paused: the clock goes on, unless
                // the store failed (then the clock stays stopped until the
                // session's pause is on record: see `Host::note_store_fault`).
                if host.store_fault().is_none() {
                    host.set_clock_running(&live, true);
                }
                return Err(e);
            }
            self.freeze(&host).await;
            self.interrupt_scoring(&host).await;
        }
        Ok(host.view(by.audience, false).await)
    }

    pub async fn resume(&self, id: &str, by: &Actor) -> OpResult<SessionView> {
        let host = self.host(id)?;
        {
            let mut live = host.live.lock().await;
            let Some(pause) = live
                .state
                .open_pause()
                .filter(|_| live.state.phase() == Phase::Paused)
                .cloned()
            else {
                return Err(OpError::state(format!("session {id} is not paused")));
            };
            if pause.reason == PauseReason::Scoring {
                return Err(OpError::new(
                    ErrorCode::Busy,
                    "the final score is being taken",
                ));
            }
            if by.audience == Audience::Participant && !pause.reason.participant_may_resume() {
                return Err(OpError::new(
                    ErrorCode::Forbidden,
                    format!(
                        "only a proctor can end this pause ({}, by {})",
                        pause.reason, pause.by
                    ),
                ));
            }
            if live.state.remaining_ms(live.state.active_ms) == 0 {
                return Err(OpError::state("no budget is left; a proctor can extend it"));
            }
            host.append(
                &mut live,
                EventKind::Resumed {
                    by: by.name.clone(),
                },
            )
            .await?;
            self.start_clock(&host, &live).await;
        }
        Ok(host.view(by.audience, false).await)
    }

    pub async fn extend(
        &self,
        id: &str,
        by_s: i64,
        reason: String,
        by: &Actor,
    ) -> OpResult<SessionView> {
        let host = self.host(id)?;
        let max_s = crate::environment::duration::MAX_DURATION.as_secs();
        if by_s == 0 || by_s.unsigned_abs() > max_s {
            return Err(OpError::new(
                ErrorCode::BadRequest,
                format!("a budget change must be non-zero and at most {max_s} seconds either way"),
            ));
        }
        let by_ms = by_s * 1000;
        if reason.trim().is_empty() {
            return Err(OpError::new(
                ErrorCode::BadRequest,
                "an extension needs a reason",
            ));
        }
        {
            let mut live = host.live.lock().await;
            if live.state.phase() == Phase::Ended {
                return Err(OpError::state(format!("session {id} has ended")));
            }
            if live
                .state
                .budget_ms
                .checked_add_signed(by_ms)
                .is_none_or(|total| {
                    total > 10 * crate::environment::duration::MAX_DURATION.as_millis() as u64
                })
            {
                return Err(OpError::new(
                    ErrorCode::BadRequest,
                    "this extension would make the budget longer than ten years; refused",
                ));
            }
            if by_ms < 0 {
                use crate::environment::duration::format_duration;
                // Never below what is already spent: the clock would be over
                // at once, for time the participant had been given.
                let used = host.active_ms().max(live.state.active_ms);
                let total = live.state.budget_ms.saturating_add_signed(by_ms);
                if total < used {
                    return Err(OpError::new(
                        ErrorCode::BadRequest,
                        format!(
                            "the budget cannot go below the time already used ({}); at most {} can be taken off",
                            format_duration(Duration::from_millis(used)),
                            format_duration(Duration::from_millis(
                                live.state.budget_ms.saturating_sub(used)
                            ))
                        ),
                    ));
                }
            }
            host.append(
                &mut live,
                EventKind::Extended {
                    by_ms,
                    reason,
                    by: by.name.clone(),
                },
            )
            .await?;
        }
        Ok(host.view(by.audience, false).await)
    }

    pub async fn note(&self, id: &str, text: String, by: &Actor) -> OpResult<SessionView> {
        let host = self.host(id)?;
        let text = text.trim().to_string();
        if text.is_empty() {
            return Err(OpError::new(ErrorCode::BadRequest, "a note needs text"));
        }
        if text.len() > 16 * 1024 {
            return Err(OpError::new(
                ErrorCode::BadRequest,
                "a note is limited to 16 KiB",
            ));
        }
        {
            let mut live = host.live.lock().await;
            host.append(
                &mut live,
                EventKind::Note {
                    text,
                    by: by.name.clone(),
                },
            )
            .await?;
        }
        Ok(host.view(by.audience, false).await)
    }

    pub async fn usage(
        self: &Arc<Self>,
        id: &str,
        tokens_in: u64,
        tokens_out: u64,
        cost_usd: f64,
        _by: &Actor,
    ) -> OpResult<()> {
        check_cost(cost_usd)?;
        self.record_usage(
            id,
            EventKind::Usage {
                tokens_in,
                tokens_out,
                cost_usd,
            },
        )
        .await
    }

    /// Records an agent's model call (its tokens and cost count as usage).
    pub async fn model_call(
        self: &Arc<Self>,
        id: &str,
        call: Box<crate::session::ModelCallRecord>,
        _by: &Actor,
    ) -> OpResult<()> {
        check_cost(call.cost_usd)?;
        let size = serde_json::to_vec(&call).map_or(usize::MAX, |b| b.len());
        if size > MAX_MODEL_CALL_BYTES {
            return Err(OpError::new(
                ErrorCode::BadRequest,
                format!(
                    "a model call record is limited to {MAX_MODEL_CALL_BYTES} bytes ({size}): cut long tool outputs"
                ),
            ));
        }
        self.record_usage(id, EventKind::ModelCall(call)).await
    }

    /// Appends a usage-carrying event; a run that crossed its token or
    /// cost limit then ends with that reason (and its final score).
    async fn record_usage(self: &Arc<Self>, id: &str, kind: EventKind) -> OpResult<()> {
        let host = self.host(id)?;
        let crossed = {
            let mut live = host.live.lock().await;
            if live.state.phase() == Phase::Ended {
                return Err(OpError::state(format!("session {id} has ended")));
            }
            host.append(&mut live, kind).await?;
            host.meta.limits.crossed(&live.state.usage)
        };
        if let Some(reason) = crossed {
            let hub = self.clone();
            // Not awaited: the reply should not wait for a final score.
            tokio::spawn(async move {
                let started = host.live.lock().await.state.started_at.is_some();
                if let Err(e) = hub.finish(&host, reason, SYSTEM, started, None).await {
                    tracing::debug!(session = %host.id(), "limit reached, end not needed: {e}");
                }
            });
        }
        Ok(())
    }

    // ----- scoring --------------------------------------------------------

    pub async fn score(&self, id: &str, by: &Actor) -> OpResult<ScoreView> {
        let host = self.host(id)?;
        let Ok(_scoring) = host.scoring.try_lock() else {
            return Err(OpError::new(
                ErrorCode::Busy,
                "a scoring run is already in progress for this session",
            ));
        };
        if !host.meta.scoring.intermediate {
            return Err(OpError::new(
                ErrorCode::Refused,
                format!(
                    "{} is scored only from its answer, when the session is submitted \
                     (`rebench task submit ANSWER`, or `submit ANSWER` in the shell)",
                    host.meta.env_id
                ),
            ));
        }
        host.scoring_interrupted.store(false, Ordering::SeqCst);
        let requested_active_ms = {
            let live = host.live.lock().await;
            if live.state.phase() != Phase::Running {
                return Err(OpError::state(format!(
                    "session {id} is {}; scores are taken while it runs",
                    live.state.phase().as_str()
                )));
            }
            host.active_ms()
        };
        let held = host.meta.scoring.exclusive && self.hold_for_scoring(&host).await;
        let entry = self
            .run_scorer(
                &host,
                ScorePhase::Intermediate,
                &by.name,
                requested_active_ms,
            )
            .await;
        if held {
            self.release_after_scoring(&host).await;
        }
        let entry = entry.map(|mut entry| {
            if held {
                // For the audit: nothing of the session's ran beside it.
                add_detail(&mut entry, "session_stopped", true.into());
            }
            entry
        });
        if host.scoring_interrupted.load(Ordering::SeqCst) {
            return Err(OpError::state(format!(
                "session {id} was paused while it was being scored: the scoring run was stopped \
                 and nothing was recorded; score again once it runs"
            )));
        }
        let entry = entry.map_err(|reason| {
            tracing::error!(session = %id, "scoring failed on the server's side: {reason}");
            OpError::internal(format!(
                "the server could not run the scorer ({reason}); nothing was recorded, try again"
            ))
        })?;
        let mut live = host.live.lock().await;
        host.append(
            &mut live,
            EventKind::Scored {
                entry: Box::new(entry),
            },
        )
        .await?;
        let record = live
            .state
            .scores
            .last()
            .cloned()
            .ok_or_else(|| OpError::internal("score vanished"))?;
        Ok(ScoreView::build(
            &record,
            host.meta.scoring.visible,
            by.audience,
        ))
    }

    /// One scoring run: announced, marked in progress, contained in a
    /// cgroup of its own (else a marker of its own), and everything it
    /// started killed when it ends, participant code included.
    async fn run_scorer(
        &self,
        host: &Arc<Host>,
        phase: ScorePhase,
        by: &str,
        requested_active_ms: u64,
    ) -> Result<crate::session::ScoreEntry, String> {
        self.announce_scoring(host, phase, by);
        let mark = host.scoring_mark();
        let group = self.cgroups.as_ref().and_then(|root| {
            root.group(&scoring_group_name(host.id()))
                .map_err(|e| tracing::warn!(session = %host.id(), "no cgroup for the scoring run: {e:#}"))
                .ok()
        });
        // The scorer times on the session's own cores (a timed
        // environment's are its alone).
        let scorer_limits = self.scorer_limits(host);
        let containment = ScorerContainment {
            cgroup: group.clone(),
            limits: scorer_limits
                .as_ref()
                .map(|l| l.join().to_vec())
                .unwrap_or_default(),
            marker: scoring_marker(host),
        };
        let jail = self.scorer_jail(host);
        let request_dir = tempfile::tempdir().map_err(|e| format!("a scratch folder: {e}"))?;
        let mut extra_env = match &host.meta.task_family {
            Some(family) => family_scorer_env(host, family, phase, request_dir.path()).await?,
            None => Vec::new(),
        };
        if let Some(grant) = host.grant() {
            extra_env.extend(grant.visible_devices_env());
        }
        // A pause between the request and here: nothing may start (see
        // `interrupt_scoring` for a pause from here on).
        let entry = if host.scoring_interrupted.load(Ordering::SeqCst) {
            Err("the session was paused".to_string())
        } else {
            take_score(
                &self.base_env,
                &host.meta,
                phase,
                by,
                requested_active_ms,
                ScorerReach {
                    jail,
                    env: extra_env,
                },
                &containment,
            )
            .await
        };
        drop(request_dir);
        let marker = containment.marker;
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(group) = group {
                group.remove();
            }
            procs::kill_all(&marker);
            if let Some(limits) = scorer_limits {
                limits.root.remove(&limits.name);
            }
        })
        .await;
        drop(mark);
        entry
    }

    /// The scoring run's hold on the session's cores; None without a
    /// grant or controllers.
    fn scorer_limits(&self, host: &Host) -> Option<crate::sandbox::backend::SessionLimits> {
        let grant = host.grant()?;
        let root = self.limit_root.clone()?;
        let name = scoring_group_name(host.id());
        match root.apply(&name, &crate::sandbox::limits::Limits::of_scorer(grant)) {
            Ok(group) => Some(crate::sandbox::backend::SessionLimits { root, name, group }),
            Err(e) => {
                tracing::warn!(session = %host.id(), "the scoring run is not held to the session's cores: {e:#}");
                None
            }
        }
    }

    /// Stops the session's own processes for an exclusive measurement, if
    /// it still runs (a pause or end has stopped them already). Holds
    /// `live` so that no pause, resume or end interleaves with it.
    async fn hold_for_scoring(&self, host: &Arc<Host>) -> bool {
        let live = host.live.lock().await;
        if live.state.phase() != Phase::Running {
            return false;
        }
        let (roots, sandbox_host) = (host.shell_pids(), host.clone());
        let _ =
            tokio::task::spawn_blocking(move || sandbox_host.sandbox().hold_for_scoring(&roots))
                .await;
        true
    }

    /// Lets the session's processes run again after an exclusive
    /// measurement, unless it was paused or ended meanwhile (then they stay
    /// stopped, as that pause or end wants).
    async fn release_after_scoring(&self, host: &Arc<Host>) {
        let live = host.live.lock().await;
        if live.state.phase() != Phase::Running {
            return;
        }
        let (roots, sandbox_host) = (host.shell_pids(), host.clone());
        let _ = tokio::task::spawn_blocking(move || {
            sandbox_host.sandbox().release_after_scoring(&roots)
        })
        .await;
        drop(live);
    }

    /// Stops the intermediate scoring run in progress, if any, for a pause:
    /// nothing of the session computes while it is paused, and the
    /// participant code a scorer runs may write to the workspace. The run
    /// is marked interrupted first, then its cgroup is emptied and removed
    /// (kill and remove until it is gone): a scorer that had not started
    /// yet either sees the mark or cannot join the group. Without cgroups,
    /// by the scoring marker.
    pub async fn interrupt_scoring(&self, host: &Arc<Host>) {
        if host.scoring.try_lock().is_ok() {
            return;
        }
        host.scoring_interrupted.store(true, Ordering::SeqCst);
        let group = self
            .cgroups
            .as_ref()
            .and_then(|root| root.existing(&scoring_group_name(host.id())));
        let marker = scoring_marker(host);
        let _ = tokio::task::spawn_blocking(move || match group {
            Some(group) => {
                for _ in 0..50 {
                    group.remove();
                    if !group.path().exists() {
                        break;
                    }
                }
            }
            None => {
                procs::kill_all(&marker);
            }
        })
        .await;
        tracing::warn!(session = %host.id(), "paused during a scoring run: the run was stopped");
    }

    /// A starting or final score, which must be taken: a run the machine
    /// could not make is tried again a few times; if it still cannot, the
    /// entry is invalid and says the server, not the workspace, failed.
    async fn run_scorer_until_done(
        &self,
        host: &Arc<Host>,
        phase: ScorePhase,
        requested_active_ms: u64,
    ) -> crate::session::ScoreEntry {
        let mut last = String::new();
        for attempt in 0..SCORER_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(SCORER_RETRY_DELAY).await;
            }
            match self
                .run_scorer(host, phase, SYSTEM, requested_active_ms)
                .await
            {
                Ok(entry) => return entry,
                Err(reason) => {
                    tracing::error!(session = %host.id(), attempt, "scoring failed on the server's side: {reason}");
                    last = reason;
                }
            }
        }
        crate::session::ScoreEntry {
            phase,
            requested_by: SYSTEM.into(),
            requested_active_ms,
            valid: false,
            raw: None,
            normalized: None,
            message: format!("not scored: the server could not run the scorer ({last})"),
            scorer_message: serde_json::Value::Null,
            details: serde_json::Value::Null,
            output: String::new(),
            exit_code: None,
            duration_ms: 0,
        }
    }

    fn announce_scoring(&self, host: &Host, phase: ScorePhase, by: &str) {
        let _ = self.scoring_started.send(ScoringStarted {
            session: host.meta.id.clone(),
            phase,
            by: by.to_string(),
        });
    }

    // ----- the end --------------------------------------------------------

    pub async fn submit(
        &self,
        id: &str,
        answer: Option<String>,
        by: &Actor,
    ) -> OpResult<SessionView> {
        let host = self.host(id)?;
        if answer.as_ref().is_some_and(|a| a.len() > MAX_ANSWER_BYTES) {
            return Err(OpError::new(
                ErrorCode::BadRequest,
                format!("the answer is longer than {MAX_ANSWER_BYTES} bytes"),
            ));
        }
        *host.submission.lock().unwrap_or_else(|e| e.into_inner()) = answer;
        self.finish(&host, EndReason::Submitted, &by.name, true, None)
            .await?;
        Ok(host.view(by.audience, true).await)
    }

    pub async fn end(
        &self,
        id: &str,
        reason: Option<String>,
        note: Option<String>,
        by: &Actor,
    ) -> OpResult<SessionView> {
        let host = self.host(id)?;
        let note = note.map(|n| n.trim().to_string()).filter(|n| !n.is_empty());
        if note.as_ref().is_some_and(|n| n.len() > 16 * 1024) {
            return Err(OpError::new(
                ErrorCode::BadRequest,
                "an end note is limited to 16 KiB",
            ));
        }
        let end_reason = match reason.as_deref() {
            None | Some("ended_by_proctor") | Some("proctor") => EndReason::EndedByProctor,
            Some("abandoned") => EndReason::Abandoned,
            Some(other) => {
                return Err(OpError::new(
                    ErrorCode::BadRequest,
                    format!(
                        "unknown end reason {other:?} (expected ended_by_proctor or abandoned)"
                    ),
                ));
            }
        };
        self.finish(&host, end_reason, &by.name, false, note)
            .await?;
        Ok(host.view(by.audience, true).await)
    }

    /// Ends a session: freeze its processes, take the final score (under a
    /// scoring pause, off the budget) when asked, record the end, kill everything.
    pub async fn finish(
        &self,
        host: &Arc<Host>,
        reason: EndReason,
        by: &str,
        final_score: bool,
        note: Option<String>,
    ) -> OpResult<()> {
        {
            let mut live = host.live.lock().await;
            let phase = live.state.phase();
            if phase == Phase::Ended {
                return Err(OpError::state(format!(
                    "session {} has already ended",
                    host.id()
                )));
            }
            if live
                .state
                .open_pause()
                .is_some_and(|p| p.reason == PauseReason::Scoring)
            {
                return Err(OpError::new(
                    ErrorCode::Busy,
                    "a final score is already being taken",
                ));
            }
            if matches!(phase, Phase::Created | Phase::Queued) && final_score {
                return Err(OpError::state(format!(
                    "session {} has not started",
                    host.id()
                )));
            }
            let active = host.stop_clock_capped(&live);
            self.freeze(host).await;
            if final_score {
                let sandbox_host = host.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    sandbox_host.sandbox().before_final_score();
                })
                .await;
                if live.state.open_pause().is_some() {
                    // Close the participant's or proctor's pause so the scoring pause is its own interval.
                    host.append_at(&mut live, EventKind::Resumed { by: by.to_string() }, active)
                        .await?;
                }
                host.append_at(
                    &mut live,
                    EventKind::Paused {
                        reason: PauseReason::Scoring,
                        by: SYSTEM.into(),
                        note: Some("final score".into()),
                    },
                    active,
                )
                .await?;
            }
        }
        if final_score {
            let active = host.live.lock().await.state.active_ms;
            let mut entry = self
                .run_scorer_until_done(host, ScorePhase::Final, active)
                .await;
            let answer = host
                .submission
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(answer) = answer {
                // Recorded with the score it got (hidden details).
                add_detail(&mut entry, "submission", answer.into());
            }
            let mut live = host.live.lock().await;
            host.append_at(
                &mut live,
                EventKind::Scored {
                    entry: Box::new(entry),
                },
                active,
            )
            .await?;
        }
        {
            let mut live = host.live.lock().await;
            let active = live.state.active_ms;
            host.append_at(
                &mut live,
                EventKind::Ended {
                    reason,
                    by: by.to_string(),
                    note,
                },
                active,
            )
            .await?;
        }
        self.tear_down_family(host).await;
        self.kill_everything(host).await;
        // Its hardware is free: the queue may start someone.
        self.queue_wake.notify_one();
        Ok(())
    }

    /// A family's `teardown(t)`, when it has one, before its container goes.
    async fn tear_down_family(&self, host: &Arc<Host>) {
        let Some(family) = host.meta.task_family.clone().filter(|f| f.teardown) else {
            return;
        };
        let sandbox_host = host.clone();
        let done = tokio::task::spawn_blocking(move || {
            sandbox_host.sandbox().thaw(&[]);
            sandbox_host
                .sandbox()
                .admin_launcher(Path::new(crate::taskstd::call::FAMILY_DIR))
                .and_then(|root| crate::taskstd::setup::teardown(&root, &family))
        })
        .await;
        if let Ok(Err(e)) = done {
            tracing::error!(session = %host.id(), "the family's teardown failed: {e}");
        }
    }

    // ----- processes ------------------------------------------------------

    /// Runs the clock and thaws the session's processes. Call with `live` held.
    async fn start_clock(
        &self,
        host: &Arc<Host>,
        live: &tokio::sync::MutexGuard<'_, crate::server::host::Live>,
    ) {
        host.set_clock_running(live, true);
        self.thaw(host).await;
    }

    /// Stops every process of the session (see `Sandbox::freeze`); what
    /// the freeze defers (task clients' group) runs after their grace if the
    /// session is still paused.
    pub async fn freeze(&self, host: &Arc<Host>) {
        let roots = host.shell_pids();
        let sandbox_host = host.clone();
        let deferred = tokio::task::spawn_blocking(move || sandbox_host.sandbox().freeze(&roots))
            .await
            .ok()
            .flatten();
        if let Some(deferred) = deferred {
            let host = host.clone();
            tokio::spawn(async move {
                tokio::time::sleep(TASK_CLIENT_GRACE).await;
                if !host.clock_runs() {
                    let _ = tokio::task::spawn_blocking(deferred).await;
                }
            });
        }
    }

    pub async fn thaw(&self, host: &Arc<Host>) {
        let roots = host.shell_pids();
        let host = host.clone();
        let _ = tokio::task::spawn_blocking(move || host.sandbox().thaw(&roots)).await;
    }

    pub async fn kill_everything(&self, host: &Arc<Host>) {
        let shells: Vec<_> = host.shells_guard().values().cloned().collect();
        for shell in &shells {
            shell.kill();
        }
        let host = host.clone();
        let _ = tokio::task::spawn_blocking(move || host.sandbox().stop()).await;
    }

    /// How to start `program args` in `cwd` as a process of this session:
    /// through `rebench sandbox-enter`, into its cgroup and, when sessions
    /// are isolated, its jail (started if need be).
    pub fn session_command(
        &self,
        host: &Host,
        program: &str,
        args: &[String],
        cwd: &Path,
    ) -> OpResult<(String, Vec<String>)> {
        let prefix = self.launcher(host, cwd, true)?;
        let mut argv = prefix.into_iter();
        let enter = argv
            .next()
            .ok_or_else(|| OpError::internal("empty launcher"))?;
        let mut wrapped: Vec<String> = argv.collect();
        wrapped.push(program.to_string());
        wrapped.extend(args.iter().cloned());
        Ok((enter, wrapped))
    }

    /// The argv prefix that starts a session process in `cwd` (see
    /// `Sandbox::launcher`).
    fn launcher(&self, host: &Host, cwd: &Path, own_group: bool) -> OpResult<Vec<String>> {
        host.sandbox()
            .launcher(cwd, own_group)
            .map_err(OpError::internal)
    }

    /// What the session's scorer gets as REBENCH_JAIL: the prefix that runs
    /// participant code as a session process would (scrubbed environment,
    /// the jail when isolated), in the workspace, inside the scoring run's
    /// cgroup.
    fn scorer_jail(&self, host: &Host) -> Result<Vec<String>, String> {
        host.sandbox().launcher(&host.meta.workspace, false)
    }

    /// What a session's jail hides and shows: see `sandbox::jail`.
    fn jail_layout(&self, meta: &SessionMeta) -> Layout {
        let mut hidden = vec![self.paths.root.clone(), meta.env_dir.clone()];
        hidden.extend(
            crate::environment::discovery::search_path(&self.paths.root)
                .dirs()
                .cloned(),
        );
        // An environment folder in a git checkout is also in its history
        // (`git show HEAD:environments/x/reference/…`): hide that too.
        let histories: Vec<PathBuf> = hidden.iter().filter_map(|p| git_dir_above(p)).collect();
        hidden.extend(histories);
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
            hidden.extend(OPERATOR_PRIVATE.iter().map(|p| home.join(p)));
        }
        let mut read_only = vec![self.rc_file.clone()];
        read_only.extend(self.bin_dir.clone());
        if let Some(venv) = meta.prepared.as_ref().and_then(|p| p.venv.clone()) {
            read_only.push(venv);
        }
        Layout {
            hidden,
            read_only,
            writable: vec![meta.workspace.clone(), self.paths.participant_dir()],
            tmp: self.paths.root.join("tmp").join(&meta.id),
            devices: Vec::new(),
        }
    }

    /// The whole environment of a session's shells and commands: the
    /// server's allowlisted variables (`sandbox::environ`), then the
    /// session's own.
    pub fn session_env(&self, host: &Host) -> Vec<(String, String)> {
        let mut path =
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
        if let Some(bin) = &self.bin_dir {
            path = format!("{}:{path}", bin.display());
        }
        // The environment's virtual environment comes first (its python, its pip).
        let mut venv = Vec::new();
        if let Some(prepared) = &host.meta.prepared {
            venv = prepared.session_env(Some(std::ffi::OsStr::new(&path)));
            if let Some((_, p)) = venv.iter().find(|(k, _)| k == "PATH") {
                path = p.clone();
            }
            venv.retain(|(k, _)| k != "PATH");
        }
        let own: Vec<(String, String)> = vec![
            (
                "REBENCH_SOCKET".into(),
                self.paths.participant_socket().display().to_string(),
            ),
            ("REBENCH_SESSION".into(), host.meta.id.clone()),
            ("REBENCH_TOKEN".into(), host.meta.token.clone()),
            host.marker().env_pair(),
            ("REBENCH_DATA_DIR".into(), String::new()),
            ("PATH".into(), path),
            ("TERM".into(), "xterm-256color".into()),
        ]
        .into_iter()
        .chain(venv)
        .chain(host.sandbox().env())
        .chain(
            host.grant()
                .map(|g| g.visible_devices_env())
                .unwrap_or_default(),
        )
        .collect();
        let mut env: Vec<(String, String)> = self
            .base_env
            .iter()
            .filter(|(name, _)| !own.iter().any(|(k, _)| k == name))
            .cloned()
            .collect();
        env.extend(own);
        env
    }

    // ----- agents ---------------------------------------------------------

    pub async fn exec(
        &self,
        id: &str,
        command: String,
        timeout_s: Option<f64>,
        cwd: Option<String>,
        _by: &Actor,
    ) -> OpResult<ExecReply> {
        let host = self.host(id)?;
        if command.trim().is_empty() {
            return Err(OpError::new(ErrorCode::BadRequest, "exec needs a command"));
        }
        let timeout = match timeout_s {
            None => EXEC_DEFAULT_TIMEOUT,
            // Compared before converting: a huge value must not panic.
            Some(t) if t.is_finite() && t > 0.0 && t <= EXEC_MAX_TIMEOUT.as_secs_f64() => {
                Duration::from_secs_f64(t)
            }
            Some(t) => {
                return Err(OpError::new(
                    ErrorCode::BadRequest,
                    format!(
                        "timeout_s must be more than 0 and at most {} seconds, not {t}",
                        EXEC_MAX_TIMEOUT.as_secs()
                    ),
                ));
            }
        };
        let workdir = match &cwd {
            None => host.meta.workspace.clone(),
            Some(c) if std::path::Path::new(c).is_absolute() => PathBuf::from(c),
            Some(c) => host.meta.workspace.join(c),
        };
        // Commands run in the workspace: no way out by `..` or another root.
        let inside = workdir.starts_with(&host.meta.workspace)
            && !workdir
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir));
        if !inside {
            return Err(OpError::new(
                ErrorCode::BadRequest,
                format!(
                    "cwd {:?} is outside the session's workspace {}",
                    cwd.unwrap_or_default(),
                    host.meta.workspace.display()
                ),
            ));
        }
        {
            let live = host.live.lock().await;
            let phase = live.state.phase();
            if phase != Phase::Running {
                let hint = match phase {
                    Phase::Created => {
                        format!(
                            ": start its clock first (`rebench begin {id}`, or run the scaffold with `rebench agent {id} -- …`, which does)"
                        )
                    }
                    Phase::Queued => ": it waits for its hardware".to_string(),
                    Phase::Paused => ": resume it first".to_string(),
                    _ => String::new(),
                };
                return Err(OpError::state(format!(
                    "session {id} is {}; commands run while it runs{hint}",
                    phase.as_str()
                )));
            }
        }
        host.touch();
        let spec = ExecSpec {
            command: command.clone(),
            cwd: workdir.clone(),
            env: self.session_env(&host),
            env_clear: true,
            // The launcher's, where the command goes through it (`run_command`).
            prefix: Vec::new(),
            timeout,
            output_limit: EXEC_OUTPUT_LIMIT,
            stdin: None,
        };
        let result = self.run_command(&host, spec).await.map_err(|e| {
            // A vanished workspace pauses the session (see `budget`).
            host.wake.notify_one();
            OpError::new(
                ErrorCode::Refused,
                format!("could not run the command: {e:#}"),
            )
        })?;
        let record = ExecRecord {
            command,
            cwd: workdir.display().to_string(),
            exit_code: result.exit_code,
            signal: result.signal,
            timed_out: result.timed_out,
            duration_ms: result.duration_ms,
            stdout: cut(&result.stdout, EXEC_LOG_LIMIT),
            stderr: cut(&result.stderr, EXEC_LOG_LIMIT),
            stdout_truncated: result.stdout_truncated || result.stdout.len() > EXEC_LOG_LIMIT,
            stderr_truncated: result.stderr_truncated || result.stderr.len() > EXEC_LOG_LIMIT,
        };
        {
            let mut live = host.live.lock().await;
            // The command ran: if the log cannot take it, say so plainly.
            host.append(&mut live, EventKind::Exec(Box::new(record)))
                .await
                .map_err(|e| {
                    OpError::internal(format!(
                        "the command ran (exit {}), but it is NOT in the session's record: {e}",
                        result
                            .exit_code
                            .map_or_else(|| "by signal".to_string(), |c| c.to_string())
                    ))
                })?;
        }
        Ok(ExecReply {
            exit_code: result.exit_code,
            signal: result.signal,
            stdout: result.stdout,
            stderr: result.stderr,
            stdout_truncated: result.stdout_truncated,
            stderr_truncated: result.stderr_truncated,
            timed_out: result.timed_out,
            duration_ms: result.duration_ms,
        })
    }
}

impl Hub {
    /// Runs an agent's command through the session's spawner, else (a
    /// backend without one, or one that cannot start or went away before
    /// it had the command) through the launcher.
    async fn run_command(&self, host: &Host, mut spec: ExecSpec) -> anyhow::Result<ExecResult> {
        if let Some(spawner) = self.spawner(host).await {
            match exec_via(&spec, &spawner).await {
                // It never had the command: running it the other way runs it once.
                Err(SpawnError::Unreachable(e)) => {
                    tracing::warn!(session = %host.meta.id, "{e}; the command goes through the launcher");
                }
                other => return Ok(other?),
            }
        }
        spec.prefix = self
            .launcher(host, &spec.cwd, true)
            .map_err(|e| anyhow::anyhow!(e.message))?;
        exec(&spec).await
    }

    /// The session's spawner, started on first use (and again if it
    /// ended); None where the backend has none or it would not start.
    async fn spawner(&self, host: &Host) -> Option<Arc<Spawner>> {
        if !host.sandbox().runs_spawner() {
            return None;
        }
        let program = self.exe.as_ref()?.with_file_name(ENTER_PROGRAM);
        let mut slot = host.spawner.lock().await;
        if let Some(spawner) = slot.as_ref().filter(|s| s.is_alive()) {
            return Some(spawner.clone());
        }
        *slot = None;
        if !program.is_file() {
            return None;
        }
        let workspace = &host.meta.workspace;
        let mut argv = self.launcher(host, workspace, true).ok()?;
        argv.extend([program.display().to_string(), SERVE_FLAG.to_string()]);
        match Spawner::start(&argv, &self.session_env(host), workspace).await {
            Ok(spawner) => {
                let spawner = Arc::new(spawner);
                *slot = Some(spawner.clone());
                Some(spawner)
            }
            Err(e) => {
                tracing::warn!(session = %host.meta.id, "the session's spawner did not start ({e}); commands go through the launcher");
                None
            }
        }
    }
}

/// At most `limit` bytes of `text`, cut at a character boundary.
/// A recorded backend's name as the sandbox seam spells it.
fn backend_name(name: &str) -> &'static str {
    match name {
        "bwrap" => "bwrap",
        "docker" => "docker",
        _ => "local",
    }
}

/// The devices a session holds: its grant, or for a session made before
/// grants named devices, its counts as a grant of no particular devices.
fn granted(meta: &SessionMeta, state: &SessionState) -> Option<DeviceGrant> {
    state.grant.clone().or_else(|| {
        meta.grant
            .as_ref()
            .map(crate::hardware::LegacyGrant::as_device_grant)
    })
}

/// The device nodes a jail shows for `grant`: its GPUs' own, and the
/// control nodes every GPU process needs (none without GPUs).
fn granted_device_nodes(grant: &DeviceGrant) -> Vec<PathBuf> {
    if grant.gpus.is_empty() {
        return Vec::new();
    }
    let dev = crate::hardware::inventory::dev_dir();
    grant
        .gpus
        .iter()
        .map(|g| crate::hardware::inventory::gpu_node(&dev, g.index))
        .chain(crate::hardware::inventory::shared_gpu_nodes(&dev))
        .filter(|node| node.exists())
        .collect()
}

/// `[machine]` of the operator's config: what sessions are never given.
fn machine_reserve() -> crate::hardware::Reserve {
    match crate::settings::load_user_config() {
        Ok(config) => config.machine,
        Err(e) => {
            tracing::warn!("{e:#}; nothing is reserved for the system");
            crate::hardware::Reserve::default()
        }
    }
}

fn check_cost(cost_usd: f64) -> OpResult<()> {
    if !cost_usd.is_finite() || cost_usd < 0.0 {
        return Err(OpError::new(
            ErrorCode::BadRequest,
            "cost_usd must be a non-negative number",
        ));
    }
    Ok(())
}

/// A participant's name, trimmed: 1 to 100 printable characters.
fn check_participant(name: &str) -> OpResult<String> {
    let participant = name.trim().to_string();
    if participant.is_empty()
        || participant.len() > 100
        || participant.chars().any(char::is_control)
    {
        return Err(OpError::new(
            ErrorCode::BadRequest,
            "participant must be a name of 1 to 100 printable characters",
        ));
    }
    Ok(participant)
}

/// An agent's identity as a client gave it.
pub(crate) fn check_agent(agent: &crate::session::AgentIdentity) -> OpResult<()> {
    let printable = |s: &str, max: usize| s.len() <= max && !s.chars().any(char::is_control);
    if agent.name.trim().is_empty()
        || !printable(&agent.name, 100)
        || !printable(&agent.model, 200)
        || !printable(&agent.scaffold, 1000)
    {
        return Err(OpError::new(
            ErrorCode::BadRequest,
            "agent: name (1 to 100 printable characters), model and scaffold must be printable",
        ));
    }
    Ok(())
}

/// An agent's identity and limits, as a client gave them.
fn check_agent_fields(req: &CreateSession) -> OpResult<()> {
    let bad = |m: &str| Err(OpError::new(ErrorCode::BadRequest, m.to_string()));
    if let Some(agent) = &req.agent {
        check_agent(agent)?;
        if req.kind != crate::session::Kind::Agent {
            return bad("an agent identity needs kind agent");
        }
    }
    if req
        .limits
        .max_cost_usd
        .is_some_and(|c| !c.is_finite() || c <= 0.0)
        || req.limits.max_tokens == Some(0)
    {
        return bad("limits: max_tokens and max_cost_usd must be more than 0");
    }
    Ok(())
}

fn cut(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn watch_shell_exits(
    host: Arc<Host>,
    mut exits: tokio::sync::mpsc::UnboundedReceiver<ShellEnded>,
) {
    while let Some(ended) = exits.recv().await {
        host.append_quiet(EventKind::ShellExited {
            shell: ended.shell,
            code: ended.exit.code,
            signal: ended.exit.signal,
        })
        .await;
    }
}

/// The `.git` of the repository `path` is in, if any.
fn git_dir_above(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .map(|dir| dir.join(".git"))
        .find(|git| git.exists())
}

/// Folders and files under the operator's home that a jail hides: keys,
/// cloud credentials, and rebench's default data dir.
const OPERATOR_PRIVATE: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/gcloud",
    ".config/gh",
    ".local/share/rebench",
];

/// Adds `key` to an entry's details (a scorer's details that are not an
/// object are kept under `scorer`).
fn add_detail(entry: &mut crate::session::ScoreEntry, key: &str, value: serde_json::Value) {
    let mut details = match std::mem::take(&mut entry.details) {
        serde_json::Value::Object(map) => map,
        serde_json::Value::Null => serde_json::Map::new(),
        other => serde_json::Map::from_iter([("scorer".to_string(), other)]),
    };
    details.insert(key.into(), value);
    entry.details = serde_json::Value::Object(details);
}
