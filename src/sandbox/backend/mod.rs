//! The sandbox seam: one [`Sandbox`] per session owns everything that
//! differs between backends — how a process of the session is started, how
//! they are all frozen, thawed and killed, what the session's processes need
//! in their environment, and how it describes itself. The server above it
//! never matches on backend kinds.
//!
//! Adding a backend: a module here implementing [`Sandbox`], and one arm in
//! [`Backend::open`] (see `docs/sandbox.md`).

mod bwrap;
mod docker;
mod groups;
mod local;
mod unavailable;

use std::path::{Path, PathBuf};

pub use bwrap::Bwrap;
pub use docker::{Docker, SESSION_LABEL};
pub use groups::{Groups, SessionLimits};
pub use local::Local;
pub use unavailable::Unavailable;

use super::jail::{Isolation, Layout};

/// A step a freeze leaves for later: run once the grace for in-shell
/// `rebench task` clients is over, if the session is still paused.
pub type Deferred = Box<dyn FnOnce() + Send>;

/// Where one session's processes run. Methods block (they touch cgroups,
/// `/proc` or a container engine): call them off the async threads.
pub trait Sandbox: Send + Sync {
    /// Its `--sandbox` name: `local`, `bwrap`, `docker`.
    fn backend(&self) -> &'static str;
    /// Session views' `isolation`: `none`, `bwrap`, `docker`.
    fn isolation(&self) -> &'static str;
    /// The machine the processes run on (`local`: the server's own).
    fn host(&self) -> &str {
        "local"
    }
    /// Whether the session's GPUs are all it can reach: `enforced` (only
    /// its device nodes exist where it runs) or `advisory` (every node is
    /// there; only the variables name its own).
    fn gpu_isolation(&self) -> &'static str {
        "enforced"
    }
    /// What freezing and killing go by: `cgroup`, `pidns`, `marker`, `container`.
    fn containment(&self) -> &'static str;
    /// The argv prefix that starts a process of the session in `cwd`,
    /// starting the session's environment (a jail) if need be. With
    /// `own_group` false the process stays in its caller's group: the
    /// participant code a scoring run starts dies with that run.
    fn launcher(&self, cwd: &Path, own_group: bool) -> Result<Vec<String>, String>;
    /// Whether the session's commands may be started by a spawner that
    /// `launcher` started (`sandbox::spawner`): where a process started so
    /// is contained like each command would be.
    fn runs_spawner(&self) -> bool {
        false
    }
    /// The argv prefix that runs a command as root in the session's
    /// environment, in `cwd`: a Task Standard family's own code runs so
    /// (only containers have a root apart from the server's).
    fn admin_launcher(&self, _cwd: &Path) -> Result<Vec<String>, String> {
        Err(format!(
            "the {} backend cannot run a Task Standard family (it needs a container)",
            self.backend()
        ))
    }
    /// Variables the backend adds to the session's environment.
    fn env(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// What holds its processes on the server's machine.
    fn groups(&self) -> &Groups;
    /// Stops every process of the session (`shells`: its shells' pids);
    /// by default its cgroup, else what carries its marker.
    fn freeze(&self, shells: &[i32]) -> Option<Deferred> {
        self.groups().freeze_marked(shells)
    }
    /// Lets them run again.
    fn thaw(&self, shells: &[i32]) {
        self.groups().thaw_marked(shells);
    }
    /// Stops every process of the session for an exclusive measurement
    /// (`[scoring] exclusive`) while the scorer, and the participant code
    /// it starts, run on: in-shell task clients too, at once (the one
    /// waiting for this score gets its reply when released).
    fn hold_for_scoring(&self, shells: &[i32]) {
        if let Some(clients) = self.freeze(shells) {
            clients();
        }
    }
    /// Lets them run again after `hold_for_scoring`.
    fn release_after_scoring(&self, shells: &[i32]) {
        self.thaw(shells);
    }
    /// After the end's freeze, before the final score: the participant
    /// code that scorer runs must be able to run, while nothing the
    /// session left may. Nothing to do where scorer-run code runs outside
    /// the frozen group (local, bwrap).
    fn before_final_score(&self) {}
    /// Kills every process of the session and releases what it holds.
    fn stop(&self) {
        self.groups().kill();
    }
    /// Whether the session's environment is still there while it runs;
    /// Err says what happened to it (a container killed from outside, or
    /// out of memory): the session then pauses itself with that reason.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
    /// How often `check` is worth asking (None: never).
    fn check_every(&self) -> Option<std::time::Duration> {
        None
    }
    /// Resolves when the environment may just have failed (its engine
    /// said so): `check` is then asked at once, and this asked again for
    /// the next time. None: only `check_every` finds failures.
    fn failure_signal(&self) -> Option<FailureSignal> {
        None
    }
}

/// See `Sandbox::failure_signal`.
pub type FailureSignal = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// How sessions' sandboxes are made on this server: the pieces every
/// backend may need.
#[derive(Debug, Clone)]
pub struct Factory {
    /// The running `rebench` binary (`sandbox-enter`).
    pub exe: Option<PathBuf>,
    /// Ended containers are stopped, not removed.
    pub keep_containers: bool,
}

/// What one session's sandbox is made from.
pub struct Spec {
    pub session: String,
    pub workspace: PathBuf,
    /// A container's image and network (the environment's `[sandbox]`).
    pub container: crate::environment::manifest::SandboxSettings,
    /// The devices it holds (None: no limits, a session made before grants).
    pub grant: Option<crate::hardware::DeviceGrant>,
    pub groups: Groups,
    /// What a jail hides and shows (used by isolating backends).
    pub layout: Layout,
}

/// The backend a session runs in, resolved on this machine.
pub struct Backend;

impl Backend {
    /// The session's sandbox for `isolation`: the one place backends are chosen.
    pub fn open(factory: &Factory, isolation: &Isolation, spec: Spec) -> Box<dyn Sandbox> {
        let Some(exe) = factory.exe.clone() else {
            return Box::new(Unavailable::new(
                isolation.backend_name(),
                "cannot find the rebench binary",
                spec.groups,
            ));
        };
        match isolation {
            Isolation::None => Box::new(Local::new(exe, spec.groups)),
            Isolation::Bwrap(bwrap) => Box::new(Bwrap::new(
                exe,
                bwrap.clone(),
                spec.session,
                spec.layout,
                spec.groups,
            )),
            Isolation::Docker(endpoint) => {
                match crate::sandbox::docker::Engine::connect("local", endpoint) {
                    Ok(engine) => Box::new(Docker::new(exe, factory.keep_containers, engine, spec)),
                    Err(e) => Box::new(Unavailable::new("docker", format!("{e:#}"), spec.groups)),
                }
            }
        }
    }
}
