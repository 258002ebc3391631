//! Finding a session's processes by their marker, and freezing, thawing and
//! killing them all.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::SessionMarker;
use super::procfs;
use super::sys::signal_process;

/// A fork racing a sweep is caught by the next one; this cap stops a fork
/// bomb from keeping us sweeping forever.
const MAX_FREEZE_SWEEPS: usize = 50;
/// How long one sweep waits for its SIGSTOPs to take effect before the next
/// sweep looks for children forked in the meantime.
const STOP_SETTLE: Duration = Duration::from_millis(200);
/// How long kill_all keeps sweeping for survivors.
const KILL_DEADLINE: Duration = Duration::from_secs(2);
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// How a session's processes are found when it has no cgroup.
#[derive(Debug, Clone)]
pub enum Members {
    /// Every process carrying the marker (one that drops it escapes).
    Marker(SessionMarker),
    /// Every process in the pid namespace of this jail init (none can leave).
    PidNamespace { init_pid: i32 },
}

impl Members {
    pub fn pids(&self) -> Vec<i32> {
        match self {
            Members::Marker(marker) => session_pids(marker),
            Members::PidNamespace { init_pid } => pid_namespace_pids(*init_pid),
        }
    }
}

/// Every live process in the pid namespace of `init_pid` (none when it is gone).
pub fn pid_namespace_pids(init_pid: i32) -> Vec<i32> {
    let Some(ns) = procfs::pid_namespace(init_pid) else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    let mut pids: Vec<i32> = procfs::all_pids()
        .into_iter()
        .filter(|pid| *pid != me)
        .filter(|pid| procfs::pid_namespace(*pid) == Some(ns))
        .filter(|pid| !matches!(procfs::state(*pid), None | Some('Z' | 'X')))
        .collect();
    pids.sort_unstable();
    pids
}

/// Every live process carrying exactly `key=value` in its environment,
/// except ourselves and zombies.
pub fn session_pids(marker: &SessionMarker) -> Vec<i32> {
    let entry = marker.environ_entry();
    let me = std::process::id() as i32;
    let mut pids: Vec<i32> = procfs::all_pids()
        .into_iter()
        .filter(|pid| *pid != me)
        .filter(|pid| procfs::environ_contains(*pid, &entry))
        .filter(|pid| !matches!(procfs::state(*pid), None | Some('Z' | 'X')))
        .collect();
    pids.sort_unstable();
    pids
}

/// True for the in-shell `rebench task ...` client: it must keep running
/// during a freeze, or `pause` typed in a shell would freeze its own client
/// before it gets the reply.
pub fn is_task_client(pid: i32) -> bool {
    let Some(own_exe) = procfs::own_exe_identity() else {
        return false;
    };
    if procfs::exe_identity(pid) != Some(own_exe) {
        return false;
    }
    procfs::cmdline(pid)
        .and_then(|argv| argv.get(1).map(|arg| arg.as_slice() == b"task"))
        .unwrap_or(false)
}

/// What a freeze signalled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FreezeReport {
    pub frozen: Vec<i32>,
}

/// SIGSTOPs the roots (the PTY shells) first, so they stop spawning, then
/// every other marked process except task clients, sweeping until a sweep
/// finds nothing new.
pub fn freeze(marker: &SessionMarker, roots: &[i32]) -> FreezeReport {
    freeze_members(&Members::Marker(marker.clone()), roots)
}

