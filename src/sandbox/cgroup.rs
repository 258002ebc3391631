//! A cgroup per session, and one per scoring run: what pausing freezes and
//! ending kills. A process cannot leave its cgroup without write access to
//! the cgroup tree, which nothing in a jail has (the tree is read-only there
//! and capabilities are dropped), so `setsid env -i …` is frozen and killed
//! like everything else.
//!
//! cgroup v2 (`cgroup.freeze`, `cgroup.kill`) is used where this process may
//! create groups, else the v1 freezer; without either, sessions fall back to
//! the jail's pid namespace or the session marker (`containment` in the
//! session view says which). `REBENCH_CGROUPS=off` turns cgroups off (tests
//! of the fallbacks).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::sys::signal_process;

/// Set to `off` to run without cgroups.
pub const CGROUPS_VAR: &str = "REBENCH_CGROUPS";
/// How long a freeze or a kill may take before it is reported as failed.
const SETTLE: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    /// The unified hierarchy: `cgroup.freeze`, `cgroup.kill`, `cgroup.events`.
    V2,
    /// The v1 freezer hierarchy: `freezer.state`.
    V1Freezer,
}

/// The folder under which this server makes its groups:
/// `<hierarchy>/rebench/<server namespace>`.
#[derive(Debug, Clone)]
pub struct CgroupRoot {
    version: Version,
    dir: PathBuf,
}

impl CgroupRoot {
    /// A hierarchy this process may make groups in, with `namespace` (unique
    /// per data dir) as its folder; None where none is usable.
    pub fn detect(namespace: &str) -> Option<CgroupRoot> {
        if std::env::var(CGROUPS_VAR).is_ok_and(|v| v == "off") {
            return None;
        }
        let base = Path::new("/sys/fs/cgroup");
        let candidates = [
            (Version::V2, base.to_path_buf()),
            (Version::V2, base.join("unified")),
            (Version::V1Freezer, base.join("freezer")),
        ];
        candidates.into_iter().find_map(|(version, hierarchy)| {
            let marker_file = match version {
                Version::V2 => "cgroup.controllers",
                Version::V1Freezer => "freezer.state",
            };
            // The v1 root has no freezer.state; a v1 hierarchy is known by its tasks file.
            let present = match version {
                Version::V2 => hierarchy.join(marker_file).exists(),
                Version::V1Freezer => hierarchy.join("tasks").exists(),
            };
            if !present {
                return None;
            }
            let root = CgroupRoot {
                version,
                dir: hierarchy.join("rebench").join(namespace),
            };
            root.usable().then_some(root)
        })
    }

    /// Whether groups can be made here and frozen (a probe group, removed again).
    fn usable(&self) -> bool {
        let probe = self.dir.join(format!("probe-{}", std::process::id()));
        if std::fs::create_dir_all(&probe).is_err() {
            return false;
        }
        let group = Cgroup {
            version: self.version,
            dir: probe,
        };
        let ok = group.control_file().exists() && writable(&group.procs_file());
        let _ = std::fs::remove_dir(&group.dir);
        ok
    }

    /// The group `name` (made if need be).
    pub fn group(&self, name: &str) -> anyhow::Result<Cgroup> {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating cgroup {}", dir.display()))?;
        Ok(Cgroup {
            version: self.version,
            dir,
        })
    }

    /// Kills what every group under this root holds and removes them all:
    /// a server that will not come back (a test's, a benchmark's) leaves
    /// its paused sessions frozen, waiting for it.
    pub fn remove_all(&self) {
        remove_tree(self.version, &self.dir);
    }

    /// The v2 hierarchy these groups are in (None for the v1 freezer):
    /// where cgroup v2 limits are set on the same groups.
    pub fn unified_hierarchy(&self) -> Option<&Path> {
        match self.version {
            Version::V2 => self.dir.parent()?.parent(),
            Version::V1Freezer => None,
        }
    }

    /// The group `name` if it exists (left by an earlier run of the server).
    pub fn existing(&self, name: &str) -> Option<Cgroup> {
        let dir = self.dir.join(name);
        dir.is_dir().then_some(Cgroup {
            version: self.version,
            dir,
        })
    }
}

/// One cgroup: a session's processes, or one scoring run's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    version: Version,
    dir: PathBuf,
}

