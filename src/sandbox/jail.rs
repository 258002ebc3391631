//! Isolated sessions (`REBENCH_ISOLATION=bwrap`): one bubblewrap jail per
//! session, started with the session's first shell or command, in which all
//! of its processes run (joined with `rebench sandbox-enter`, see `enter`).
//!
//! Inside, the filesystem is the host's, read-only, except: the session
//! workspace (writable), a private `/tmp`, and nothing at all of the data
//! dir (the store, the admin socket, other workspaces, hidden preparations)
//! or of the environment folders (scorers, reference solutions) beyond what
//! the session needs (its venv, read-only; the participant socket; the shell
//! rc). Its own pid namespace hides the server and every other process, and
//! killing the jail's init kills everything inside, marked or not.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

use super::SessionMarker;
use super::cgroup::Cgroup;
use super::sys::signal_process;

/// The operator's choice of backend for sessions that do not name one.
pub const BACKEND_VAR: &str = "REBENCH_BACKEND";
/// The bubblewrap binary to use (default: `bwrap` on PATH).
pub const BWRAP_VAR: &str = "REBENCH_BWRAP";
/// Deprecated alias of `REBENCH_BACKEND` (`bwrap` = bwrap, `none` = local).
pub const ISOLATION_VAR: &str = "REBENCH_ISOLATION";

/// How a session's processes run (its sandbox backend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// Directly, as the server's user (`local`).
    None,
    /// In a bubblewrap jail per session; the path of `bwrap`.
    Bwrap(PathBuf),
    /// In a container per session on a Docker engine (its endpoint).
    Docker(String),
}

/// The backend sessions get when they do not ask for one, and why it is
/// not an isolating one (when it is not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultBackend {
    pub backend: Isolation,
    /// Set when no isolating backend works here: shown on the start screen
    /// and in `rebench show`, and recorded on each such session.
    pub warning: Option<String>,
}

impl Isolation {
    /// The backend named `name` (`local`/`none`, `bwrap`), if it works here.
    pub fn named(name: &str) -> anyhow::Result<Isolation> {
        match name {
            "local" | "none" => Ok(Isolation::None),
            "bwrap" => usable_bwrap()
                .map(Isolation::Bwrap)
                .map_err(anyhow::Error::msg),
            "docker" => {
                let endpoint = super::docker::default_endpoint();
                super::docker::ping(&endpoint)?;
                Ok(Isolation::Docker(endpoint))
            }
            other => bail!("unknown sandbox {other:?}: expected local, bwrap or docker"),
        }
    }

    /// The default backend: `REBENCH_BACKEND`, else the deprecated
    /// `REBENCH_ISOLATION`, else the user's config file (`sandbox = …`,
    /// see `settings`), else the safest backend that works here.
    pub fn default_from_env() -> anyhow::Result<DefaultBackend> {
        let configured = match crate::settings::user_config_path() {
            Some(path) => crate::settings::Config::load(&path)?
                .sandbox
                .map(|name| (format!("{}: key `sandbox`", path.display()), name)),
            None => None,
        };
        Self::default_from(configured)
    }

    /// As `default_from_env`, with the config file's choice given: (where
    /// it was set, the name).
    pub fn default_from(configured: Option<(String, String)>) -> anyhow::Result<DefaultBackend> {
        let from_env = [BACKEND_VAR, ISOLATION_VAR].into_iter().find_map(|var| {
            let value = std::env::var(var).unwrap_or_default();
            (!value.is_empty()).then(|| (var.to_string(), value))
        });
        if let Some((source, name)) = from_env.or(configured) {
            let backend = Isolation::named(&name).with_context(|| format!("{source}={name}"))?;
            return Ok(DefaultBackend {
                backend,
                warning: None,
            });
        }
        Ok(match Isolation::named("bwrap") {
            Ok(backend) => DefaultBackend {
                backend,
                warning: None,
            },
            Err(e) => DefaultBackend {
                backend: Isolation::None,
                warning: Some(format!(
                    "not isolated: {e:#}; the participant's processes run as the server's user (docs/sandbox.md)"
                )),
            },
        })
    }

