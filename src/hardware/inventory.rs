//! What this machine has for sessions: its GPUs (from `nvidia-smi`, with
//! the device node of each), the CPU cores this process may use, and its
//! memory, less what the operator reserves for the system.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// Where device nodes are looked up and bound from (default `/dev`): tests
/// point it at a folder of nodes made with `mknod`.
pub const DEV_DIR_VAR: &str = "REBENCH_DEV_DIR";

/// The name the server's own machine has among hosts.
pub const LOCAL_HOST: &str = "local";

/// One GPU as `nvidia-smi` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub index: u32,
    pub uuid: String,
    /// "NVIDIA H100 80GB HBM3".
    pub model: String,
    /// Total memory in MiB (0: not reported).
    pub memory_mib: u64,
}

impl Gpu {
    /// Whether this GPU is of `wanted` (a part of its name, any case).
    pub fn is_model(&self, wanted: Option<&str>) -> bool {
        match wanted.map(str::trim).filter(|m| !m.is_empty()) {
            Some(m) => self.model.to_lowercase().contains(&m.to_lowercase()),
            None => true,
        }
    }
}

/// What the operator keeps for the server and the system
/// (`[machine]` in `config.toml`).
pub use crate::settings::MachineReserve as Reserve;

/// What sessions may be granted on one machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    pub host: String,
    pub gpus: Vec<Gpu>,
    /// Every core this process may run on.
    pub all_cpus: Vec<u32>,
    /// Those sessions may be given (the reserved ones left out: the first).
    pub cpus: Vec<u32>,
    /// GiB of memory in all (None: unreadable).
    pub total_memory_gb: Option<f64>,
    /// GiB sessions may be given (total less the reserve; None: unknown).
    pub memory_gb: Option<f64>,
    pub reserve: Reserve,
}

impl Inventory {
    /// Looks at this machine. Never fails: what cannot be read counts as absent.
    pub fn detect(reserve: Reserve) -> Inventory {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Inventory::from_parts(
            detect_gpus(),
            usable_cores(),
            parse_meminfo_gib(&meminfo),
            reserve,
        )
    }

    /// An inventory from what was read (the pure half of `detect`).
    pub fn from_parts(
        gpus: Vec<Gpu>,
        all_cpus: Vec<u32>,
        total_memory_gb: Option<f64>,
        reserve: Reserve,
    ) -> Inventory {
        // The reserve never takes the last core: a machine whose operator
        // reserved too much still runs one session at a time.
        let keep = (reserve.cpus as usize).min(all_cpus.len().saturating_sub(1));
        let cpus = all_cpus[keep..].to_vec();
        let memory_gb = total_memory_gb.map(|total| (total - reserve.memory_gb).max(0.0));
        Inventory {
            host: LOCAL_HOST.to_string(),
            gpus,
            all_cpus,
            cpus,
            total_memory_gb,
            memory_gb,
            reserve,
        }
    }
}

/// The folder device nodes are found in (`REBENCH_DEV_DIR`, else `/dev`).
pub fn dev_dir() -> PathBuf {
    std::env::var_os(DEV_DIR_VAR)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/dev"), PathBuf::from)
}

/// The GPU's own device node: `/dev/nvidia<index>`.
pub fn gpu_node(dev: &Path, index: u32) -> PathBuf {
    dev.join(format!("nvidia{index}"))
}

/// The nodes every GPU process needs besides its GPUs' own: the control
/// device, unified memory and modesetting, where they exist.
pub fn shared_gpu_nodes(dev: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dev) else {
        return Vec::new();
    };
    let mut nodes: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name == "nvidiactl" || name == "nvidia-modeset" || name.starts_with("nvidia-uvm")
        })
        .map(|e| e.path())
        .collect();
    nodes.sort();
    nodes
}

/// `nvidia-smi --query-gpu=index,uuid,name,memory.total`: no nvidia-smi,
/// or one that fails (no driver), both mean no usable GPUs.
fn detect_gpus() -> Vec<Gpu> {
    let output = Command::new("nvidia-smi")
        .args([
            "--query-gpu=index,uuid,name,memory.total",
            "--format=csv,noheader,nounits",
        ])
        .output();
    match output {
        Ok(out) if out.status.success() => {
            match parse_gpus(&String::from_utf8_lossy(&out.stdout)) {
                Ok(gpus) => gpus,
                Err(e) => {
                    tracing::warn!("nvidia-smi's GPU list is not understood: {e}");
                    Vec::new()
                }
            }
        }
        _ => Vec::new(),
    }
}

