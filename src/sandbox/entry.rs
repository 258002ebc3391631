//! Entering a session, as the launcher (`rebench-enter`, `rebench
//! sandbox-enter`) does before it execs the command: join the session's
//! cgroup and, for a jail, its namespaces. Everything is opened first;
//! entering makes system calls only (no allocation, no locks), so it would
//! also be safe between fork and exec.
//!
//! A pid namespace applies to children only, so in a jail the launcher
//! forks once more: the child execs the command inside the jail, and the
//! launcher waits for it and exits as it did.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;

use anyhow::Context;

use super::enter::Launch;
use super::namespaces::{JailNamespaces, die_of};

/// A launch, opened and ready to enter from a forked child.
pub struct SessionEntry {
    cgroup_procs: Vec<File>,
    jail: Option<(JailNamespaces, CString)>,
}

impl SessionEntry {
    /// Opens what `launch` names (its `env` and `argv` are the caller's to
    /// apply). Fails closed: a process that could not be contained does not
    /// start.
    pub fn open(launch: &Launch) -> anyhow::Result<Self> {
        let cgroup_procs = launch
            .cgroups
            .iter()
            .map(|group| {
                let procs = group.join("cgroup.procs");
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&procs)
                    .with_context(|| format!("joining the session's cgroup ({})", procs.display()))
            })
            .collect::<anyhow::Result<Vec<File>>>()?;
        let jail = launch
            .target
            .map(|target| -> anyhow::Result<_> {
                let cwd = CString::new(launch.cwd.as_os_str().as_bytes())
                    .context("a working directory with a NUL byte")?;
                Ok((JailNamespaces::open(target)?, cwd))
            })
            .transpose()?;
        Ok(Self { cgroup_procs, jail })
    }

    /// Whether `enter` changes to the working directory (inside the jail's
    /// mount namespace); else that is the caller's to do.
    pub fn sets_cwd(&self) -> bool {
        self.jail.is_some()
    }

    /// Joins the cgroup, then the jail (its namespaces, no capabilities,
    /// its working directory, and the extra fork). Returns in the process
    /// that is to exec the command.
    pub fn enter(&self) -> io::Result<()> {
        for procs in &self.cgroup_procs {
            // "0": the writing process itself.
            (&*procs).write_all(b"0")?;
        }
        if let Some((namespaces, cwd)) = &self.jail {
            namespaces.join()?;
            // SAFETY: chdir with a valid NUL-terminated path.
            if unsafe { libc::chdir(cwd.as_ptr()) } != 0 {
                return Err(io::Error::last_os_error());
            }
            fork_and_pass_on_exit()?;
        }
        // Nothing the server inherited without close-on-exec (from whoever
        // started it) reaches the command: only its stdio.
        close_on_exec_from(3);
        Ok(())
    }
}

/// Forks; the child returns (to exec), this process waits for it and exits
/// as it did. Async-signal-safe.
fn fork_and_pass_on_exit() -> io::Result<()> {
    // SAFETY: fork in a single-threaded process (a fresh child).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        return Ok(());
    }
    // Nothing here needs more than stdio, and whoever started this process
    // may wait for the command's close-on-exec descriptors to close.
    close_descriptors_from(3);
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child with a valid status pointer.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        if waited == pid {
            break;
        }
        if waited < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(1) }
        }
    }
    if libc::WIFSIGNALED(status) {
        die_of(libc::WTERMSIG(status));
    }
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(libc::WEXITSTATUS(status)) }
}

fn close_descriptors_from(first: u32) {
    // SAFETY: close_range takes a descriptor range and flags.
    let closed = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0) };
    if closed != 0 {
        // Kernels before 5.9: one by one.
        for fd in first..4096 {
            // SAFETY: closing a descriptor number (EBADF if unused).
            unsafe { libc::close(fd as i32) };
        }
    }
}

/// Marks every descriptor from `first` on close-on-exec (Linux 5.11+;
/// older kernels leave them as they are).
fn close_on_exec_from(first: u32) {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range takes a descriptor range and flags.
    unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, CLOSE_RANGE_CLOEXEC) };
}