/// `freeze`, for the processes `members` finds.
pub fn freeze_members(members: &Members, roots: &[i32]) -> FreezeReport {
    let mut frozen: Vec<i32> = Vec::new();
    let mut seen: HashSet<i32> = HashSet::new();

    let stopped_roots = stop_all(roots.iter().copied(), &mut seen);
    wait_until_stopped(&stopped_roots);
    frozen.extend(stopped_roots);

    for _ in 0..MAX_FREEZE_SWEEPS {
        let candidates = members
            .pids()
            .into_iter()
            .filter(|pid| !seen.contains(pid))
            .collect::<Vec<_>>();
        let mut fresh = Vec::new();
        for pid in candidates {
            seen.insert(pid);
            if is_task_client(pid) {
                continue;
            }
            if signal_process(pid, libc::SIGSTOP) {
                fresh.push(pid);
            }
        }
        if fresh.is_empty() {
            break;
        }
        // A process that was running may fork before its stop lands; only
        // once it is really stopped can the next sweep be trusted to be final.
        wait_until_stopped(&fresh);
        frozen.extend(fresh);
    }

    frozen.sort_unstable();
    frozen.dedup();
    FreezeReport { frozen }
}

/// SIGCONTs every marked process, non-roots first and roots last, so an
/// interactive bash never observes its foreground job as stopped (it would
/// move the job to the background).
pub fn thaw(marker: &SessionMarker, roots: &[i32]) {
    thaw_members(&Members::Marker(marker.clone()), roots)
}

/// `thaw`, for the processes `members` finds.
pub fn thaw_members(members: &Members, roots: &[i32]) {
    for pid in members.pids() {
        if !roots.contains(&pid) {
            signal_process(pid, libc::SIGCONT);
        }
    }
    for &pid in roots {
        signal_process(pid, libc::SIGCONT);
    }
}

/// SIGKILLs every marked process (with SIGCONT too, in case it is stopped) and
/// repeats until none is left or about 2 s passed. Returns how many distinct
/// processes were signalled.
pub fn kill_all(marker: &SessionMarker) -> usize {
    kill_members(&Members::Marker(marker.clone()))
}

/// `kill_all`, for the processes `members` finds.
pub fn kill_members(members: &Members) -> usize {
    let mut signalled: HashSet<i32> = HashSet::new();
    let deadline = Instant::now() + KILL_DEADLINE;
    loop {
        let pids = members.pids();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            // SIGKILL first so a stopped process cannot run again before it dies.
            if signal_process(pid, libc::SIGKILL) {
                signalled.insert(pid);
            }
            signal_process(pid, libc::SIGCONT);
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    signalled.len()
}

/// The state letter from `/proc/<pid>/stat` ('R', 'S', 'T', 'Z', ...), or
/// None when the process does not exist.
pub fn process_state(pid: i32) -> Option<char> {
    procfs::state(pid)
}

fn stop_all(pids: impl Iterator<Item = i32>, seen: &mut HashSet<i32>) -> Vec<i32> {
    let mut stopped = Vec::new();
    for pid in pids {
        if seen.insert(pid) && signal_process(pid, libc::SIGSTOP) {
            stopped.push(pid);
        }
    }
    stopped
}

/// Waits (bounded) until every pid is stopped, dead or gone.
fn wait_until_stopped(pids: &[i32]) {
    let deadline = Instant::now() + STOP_SETTLE;
    while Instant::now() < deadline {
        let all_settled = pids
            .iter()
            .all(|pid| matches!(process_state(*pid), None | Some('T' | 't' | 'Z' | 'X')));
        if all_settled {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_never_a_session_pid() {
        let (key, value) = ("REBENCH_SANDBOX_UNIT", "never-set-anywhere");
        let marker = SessionMarker {
            key: key.into(),
            value: value.into(),
        };
        assert!(session_pids(&marker).is_empty());
    }

    #[test]
    fn test_binary_is_not_a_task_client() {
        assert!(!is_task_client(std::process::id() as i32));
        assert!(!is_task_client(1 << 23));
    }

    #[test]
    fn empty_session_freezes_nothing() {
        let marker = SessionMarker::new("unit-empty-session");
        assert_eq!(freeze(&marker, &[]).frozen, Vec::<i32>::new());
        thaw(&marker, &[]);
        assert_eq!(kill_all(&marker), 0);
    }
}
