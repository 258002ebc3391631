//! What holds a session to its grant on this machine: its cores
//! (`cpuset`), its memory (`memory`) and, where cores are shared, its
//! weight (`cpu`). With cgroup v2 the controllers are enabled on the
//! server's own groups and written on the session's group itself; on a
//! machine with the v1 controllers mounted apart (a hybrid hierarchy),
//! each session gets a group in each, which every one of its processes
//! joins beside its freezer group (`enter`, `jail`, the scorer).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::hardware::DeviceGrant;

/// What one group is held to.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// A cpuset list (`2-3`); empty: any core.
    pub cpus: String,
    pub memory_bytes: Option<u64>,
    /// Relative CPU weight where cores are shared (None: not shared).
    pub cpu_weight: Option<u32>,
}

impl Limits {
    /// A session's processes: all of its grant.
    pub fn of_session(grant: &DeviceGrant) -> Limits {
        Limits {
            cpus: grant.cpu_list(),
            memory_bytes: grant.memory_bytes(),
            cpu_weight: grant.shared_cpus.then_some(grant.cpu_weight.max(1)),
        }
    }

    /// A scoring run: the session's cores (its timing runs there, alone
    /// for a timed environment), not its memory (the scorer is not the
    /// participant's to pay for; the participant code it starts joins the
    /// session's memory group).
    pub fn of_scorer(grant: &DeviceGrant) -> Limits {
        Limits {
            cpus: grant.cpu_list(),
            memory_bytes: None,
            cpu_weight: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.cpus.is_empty() && self.memory_bytes.is_none() && self.cpu_weight.is_none()
    }
}

/// Where this server makes limit groups.
#[derive(Debug, Clone)]
pub enum LimitRoot {
    /// cgroup v2: limits are written on the freezer groups themselves,
    /// under `dir` (`<hierarchy>/rebench/<namespace>`).
    Unified { hierarchy: PathBuf, dir: PathBuf },
    /// The v1 controllers, each `<mount>/rebench/<namespace>` (None: not mounted).
    Split {
        cpuset: Option<PathBuf>,
        memory: Option<PathBuf>,
        cpu: Option<PathBuf>,
    },
}

/// A session's (or a scoring run's) limit groups, once made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LimitGroup {
    /// Folders a process joins (writing its pid to `cgroup.procs`) to be
    /// held: empty where the limits are on the freezer group itself.
    pub join: Vec<PathBuf>,
    /// Where an out-of-memory kill is counted (`memory.events` in v2,
    /// `memory.oom_control` in v1).
    pub oom_file: Option<PathBuf>,
}

impl LimitRoot {
    /// The limit groups this machine allows, for a server whose freezer
    /// groups are under `freezer_dir` (`CgroupRoot`'s folder) in a v2
    /// hierarchy `unified` (None: the freezer is v1, or there are none).
    pub fn detect(namespace: &str, unified: Option<&Path>) -> Option<LimitRoot> {
        if let Some(hierarchy) = unified {
            let controllers =
                std::fs::read_to_string(hierarchy.join("cgroup.controllers")).unwrap_or_default();
            if ["cpuset", "memory"]
                .iter()
                .all(|c| controllers.split_whitespace().any(|have| have == *c))
            {
                return Some(LimitRoot::Unified {
                    hierarchy: hierarchy.to_path_buf(),
                    dir: hierarchy.join("rebench").join(namespace),
                });
            }
        }
        let base = Path::new("/sys/fs/cgroup");
        let mounted = |controller: &str, probe: &str| {
            let mount = base.join(controller);
            mount
                .join(probe)
                .exists()
                .then(|| mount.join("rebench").join(namespace))
        };
        let split = LimitRoot::Split {
            cpuset: mounted("cpuset", "cpuset.cpus"),
            memory: mounted("memory", "memory.limit_in_bytes"),
            cpu: mounted("cpu", "cpu.shares"),
        };
        match &split {
            LimitRoot::Split {
                cpuset: None,
                memory: None,
                ..
            } => None,
            _ => Some(split),
        }
    }

