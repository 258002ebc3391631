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
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::environ;

/// What `rebench sandbox-enter` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The jail's init (a host pid) whose namespaces to join; None: no jail.
    pub target: Option<i32>,
    /// The cgroup folder to join first.
    pub cgroup: Option<PathBuf>,
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

/// Runs `launch`; returns the exit code to exit with (only in a jail: else
/// the command replaces this process). A child killed by a signal makes
/// this process die of the same signal.
pub fn launch(launch: &Launch) -> anyhow::Result<i32> {
    let Some((program, args)) = launch.argv.split_first() else {
        bail!("sandbox-enter needs a command");
    };
    // Fail closed: a process that cannot be contained does not run.
    if let Some(cgroup) = &launch.cgroup {
        let procs = cgroup.join("cgroup.procs");
        std::fs::write(&procs, "0")
            .with_context(|| format!("joining the session's cgroup ({})", procs.display()))?;
    }
    if let Some(docker) = &launch.docker {
        return super::enter_docker::run(
            docker,
            &launch.cwd,
            &scrubbed_env(&launch.env)?,
            &launch.argv,
        );
    }
    let mut command = std::process::Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(scrubbed_env(&launch.env)?);
    match launch.target {
        None => {
            command.current_dir(&launch.cwd);
            let err = command.exec();
            bail!("starting {}: {err}", program.to_string_lossy())
        }
        Some(target) => enter_jail(target, &launch.cwd, command),
    }
}

/// This process's allowlisted variables, then `extra` (`KEY=VALUE`).
fn scrubbed_env(extra: &[OsString]) -> anyhow::Result<Vec<(OsString, OsString)>> {
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
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

/// Joins the namespaces of `target` (the jail's init, a host pid), moves to
/// `cwd` and runs `command` there as a child; returns its exit code.
fn enter_jail(target: i32, cwd: &Path, mut command: std::process::Command) -> anyhow::Result<i32> {
    // Opened before any setns: /proc changes meaning once the mount
    // namespace does.
    let open = |kind: &str| -> anyhow::Result<File> {
        let path = format!("/proc/{target}/ns/{kind}");
        File::open(&path)
            .with_context(|| format!("opening {path} (is the session's jail running?)"))
    };
    let last_cap = last_capability();
    let inner_user = open("user")?;
    let mount = open("mnt")?;
    let pid = open("pid")?;
    // bwrap nests the init's user namespace inside the one that owns the
    // mount and pid namespaces (so nothing inside may remount): join the
    // owner to be allowed into those, then the init's own, like the init.
    // (Run by root, bwrap does not nest: then owner and init's are one.)
    let owner = owning_user_namespace(&pid)?;
    let own = File::open("/proc/self/ns/user").context("opening /proc/self/ns/user")?;
    // Re-joining the namespace one is in is an error.
    if !same_namespace(&owner, &own) {
        join(&owner, libc::CLONE_NEWUSER, "user")?;
    }
    join(&mount, libc::CLONE_NEWNS, "mount")?;
    join(&pid, libc::CLONE_NEWPID, "pid")?;
    if !same_namespace(&inner_user, &owner) {
        join(&inner_user, libc::CLONE_NEWUSER, "user")?;
    }
    drop_capabilities(last_cap)?;
    std::env::set_current_dir(cwd)
        .with_context(|| format!("changing to {} inside the jail", cwd.display()))?;
    // The pid namespace applies to children only: the command is one.
    let program = command.get_program().to_string_lossy().into_owned();
    let status = command
        .status()
        .with_context(|| format!("starting {program} inside the jail"))?;
    if let Some(signal) = status.signal() {
        die_of(signal);
    }
    Ok(status.code().unwrap_or(1))
}

/// The argv prefix that starts a command through `rebench sandbox-enter`.
pub fn prefix(exe: &Path, launch_opts: &Launch) -> Vec<String> {
    let mut argv = vec![exe.display().to_string(), "sandbox-enter".to_string()];
    if let Some(target) = launch_opts.target {
        argv.extend(["--target".to_string(), target.to_string()]);
    }
    if let Some(cgroup) = &launch_opts.cgroup {
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

/// The highest capability number this kernel knows.
fn last_capability() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

/// Joining a user namespace grants every capability in it; a command run
/// as uid 0 (a server run by root) would keep them and could, say, unmount
/// what hides the data dir. With an empty bounding set and no new
/// privileges, what the command execs has none, like the jail's init.
fn drop_capabilities(last_cap: u32) -> anyhow::Result<()> {
    for cap in 0..=last_cap {
        // SAFETY: prctl with PR_CAPBSET_DROP and a capability number.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            let err = std::io::Error::last_os_error();
            // EINVAL: a number this kernel does not have.
            if err.raw_os_error() != Some(libc::EINVAL) {
                bail!("dropping capability {cap} inside the jail: {err}");
            }
        }
    }
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS and its required arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        let err = std::io::Error::last_os_error();
        bail!("setting no_new_privs inside the jail: {err}");
    }
    Ok(())
}

/// The user namespace that owns `ns` (ioctl NS_GET_USERNS).
fn owning_user_namespace(ns: &File) -> anyhow::Result<File> {
    const NS_GET_USERNS: libc::c_ulong = 0xb701; // _IO(0xb7, 0x1)
    // SAFETY: the ioctl takes a namespace fd and returns a new fd or -1.
    let fd = unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_USERNS as _) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        bail!("finding the jail's user namespace: {err}");
    }
    // SAFETY: fd is a freshly returned, owned file descriptor.
    Ok(unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

fn same_namespace(ns: &File, other: &File) -> bool {
    match (ns.metadata(), other.metadata()) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    }
}

fn join(ns: &File, kind: libc::c_int, name: &str) -> anyhow::Result<()> {
    // SAFETY: setns takes a valid open namespace fd and a namespace type.
    if unsafe { libc::setns(ns.as_raw_fd(), kind) } != 0 {
        let err = std::io::Error::last_os_error();
        bail!("joining the jail's {name} namespace: {err}");
    }
    Ok(())
}

/// Dies of `signal` (default action), as the command did.
fn die_of(signal: i32) -> ! {
    // SAFETY: resetting a handler to the default and raising a signal are
    // async-signal-safe calls with valid arguments.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
    std::process::exit(128 + signal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_names_every_option() {
        let launch = Launch {
            target: Some(77),
            cgroup: Some(PathBuf::from("/sys/fs/cgroup/rebench/x/s")),
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
                "--cwd",
                "/ws",
                "--env",
                "REBENCH_SANDBOX=t",
                "--"
            ]
        );
        let plain = Launch {
            target: None,
            cgroup: None,
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
    fn extra_variables_must_be_key_value() {
        assert!(scrubbed_env(&[OsString::from("NOEQUALS")]).is_err());
        assert!(scrubbed_env(&[OsString::from("=x")]).is_err());
        let vars = scrubbed_env(&[OsString::from("A_B=c=d")]).unwrap();
        assert!(vars.contains(&(OsString::from("A_B"), OsString::from("c=d"))));
    }
}
