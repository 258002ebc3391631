//! `rebench sandbox-enter`: how every process of a session starts. It
//! joins the session's cgroup (when it has one), scrubs its environment to
//! the allowlist (`environ`: what the server set for the session stays, the
//! operator's variables and a scorer's go), and then either runs the
//! command in its place or, for an isolated session, joins the jail's
//! namespaces (user, mount, pid) and runs it there as a child whose exit it
//! passes on. So all of an isolated session's processes share one pid
//! namespace (they see each other, background jobs outlive the command that
//! started them) and one view of the filesystem.
//!
//! It must run before any thread is started: joining a user namespace
//! requires a single-threaded process.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::entry::SessionEntry;
use super::environ;

/// What `rebench sandbox-enter` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The jail's init (a host pid) whose namespaces to join; None: no jail.
    pub target: Option<i32>,
    /// The cgroup folders to join first (the session's, and in a split
    /// hierarchy the ones that hold its cores and memory).
    pub cgroups: Vec<PathBuf>,
    /// The container to run in instead (docker sessions).
    pub docker: Option<DockerTarget>,
    pub cwd: PathBuf,
    /// `KEY=VALUE` set after the scrub.
    pub env: Vec<OsString>,
    pub argv: Vec<OsString>,
}

/// A session's container: the command runs there through the engine's
/// exec API (see `enter_docker`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerTarget {
    pub endpoint: String,
    pub container: String,
    pub user: String,
}

/// Runs `launch` (`rebench sandbox-enter`); returns only with an error:
/// the command replaces this process, or in a jail this process waits for
/// it and exits as it did (dying of its signal).
pub fn launch(launch: &Launch) -> anyhow::Result<i32> {
    let Some(docker) = &launch.docker else {
        return launch_here(launch);
    };
    // Fail closed: a process that cannot be contained does not run.
    for cgroup in &launch.cgroups {
        let procs = cgroup.join("cgroup.procs");
        std::fs::write(&procs, "0")
            .with_context(|| format!("joining the session's cgroup ({})", procs.display()))?;
    }
    super::enter_docker::run(
        docker,
        &launch.cwd,
        &scrubbed_env(&launch.env)?,
        &launch.argv,
    )
}

/// A launch on this machine (`rebench-enter`, and `sandbox-enter` without
/// a container): the cgroup, the scrubbed environment, the jail
/// (`entry::SessionEntry`), then the command in this process's place.
pub fn launch_here(launch: &Launch) -> anyhow::Result<i32> {
    let Some((program, args)) = launch.argv.split_first() else {
        bail!("the launcher needs a command");
    };
    let env = scrubbed_env(&launch.env)?;
    let entry = SessionEntry::open(launch)?;
    entry.enter().context("entering the session")?;
    if !entry.sets_cwd() {
        std::env::set_current_dir(&launch.cwd)
            .with_context(|| format!("changing to {}", launch.cwd.display()))?;
    }
    let err = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(env)
        .exec();
    bail!("starting {}: {err}", program.to_string_lossy())
}

/// This process's allowlisted variables, then `extra` (`KEY=VALUE`).
fn scrubbed_env(extra: &[OsString]) -> anyhow::Result<Vec<(OsString, OsString)>> {
    scrub(std::env::vars_os(), extra)
}

/// The allowlisted variables among `vars` (`environ::is_kept_by_launcher`),
/// then `extra` (`KEY=VALUE`): a session process's whole environment.
pub fn scrub(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &[OsString],
) -> anyhow::Result<Vec<(OsString, OsString)>> {
    let mut vars: Vec<(OsString, OsString)> = vars
        .into_iter()
        .filter(|(name, _)| name.to_str().is_some_and(environ::is_kept_by_launcher))
        .collect();
    for pair in extra {
        let bytes = pair.as_encoded_bytes();
        let Some(eq) = bytes.iter().position(|b| *b == b'=').filter(|&i| i > 0) else {
            bail!("--env {}: expected KEY=VALUE", pair.to_string_lossy());
        };
        let (name, value) = (&bytes[..eq], &bytes[eq + 1..]);
        // SAFETY: both halves are split at an ASCII '=' of an OsStr's bytes.
        let (name, value) = unsafe {
            (
                OsStr::from_encoded_bytes_unchecked(name).to_os_string(),
                OsStr::from_encoded_bytes_unchecked(value).to_os_string(),
            )
        };
        vars.retain(|(n, _)| *n != name);
        vars.push((name, value));
    }
    Ok(vars)
}