/// Lines of `index, uuid, name, memory` (memory with or without ` MiB`).
pub fn parse_gpus(csv: &str) -> Result<Vec<Gpu>, String> {
    let mut gpus = Vec::new();
    for (n, line) in csv.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [index, uuid, name, memory] = fields[..] else {
            return Err(format!(
                "line {}: expected index, uuid, name, memory.total; got {line:?}",
                n + 1
            ));
        };
        let index: u32 = index
            .parse()
            .map_err(|_| format!("line {}: index {index:?} is not a number", n + 1))?;
        let memory_mib = memory.trim_end_matches("MiB").trim().parse().unwrap_or(0);
        if uuid.is_empty() {
            return Err(format!("line {}: GPU {index} has no uuid", n + 1));
        }
        gpus.push(Gpu {
            index,
            uuid: uuid.to_string(),
            model: name.to_string(),
            memory_mib,
        });
    }
    gpus.sort_by_key(|g| g.index);
    Ok(gpus)
}

/// `MemTotal:       16318412 kB` -> GiB.
pub fn parse_meminfo_gib(meminfo: &str) -> Option<f64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / (1024.0 * 1024.0))
}

/// The cores this process may run on (its affinity, which a cgroup's
/// cpuset narrows), cut to a cgroup CPU quota where one is lower.
fn usable_cores() -> Vec<u32> {
    let mut cores = affinity();
    let quota = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores.is_empty() {
        cores = (0..u32::try_from(quota).unwrap_or(1)).collect();
    }
    cores.truncate(quota.max(1));
    cores
}

fn affinity() -> Vec<u32> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // fills it for this process.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&i| libc::CPU_ISSET(i, &set))
            .filter_map(|i| u32::try_from(i).ok())
            .collect()
    }
}

/// `0-3,8,10-11` -> [0, 1, 2, 3, 8, 10, 11] (a cpuset's list).
pub fn format_cpu_list(cores: &[u32]) -> String {
    let mut sorted = cores.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_lines_become_gpus_in_index_order() {
        let csv = "1, GPU-bbb, NVIDIA H100 80GB HBM3, 81559\n0, GPU-aaa, NVIDIA H100 80GB HBM3, 81559 MiB\n\n";
        let gpus = parse_gpus(csv).unwrap();
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].index, 0);
        assert_eq!(gpus[0].uuid, "GPU-aaa");
        assert_eq!(gpus[1].memory_mib, 81559);
        assert!(gpus[0].is_model(Some("h100")));
        assert!(!gpus[0].is_model(Some("A100")));
        assert!(gpus[0].is_model(None));
        let bad = parse_gpus("0, GPU-a, H100\n").unwrap_err();
        assert!(bad.contains("line 1"), "{bad}");
        assert!(
            parse_gpus("x, GPU-a, H100, 1\n")
                .unwrap_err()
                .contains("index")
        );
    }

    #[test]
    fn the_reserve_takes_the_first_cores_and_some_memory_but_never_everything() {
        let inv = Inventory::from_parts(
            vec![],
            vec![0, 1, 2, 3],
            Some(64.0),
            Reserve {
                cpus: 1,
                memory_gb: 8.0,
            },
        );
        assert_eq!(inv.cpus, [1, 2, 3]);
        assert_eq!(inv.memory_gb, Some(56.0));
        let greedy = Inventory::from_parts(
            vec![],
            vec![0, 1],
            Some(4.0),
            Reserve {
                cpus: 9,
                memory_gb: 9.0,
            },
        );
        assert_eq!(greedy.cpus, [1]);
        assert_eq!(greedy.memory_gb, Some(0.0));
    }

    #[test]
    fn core_lists_are_written_as_ranges() {
        assert_eq!(format_cpu_list(&[3, 0, 1, 2, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn shared_nodes_are_the_control_ones_only() {
        let dev = tempfile::tempdir().unwrap();
        for name in [
            "nvidia0",
            "nvidia1",
            "nvidiactl",
            "nvidia-uvm",
            "nvidia-uvm-tools",
            "nvidia-modeset",
            "null",
        ] {
            std::fs::write(dev.path().join(name), "").unwrap();
        }
        let names: Vec<String> = shared_gpu_nodes(dev.path())
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "nvidia-modeset",
                "nvidia-uvm",
                "nvidia-uvm-tools",
                "nvidiactl"
            ]
        );
        assert_eq!(gpu_node(dev.path(), 1), dev.path().join("nvidia1"));
    }
}