impl Cgroup {
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writing a pid (or `0`, the writer itself) here moves that process in.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    fn control_file(&self) -> PathBuf {
        match self.version {
            Version::V2 => self.dir.join("cgroup.freeze"),
            Version::V1Freezer => self.dir.join("freezer.state"),
        }
    }

    /// Moves `pid` into this group.
    pub fn add(&self, pid: i32) -> anyhow::Result<()> {
        write_file(&self.procs_file(), &pid.to_string())
    }

    /// The live processes in the group.
    pub fn pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = std::fs::read_to_string(self.procs_file())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Freezes every process in the group (and any it starts from now on),
    /// waiting until the kernel reports the group frozen.
    pub fn freeze(&self) -> anyhow::Result<()> {
        match self.version {
            Version::V2 => write_file(&self.control_file(), "1")?,
            Version::V1Freezer => write_file(&self.control_file(), "FROZEN")?,
        }
        let deadline = Instant::now() + SETTLE;
        while !self.is_frozen() {
            if Instant::now() >= deadline {
                bail!(
                    "cgroup {} did not freeze within {SETTLE:?}",
                    self.dir.display()
                );
            }
            std::thread::sleep(POLL);
        }
        Ok(())
    }

    /// Whether the kernel reports the whole group frozen.
    pub fn is_frozen(&self) -> bool {
        match self.version {
            Version::V2 => std::fs::read_to_string(self.dir.join("cgroup.events"))
                .is_ok_and(|events| events.lines().any(|l| l.trim() == "frozen 1")),
            Version::V1Freezer => std::fs::read_to_string(self.control_file())
                .is_ok_and(|state| state.trim() == "FROZEN"),
        }
    }

    pub fn thaw(&self) -> anyhow::Result<()> {
        match self.version {
            Version::V2 => write_file(&self.control_file(), "0"),
            Version::V1Freezer => write_file(&self.control_file(), "THAWED"),
        }
    }

    /// Kills every process in the group and waits (bounded) until it is
    /// empty. Returns how many were signalled.
    pub fn kill_all(&self) -> usize {
        let before = self.pids().len();
        // cgroup.kill (Linux 5.14) kills atomically, forks included; without
        // it, freeze first so nothing forks between the sweeps.
        let atomic = self.version == Version::V2
            && self.dir.join("cgroup.kill").exists()
            && write_file(&self.dir.join("cgroup.kill"), "1").is_ok();
        let deadline = Instant::now() + SETTLE;
        if !atomic {
            let _ = self.freeze();
        }
        loop {
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            if !atomic {
                for &pid in &pids {
                    signal_process(pid, libc::SIGKILL);
                }
                // A frozen process dies of SIGKILL only once thawed.
                let _ = self.thaw();
            }
            if Instant::now() >= deadline {
                tracing::warn!(cgroup = %self.dir.display(), left = pids.len(), "processes survived a kill");
                break;
            }
            std::thread::sleep(POLL);
        }
        before
    }

    /// Kills what is left and removes the group.
    pub fn remove(&self) {
        self.kill_all();
        let _ = self.thaw();
        if let Err(e) = std::fs::remove_dir(&self.dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(cgroup = %self.dir.display(), "could not remove the cgroup: {e}");
        }
    }
}

/// `dir`'s groups, innermost first, then `dir` itself.
fn remove_tree(version: Version, dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(version, &entry.path());
            }
        }
    }
    Cgroup {
        version,
        dir: dir.to_path_buf(),
    }
    .remove();
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing {text:?} to {}", path.display()))
}

fn writable(path: &Path) -> bool {
    std::fs::OpenOptions::new().write(true).open(path).is_ok()
}

/// A short, stable name for a data dir: the cgroup namespace of its server,
/// so that two servers on one machine never touch each other's groups.
pub fn namespace_for(data_dir: &Path) -> String {
    use sha2::Digest;
    let canonical = data_dir
        .canonicalize()
        .unwrap_or_else(|_| data_dir.to_path_buf());
    let digest = sha2::Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_differ_per_data_dir_and_are_stable() {
        let a = namespace_for(Path::new("/nonexistent/a"));
        assert_eq!(a, namespace_for(Path::new("/nonexistent/a")));
        assert_ne!(a, namespace_for(Path::new("/nonexistent/b")));
        assert_eq!(a.len(), 16);
    }
}