    /// Makes (or updates) the group `name` held to `limits`. Fails closed:
    /// a session whose limits cannot be set does not start.
    pub fn apply(&self, name: &str, limits: &Limits) -> anyhow::Result<LimitGroup> {
        if limits.is_empty() {
            return Ok(LimitGroup::default());
        }
        match self {
            LimitRoot::Unified { hierarchy, dir } => apply_unified(hierarchy, dir, name, limits),
            LimitRoot::Split {
                cpuset,
                memory,
                cpu,
            } => apply_split(cpuset, memory, cpu, name, limits),
        }
    }

    /// Removes the groups of `name` (their processes are gone by then).
    pub fn remove(&self, name: &str) {
        let dirs: Vec<PathBuf> = match self {
            LimitRoot::Unified { .. } => Vec::new(),
            LimitRoot::Split {
                cpuset,
                memory,
                cpu,
            } => [cpuset, memory, cpu]
                .into_iter()
                .flatten()
                .map(|d| d.join(name))
                .collect(),
        };
        for dir in dirs.iter().filter(|d| d.is_dir()) {
            if let Err(e) = std::fs::remove_dir(dir) {
                tracing::warn!(cgroup = %dir.display(), "could not remove a limit group: {e}");
            }
        }
    }
}

fn apply_unified(
    hierarchy: &Path,
    dir: &Path,
    name: &str,
    limits: &Limits,
) -> anyhow::Result<LimitGroup> {
    // Every group from the hierarchy's root down to the server's folder
    // hands the controllers on to its children.
    let mut ancestor = hierarchy.to_path_buf();
    let relative = dir.strip_prefix(hierarchy).unwrap_or(dir);
    let mut folders = vec![ancestor.clone()];
    for part in relative.components() {
        ancestor = ancestor.join(part);
        folders.push(ancestor.clone());
    }
    for folder in &folders {
        std::fs::create_dir_all(folder)
            .with_context(|| format!("creating cgroup {}", folder.display()))?;
        let enabled =
            std::fs::read_to_string(folder.join("cgroup.subtree_control")).unwrap_or_default();
        for controller in ["cpuset", "memory", "cpu"] {
            if !enabled.split_whitespace().any(|c| c == controller) {
                let wanted = controller != "cpu" || limits.cpu_weight.is_some();
                if wanted {
                    write(
                        &folder.join("cgroup.subtree_control"),
                        &format!("+{controller}"),
                    )?;
                }
            }
        }
    }
    let group = dir.join(name);
    std::fs::create_dir_all(&group)
        .with_context(|| format!("creating cgroup {}", group.display()))?;
    if !limits.cpus.is_empty() {
        write(&group.join("cpuset.cpus"), &limits.cpus)?;
    }
    if let Some(bytes) = limits.memory_bytes {
        write(&group.join("memory.max"), &bytes.to_string())?;
        // No swap beyond the limit (absent where swap is not accounted).
        let swap = group.join("memory.swap.max");
        if swap.exists() {
            write(&swap, "0")?;
        }
    }
    if let Some(weight) = limits.cpu_weight {
        // cpu.weight is 1..10000, 100 by default: 100 per CPU asked for.
        write(
            &group.join("cpu.weight"),
            &(weight * 100).min(10_000).to_string(),
        )?;
    }
    Ok(LimitGroup {
        join: Vec::new(),
        oom_file: limits.memory_bytes.map(|_| group.join("memory.events")),
    })
}

