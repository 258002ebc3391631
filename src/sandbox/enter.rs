//! `rebench sandbox-enter`: joins a session jail's namespaces (user, mount,
//! pid) and runs a command there, as a child whose exit it passes on. Every
//! shell and command of an isolated session starts this way, so they all
//! share one pid namespace (they see each other, background jobs outlive
//! the command that started them) and one view of the filesystem.
//!
//! It must run before any thread is started: joining a user namespace
//! requires a single-threaded process.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use anyhow::{Context, bail};

/// Joins the namespaces of `target` (the jail's init, a host pid), moves to
/// `cwd` and runs `argv`; returns the exit code to exit with. A child killed
/// by a signal makes this process die of the same signal.
pub fn enter_and_run(target: i32, cwd: &Path, argv: &[OsString]) -> anyhow::Result<i32> {
    let Some((program, args)) = argv.split_first() else {
        bail!("sandbox-enter needs a command");
    };
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
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .with_context(|| format!("starting {} inside the jail", program.to_string_lossy()))?;
    if let Some(signal) = status.signal() {
        die_of(signal);
    }
    Ok(status.code().unwrap_or(1))
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