    /// The backend's name in session views and `--sandbox`: `local`, `bwrap` or `docker`.
    pub fn backend_name(&self) -> &'static str {
        match self {
            Isolation::None => "local",
            Isolation::Bwrap(_) => "bwrap",
            Isolation::Docker(_) => "docker",
        }
    }

    /// The older name in session views (`isolation`): `none` or `bwrap`.
    pub fn name(&self) -> &'static str {
        match self {
            Isolation::None => "none",
            Isolation::Bwrap(_) => "bwrap",
            Isolation::Docker(_) => "docker",
        }
    }
}

/// bwrap, once it has been seen to work here (probed once per process).
fn usable_bwrap() -> Result<PathBuf, String> {
    static PROBE: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| match bwrap_path() {
            Some(path) if bwrap_works(&path) => Ok(path),
            Some(_) => Err("the bwrap sandbox does not work on this machine (bwrap cannot create user and pid namespaces here)".to_string()),
            None => Err("the bwrap sandbox needs bubblewrap on PATH (apt install bubblewrap)".to_string()),
        })
        .clone()
}

/// `REBENCH_BWRAP` (the operator's bubblewrap), else `bwrap` on PATH.
fn bwrap_path() -> Option<PathBuf> {
    match std::env::var_os(BWRAP_VAR).filter(|v| !v.is_empty()) {
        Some(path) => Some(PathBuf::from(path)).filter(|p| p.is_file()),
        None => find_on_path("bwrap"),
    }
}

/// Whether `bwrap` can make the namespaces a jail needs here.
fn bwrap_works(bwrap: &Path) -> bool {
    Command::new(bwrap)
        .args([
            "--unshare-user",
            "--unshare-pid",
            "--ro-bind",
            "/",
            "/",
            "true",
        ])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What one session's jail shows and hides (absolute paths).
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// Emptied (a tmpfs over each) first: data dir, environment folders,
    /// the operator's credential folders.
    pub hidden: Vec<PathBuf>,
    /// Then shown again, read-only (venv, rc file, the rebench binary's folder).
    pub read_only: Vec<PathBuf>,
    /// Then shown again, writable (the workspace, the participant socket's folder).
    pub writable: Vec<PathBuf>,
    /// A folder mounted as the jail's /tmp.
    pub tmp: PathBuf,
    /// Device nodes shown at `/dev/<name>`: the session's own GPUs and the
    /// shared NVIDIA control nodes (`hardware::grant`), and nothing else.
    pub devices: Vec<PathBuf>,
}

/// A running jail: bwrap and the host pid of its init.
pub struct Jail {
    bwrap: Child,
    init_pid: i32,
}