fn apply_split(
    cpuset: &Option<PathBuf>,
    memory: &Option<PathBuf>,
    cpu: &Option<PathBuf>,
    name: &str,
    limits: &Limits,
) -> anyhow::Result<LimitGroup> {
    let mut made = LimitGroup::default();
    if !limits.cpus.is_empty() {
        let Some(root) = cpuset else {
            bail!("this machine has no cpuset controller to hold a session to its cores");
        };
        let group = cpuset_group(root, name)?;
        write(&group.join("cpuset.cpus"), &limits.cpus)?;
        made.join.push(group);
    }
    if let Some(bytes) = limits.memory_bytes {
        let Some(root) = memory else {
            bail!("this machine has no memory controller to hold a session to its memory");
        };
        let group = root.join(name);
        std::fs::create_dir_all(&group)
            .with_context(|| format!("creating cgroup {}", group.display()))?;
        write(&group.join("memory.limit_in_bytes"), &bytes.to_string())?;
        // With swap accounting, memory and swap together stay at the limit.
        let memsw = group.join("memory.memsw.limit_in_bytes");
        if memsw.exists() {
            write(&memsw, &bytes.to_string())?;
        }
        made.oom_file = Some(group.join("memory.oom_control"));
        made.join.push(group);
    }
    if let (Some(weight), Some(root)) = (limits.cpu_weight, cpu) {
        let group = root.join(name);
        std::fs::create_dir_all(&group)
            .with_context(|| format!("creating cgroup {}", group.display()))?;
        write(
            &group.join("cpu.shares"),
            &(u64::from(weight) * 1024).to_string(),
        )?;
        made.join.push(group);
    }
    Ok(made)
}

/// A v1 cpuset group: every new cpuset folder starts with no cores and no
/// memory nodes, and takes no process until it has both; folders on the
/// way get their parent's.
fn cpuset_group(root: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let group = root.join(name);
    // `root` is `<mount>/rebench/<namespace>`.
    let mount = root
        .ancestors()
        .nth(2)
        .with_context(|| format!("{} is not under a cpuset mount", root.display()))?;
    let relative = group.strip_prefix(mount)?;
    let mut folder = mount.to_path_buf();
    for part in relative.components() {
        let parent = folder.clone();
        folder = folder.join(part);
        if !folder.exists() {
            std::fs::create_dir(&folder)
                .with_context(|| format!("creating cgroup {}", folder.display()))?;
        }
        for file in ["cpuset.mems", "cpuset.cpus"] {
            let own = std::fs::read_to_string(folder.join(file)).unwrap_or_default();
            if own.trim().is_empty() {
                let inherited = std::fs::read_to_string(parent.join(file))
                    .with_context(|| format!("reading {}", parent.join(file).display()))?;
                write(&folder.join(file), inherited.trim())?;
            }
        }
    }
    Ok(group)
}

/// How many processes of the group the kernel killed for memory so far.
pub fn oom_kills(oom_file: &Path) -> u64 {
    let text = std::fs::read_to_string(oom_file).unwrap_or_default();
    text.lines()
        .find_map(|line| {
            let (key, value) = line.split_once(' ')?;
            (key == "oom_kill").then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0)
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {text:?} to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_held_to_its_grant_and_a_scorer_to_its_cores() {
        let grant = DeviceGrant {
            host: "local".into(),
            gpus: vec![],
            cpus: vec![2, 3],
            shared_cpus: false,
            cpu_weight: 2,
            memory_gb: 1.0,
        };
        let session = Limits::of_session(&grant);
        assert_eq!(session.cpus, "2-3");
        assert_eq!(session.memory_bytes, Some(1 << 30));
        assert_eq!(session.cpu_weight, None, "its cores are its own");
        let scorer = Limits::of_scorer(&grant);
        assert_eq!((scorer.cpus.as_str(), scorer.memory_bytes), ("2-3", None));
        let shared = Limits::of_session(&DeviceGrant {
            shared_cpus: true,
            ..grant
        });
        assert_eq!(shared.cpu_weight, Some(2));
    }

    #[test]
    fn oom_kills_are_read_from_either_version() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = dir.path().join("memory.oom_control");
        std::fs::write(&v1, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n").unwrap();
        assert_eq!(oom_kills(&v1), 3);
        let v2 = dir.path().join("memory.events");
        std::fs::write(&v2, "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n").unwrap();
        assert_eq!(oom_kills(&v2), 1);
        assert_eq!(oom_kills(&dir.path().join("missing")), 0);
    }
}
