//! Tiny safe wrappers around the libc calls the sandbox needs.
//!
//! Every wrapper refuses pids <= 0: `kill(0, ..)` would signal our own process
//! group and `kill(-1, ..)` every process we may signal, which would take the
//! server down with the session.

/// Sends `signal` to one process. Returns true when the kernel accepted it.
pub(crate) fn signal_process(pid: i32, signal: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill() has no memory-safety preconditions; pid > 0 targets exactly one process.
    unsafe { libc::kill(pid, signal) == 0 }
}

/// Sends `signal` to every member of process group `pgid`. Returns true when accepted.
pub(crate) fn signal_group(pgid: i32, signal: i32) -> bool {
    if pgid <= 1 || pgid == own_process_group() {
        return false;
    }
    // SAFETY: killpg() has no memory-safety preconditions; pgid > 1 and is not our own group.
    unsafe { libc::killpg(pgid, signal) == 0 }
}

/// Our own process group, so we never signal it by accident.
pub(crate) fn own_process_group() -> i32 {
    // SAFETY: getpgrp() cannot fail and touches no memory.
    unsafe { libc::getpgrp() }
}

/// How a reaped child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitStatus {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// The result of asking whether a child has exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reap {
    Running,
    Exited(WaitStatus),
    /// Not our child (any more): someone else reaped it.
    NotOurs,
}

/// Reaps `pid` if it has exited, without blocking.
pub(crate) fn reap_nohang(pid: i32) -> Reap {
    waitpid(pid, libc::WNOHANG)
}

/// Reaps `pid`, blocking until it exits.
pub(crate) fn reap_blocking(pid: i32) -> Reap {
    waitpid(pid, 0)
}

/// Blocks until `pid` has exited, leaving it to be reaped (a zombie keeps
/// its pid, so nobody signals a stranger that got it). False when `pid` is
/// not our child.
pub(crate) fn wait_exited(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is valid and writable; P_PID waits for exactly that child.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            return true;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

fn waitpid(pid: i32, flags: i32) -> Reap {
    if pid <= 0 {
        return Reap::NotOurs;
    }
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid, writable c_int for the duration of the call;
        // pid > 0 waits for exactly that child.
        let rc = unsafe { libc::waitpid(pid, &mut status, flags) };
        if rc == 0 {
            return Reap::Running;
        }
        if rc == pid {
            return Reap::Exited(decode_status(status));
        }
        if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return Reap::NotOurs;
    }
}

fn decode_status(status: libc::c_int) -> WaitStatus {
    if libc::WIFEXITED(status) {
        WaitStatus {
            code: Some(libc::WEXITSTATUS(status)),
            signal: None,
        }
    } else if libc::WIFSIGNALED(status) {
        WaitStatus {
            code: None,
            signal: Some(libc::WTERMSIG(status)),
        }
    } else {
        WaitStatus {
            code: None,
            signal: None,
        }
    }
}

/// Makes `fd` non-blocking (`on`) or blocking; every descriptor sharing its
/// open file description sees the change.
pub(crate) fn set_nonblocking(fd: std::os::fd::BorrowedFd<'_>, on: bool) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor the caller holds, with integer arguments only.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let flags = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_dangerous_pids() {
        assert!(!signal_process(0, 0));
        assert!(!signal_process(-1, 0));
        assert!(!signal_group(0, 0));
        assert!(!signal_group(1, 0));
        assert!(!signal_group(own_process_group(), 0));
    }

    #[test]
    fn signal_zero_probes_our_own_process() {
        assert!(signal_process(std::process::id() as i32, 0));
    }

    #[test]
    #[allow(clippy::zombie_processes, reason = "reap_blocking does the wait")]
    fn reaps_an_exited_child() {
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert_eq!(
            reap_blocking(pid),
            Reap::Exited(WaitStatus {
                code: Some(3),
                signal: None
            })
        );
        assert_eq!(reap_nohang(pid), Reap::NotOurs);
    }

    #[test]
    #[allow(clippy::zombie_processes, reason = "reap_blocking does the wait")]
    fn waiting_for_an_exit_leaves_the_child_to_reap() {
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 4"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(wait_exited(pid));
        assert!(wait_exited(pid), "still there: not reaped");
        assert_eq!(
            reap_nohang(pid),
            Reap::Exited(WaitStatus {
                code: Some(4),
                signal: None
            })
        );
        assert!(!wait_exited(pid), "reaped: no longer our child");
    }
}