impl Jail {
    /// Starts the jail and waits until it is set up; its init (`sleep
    /// infinity` after a readiness line, carrying the session
    /// marker so that pausing and ending a session reach it) keeps the
    /// namespaces alive until `stop`. bwrap starts in `cgroup` (so does all
    /// that runs in the jail) and from a scrubbed environment: the init is
    /// visible inside, and its `/proc/1/environ` must hold nothing of the
    /// operator's.
    pub fn start(
        bwrap: &Path,
        layout: &Layout,
        marker: &SessionMarker,
        cgroup: Option<&Cgroup>,
        limit_dirs: &[PathBuf],
    ) -> anyhow::Result<Jail> {
        std::fs::create_dir_all(&layout.tmp)
            .with_context(|| format!("creating {}", layout.tmp.display()))?;
        let (mut info_read, info_write) = std::io::pipe().context("creating a pipe for bwrap")?;
        let mut command = Command::new(bwrap);
        command
            .args(["--unshare-user", "--unshare-pid", "--unshare-ipc"])
            .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
        // A minimal /dev has no GPUs: the session's own, and only those.
        for node in &layout.devices {
            let Some(name) = node.file_name() else {
                continue;
            };
            command
                .arg("--dev-bind")
                .arg(node)
                .arg(Path::new("/dev").join(name));
        }
        // /tmp first: the data dir (and so the workspace) may live under it.
        command.arg("--bind").arg(&layout.tmp).arg("/tmp");
        for path in &layout.hidden {
            if path.is_dir() {
                command.arg("--tmpfs").arg(path);
            } else if path.exists() {
                command.arg("--ro-bind").arg("/dev/null").arg(path);
            }
        }
        for path in layout.read_only.iter().filter(|p| p.exists()) {
            command.arg("--ro-bind").arg(path).arg(path);
        }
        for path in layout.writable.iter().filter(|p| p.exists()) {
            command.arg("--bind").arg(path).arg(path);
        }
        // bwrap writes {"child-pid": N, ...} to fd 3 once the init runs.
        let fd = std::os::fd::AsRawFd::as_raw_fd(&info_write);
        // The info comes before the mounts are all made; the init's "ready"
        // line comes after (joining earlier would see a half-built tree).
        command
            .args(["--info-fd", &fd.to_string(), "--", "sh", "-c"])
            .arg("echo ready && exec sleep infinity")
            .env_clear()
            .envs(super::environ::passed_from_here())
            .env(&marker.key, &marker.value)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: pre_exec runs between fork and exec; it only clears the
        // close-on-exec flag of the pipe's write end, open in the child.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut bwrap = command
            .spawn()
            .with_context(|| format!("starting {}", bwrap.display()))?;
        // Our copies must go, or the read below never sees EOF on failure.
        drop(command);
        drop(info_write);
        let mut info = String::new();
        let read = info_read.read_to_string(&mut info);
        let mut ready = String::new();
        if let Some(stdout) = bwrap.stdout.take() {
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut ready);
        }
        let init_pid = match (read, child_pid(&info)) {
            (Ok(_), Some(pid)) if ready.trim() == "ready" => pid,
            _ => {
                let _ = bwrap.kill();
                let mut stderr = String::new();
                if let Some(mut err) = bwrap.stderr.take() {
                    let _ = err.read_to_string(&mut stderr);
                }
                let _ = bwrap.wait();
                bail!("bwrap did not start the session jail: {}", stderr.trim());
            }
        };
        let mut jail = Jail { bwrap, init_pid };
        if let Err(e) = jail.move_into(cgroup, limit_dirs) {
            jail.stop();
            return Err(e);
        }
        Ok(jail)
    }

    /// Moves the jail (bwrap and everything in its pid namespace, which is
    /// ours alone until something enters it) into the session's cgroup.
    /// Only once it runs: a child that joined a frozen group before its exec
    /// would never exec, and `start` would wait for it forever (a session
    /// frozen for an exclusive score whose jail had to start anew).
    /// Its limit groups (cores, memory) likewise.
    fn move_into(&self, group: Option<&Cgroup>, limit_dirs: &[PathBuf]) -> anyhow::Result<()> {
        if group.is_none() && limit_dirs.is_empty() {
            return Ok(());
        }
        let mut members = vec![self.bwrap.id() as i32];
        members.extend(super::procs::pid_namespace_pids(self.init_pid));
        for pid in members {
            if let Some(group) = group {
                group
                    .add(pid)
                    .with_context(|| format!("moving the jail's process {pid} into its cgroup"))?;
            }
            for dir in limit_dirs {
                let procs = dir.join("cgroup.procs");
                std::fs::write(&procs, pid.to_string()).with_context(|| {
                    format!("moving the jail's process {pid} into {}", procs.display())
                })?;
            }
        }
        Ok(())
    }

    /// The host pid of the jail's init (what `sandbox-enter --target` takes).
    pub fn init_pid(&self) -> i32 {
        self.init_pid
    }

    /// Whether the jail still runs (its init may have been killed).
    pub fn is_running(&mut self) -> bool {
        matches!(self.bwrap.try_wait(), Ok(None))
    }

    /// Kills the init, which takes every process in the jail with it.
    pub fn stop(&mut self) {
        signal_process(self.init_pid, libc::SIGKILL);
        let _ = self.bwrap.kill();
        let _ = self.bwrap.wait();
    }
}

impl Drop for Jail {
    fn drop(&mut self) {
        self.stop();
    }
}

fn child_pid(info: &str) -> Option<i32> {
    let value: serde_json::Value = serde_json::from_str(info.trim()).ok()?;
    value.get("child-pid")?.as_i64()?.try_into().ok()
}

/// `program` in one of PATH's folders.
pub(crate) fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_pid_is_read_from_bwraps_info() {
        assert_eq!(
            child_pid("{\n    \"child-pid\": 4242,\n    \"pid-namespace\": 1\n}\n"),
            Some(4242)
        );
        assert_eq!(child_pid(""), None);
        assert_eq!(child_pid("{\"child-pid\": \"x\"}"), None);
    }
}
