//! Reading the few `/proc` files the sandbox needs. Every reader returns
//! `None` when the process vanished or is unreadable: processes come and go
//! while we scan, and that is normal, not an error.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

fn proc_path(pid: i32, file: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/{file}"))
}

/// Every pid currently listed in `/proc` (thread-group leaders only, which is
/// what signals target).
pub(crate) fn all_pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid > 0)
        .collect()
}

/// Whether the process's environment holds exactly `entry` (`key=value`).
pub(crate) fn environ_contains(pid: i32, entry: &[u8]) -> bool {
    match std::fs::read(proc_path(pid, "environ")) {
        Ok(environ) => environ.split(|b| *b == 0).any(|item| item == entry),
        Err(_) => false,
    }
}

/// The state letter from `/proc/<pid>/stat`.
pub(crate) fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read(proc_path(pid, "stat")).ok()?;
    parse_stat_state(&stat)
}

/// `pid (comm) S ...`: comm may hold spaces and parentheses, so the state is
/// the first field after the LAST ')'.
fn parse_stat_state(stat: &[u8]) -> Option<char> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = stat.get(close + 1..)?;
    rest.iter()
        .find(|b| !b.is_ascii_whitespace())
        .map(|b| char::from(*b))
}

/// The process's argv, split at NULs.
pub(crate) fn cmdline(pid: i32) -> Option<Vec<Vec<u8>>> {
    let raw = std::fs::read(proc_path(pid, "cmdline")).ok()?;
    let trimmed = raw.strip_suffix(&[0]).unwrap_or(&raw);
    Some(trimmed.split(|b| *b == 0).map(<[u8]>::to_vec).collect())
}

/// `(device, inode)` of the process's executable, to compare binaries without
/// trusting paths (a rebuilt binary shows up as "(deleted)").
pub(crate) fn exe_identity(pid: i32) -> Option<(u64, u64)> {
    let meta = std::fs::metadata(proc_path(pid, "exe")).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// `(device, inode)` of our own executable.
pub(crate) fn own_exe_identity() -> Option<(u64, u64)> {
    let meta = std::fs::metadata("/proc/self/exe")
        .or_else(|_| std::env::current_exe().and_then(std::fs::metadata))
        .ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The identity (device, inode) of the pid namespace `pid` is in.
pub(crate) fn pid_namespace(pid: i32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(proc_path(pid, "ns/pid")).ok()?;
    Some((meta.dev(), meta.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_state_after_last_paren() {
        assert_eq!(parse_stat_state(b"42 (bash) S 1 42 42"), Some('S'));
        assert_eq!(parse_stat_state(b"42 (a) b) (c) T 1 2"), Some('T'));
        assert_eq!(parse_stat_state(b"42 (x y z) Z 1"), Some('Z'));
        assert_eq!(parse_stat_state(b"garbage"), None);
        assert_eq!(parse_stat_state(b"42 (x)"), None);
    }

    #[test]
    fn reads_our_own_process() {
        let me = std::process::id() as i32;
        assert!(all_pids().contains(&me));
        // The main thread may be sleeping while this test thread runs.
        assert!(state(me).is_some());
        let argv = cmdline(me).unwrap();
        assert!(!argv.is_empty());
        assert_eq!(exe_identity(me), own_exe_identity());
        assert!(own_exe_identity().is_some());
    }

    #[test]
    fn vanished_process_reads_as_none() {
        // pid_max is at most 2^22, so this pid never exists.
        let ghost = 1 << 23;
        assert_eq!(state(ghost), None);
        assert_eq!(cmdline(ghost), None);
        assert!(!environ_contains(ghost, b"A=B"));
    }
}