/// The small launcher, installed beside `rebench`.
pub const ENTER_PROGRAM: &str = "rebench-enter";

/// The argv prefix that starts a command through the launcher:
/// `rebench-enter` beside `exe` (a small program, quick to start: every
/// command of an agent pays for it), else, and for a container (which
/// needs the engine's client), `exe sandbox-enter`.
pub fn prefix(exe: &Path, launch_opts: &Launch) -> Vec<String> {
    let small = exe.with_file_name(ENTER_PROGRAM);
    let mut argv = if launch_opts.docker.is_none() && small.is_file() {
        vec![small.display().to_string()]
    } else {
        vec![exe.display().to_string(), "sandbox-enter".to_string()]
    };
    if let Some(target) = launch_opts.target {
        argv.extend(["--target".to_string(), target.to_string()]);
    }
    for cgroup in &launch_opts.cgroups {
        argv.extend(["--cgroup".to_string(), cgroup.display().to_string()]);
    }
    if let Some(docker) = &launch_opts.docker {
        argv.extend([
            "--docker".to_string(),
            docker.endpoint.clone(),
            "--container".to_string(),
            docker.container.clone(),
            "--user".to_string(),
            docker.user.clone(),
        ]);
    }
    argv.extend(["--cwd".to_string(), launch_opts.cwd.display().to_string()]);
    for pair in &launch_opts.env {
        argv.extend(["--env".to_string(), pair.to_string_lossy().into_owned()]);
    }
    argv.push("--".to_string());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_names_every_option() {
        let launch = Launch {
            target: Some(77),
            cgroups: vec![
                PathBuf::from("/sys/fs/cgroup/rebench/x/s"),
                PathBuf::from("/sys/fs/cgroup/cpuset/rebench/x/s"),
            ],
            docker: None,
            cwd: PathBuf::from("/ws"),
            env: vec![OsString::from("REBENCH_SANDBOX=t")],
            argv: Vec::new(),
        };
        assert_eq!(
            prefix(Path::new("/bin/rebench"), &launch),
            [
                "/bin/rebench",
                "sandbox-enter",
                "--target",
                "77",
                "--cgroup",
                "/sys/fs/cgroup/rebench/x/s",
                "--cgroup",
                "/sys/fs/cgroup/cpuset/rebench/x/s",
                "--cwd",
                "/ws",
                "--env",
                "REBENCH_SANDBOX=t",
                "--"
            ]
        );
        let plain = Launch {
            target: None,
            cgroups: Vec::new(),
            docker: None,
            ..launch
        };
        assert_eq!(
            prefix(Path::new("/r"), &plain),
            [
                "/r",
                "sandbox-enter",
                "--cwd",
                "/ws",
                "--env",
                "REBENCH_SANDBOX=t",
                "--"
            ]
        );
    }

    #[test]
    fn the_small_launcher_beside_the_binary_is_preferred_but_not_for_containers() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("rebench");
        let launch = Launch {
            target: None,
            cgroups: Vec::new(),
            docker: None,
            cwd: PathBuf::from("/ws"),
            env: Vec::new(),
            argv: Vec::new(),
        };
        assert_eq!(
            prefix(&exe, &launch)[1],
            "sandbox-enter",
            "none beside it yet"
        );
        std::fs::write(dir.path().join(ENTER_PROGRAM), "").unwrap();
        let small = prefix(&exe, &launch);
        assert_eq!(
            small[0],
            dir.path().join(ENTER_PROGRAM).display().to_string()
        );
        assert_eq!(small[1..], ["--cwd", "/ws", "--"]);
        let docker = Launch {
            docker: Some(DockerTarget {
                endpoint: "unix:///d.sock".into(),
                container: "c".into(),
                user: "agent".into(),
            }),
            ..launch
        };
        assert_eq!(prefix(&exe, &docker)[1], "sandbox-enter");
    }

    #[test]
    fn extra_variables_must_be_key_value() {
        assert!(scrubbed_env(&[OsString::from("NOEQUALS")]).is_err());
        assert!(scrubbed_env(&[OsString::from("=x")]).is_err());
        let vars = scrubbed_env(&[OsString::from("A_B=c=d")]).unwrap();
        assert!(vars.contains(&(OsString::from("A_B"), OsString::from("c=d"))));
    }
}
