//! A session jail's namespaces, opened by host pid, and joining them: used
//! by `rebench sandbox-enter` and by a forked child entering the jail by
//! itself (`direct`). Joining makes system calls only (no allocation, no
//! locks), so that it is safe between fork and exec.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;

use anyhow::Context;

/// The namespaces of a jail's init, to join in this order.
pub struct JailNamespaces {
    /// The user namespace owning the mount and pid namespaces, when this
    /// process is not in it already.
    owner: Option<File>,
    mount: File,
    pid: File,
    /// The init's own user namespace, when bwrap nested it in the owner.
    inner_user: Option<File>,
    last_cap: u32,
}

impl JailNamespaces {
    /// Opens the namespaces of `target` (the jail's init, a host pid). Must
    /// run before any of them is joined: /proc changes meaning once the
    /// mount namespace does.
    pub fn open(target: i32) -> anyhow::Result<Self> {
        let open = |kind: &str| -> anyhow::Result<File> {
            let path = format!("/proc/{target}/ns/{kind}");
            File::open(&path)
                .with_context(|| format!("opening {path} (is the session's jail running?)"))
        };
        let inner_user = open("user")?;
        let mount = open("mnt")?;
        let pid = open("pid")?;
        // bwrap nests the init's user namespace inside the one that owns the
        // mount and pid namespaces (so nothing inside may remount): join the
        // owner to be allowed into those, then the init's own, like the init.
        // (Run by root, bwrap does not nest: then owner and init's are one.)
        let owner = owning_user_namespace(&pid)?;
        let own = File::open("/proc/self/ns/user").context("opening /proc/self/ns/user")?;
        let inner_user = (!same_namespace(&inner_user, &owner)).then_some(inner_user);
        // Re-joining the namespace one is in is an error.
        let owner = (!same_namespace(&owner, &own)).then_some(owner);
        Ok(Self {
            owner,
            mount,
            pid,
            inner_user,
            last_cap: last_capability(),
        })
    }

    /// Joins them and drops every capability (what this process execs has
    /// none, like the jail's init). The pid namespace applies to children
    /// only. Needs a single-threaded process.
    pub fn join(&self) -> io::Result<()> {
        if let Some(owner) = &self.owner {
            join(owner, libc::CLONE_NEWUSER)?;
        }
        join(&self.mount, libc::CLONE_NEWNS)?;
        join(&self.pid, libc::CLONE_NEWPID)?;
        if let Some(inner) = &self.inner_user {
            join(inner, libc::CLONE_NEWUSER)?;
        }
        drop_capabilities(self.last_cap)
    }
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
/// privileges, what the command execs has none.
fn drop_capabilities(last_cap: u32) -> io::Result<()> {
    for cap in 0..=last_cap {
        // SAFETY: prctl with PR_CAPBSET_DROP and a capability number.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            let err = io::Error::last_os_error();
            // EINVAL: a number this kernel does not have.
            if err.raw_os_error() != Some(libc::EINVAL) {
                return Err(err);
            }
        }
    }
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS and its required arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The user namespace that owns `ns` (ioctl NS_GET_USERNS).
fn owning_user_namespace(ns: &File) -> anyhow::Result<File> {
    const NS_GET_USERNS: libc::c_ulong = 0xb701; // _IO(0xb7, 0x1)
    // SAFETY: the ioctl takes a namespace fd and returns a new fd or -1.
    let fd = unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_USERNS as _) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        anyhow::bail!("finding the jail's user namespace: {err}");
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

fn join(ns: &File, kind: libc::c_int) -> io::Result<()> {
    // SAFETY: setns takes a valid open namespace fd and a namespace type.
    if unsafe { libc::setns(ns.as_raw_fd(), kind) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Dies of `signal` (default action), as a child did; exits 128 + signal
/// if that does not kill. Async-signal-safe.
pub fn die_of(signal: i32) -> ! {
    // SAFETY: resetting a handler to the default, raising a signal and
    // _exit are async-signal-safe calls with valid arguments.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
        libc::_exit(128 + signal)
    }
}
