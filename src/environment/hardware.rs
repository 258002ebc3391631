//! What an environment needs from the machine, what the machine has, and the gap.

use super::manifest::Hardware;
use serde::{Deserialize, Serialize};
use std::process::Command;

/// A physical machine's "64 GB" shows up as ~62.8 GiB in /proc/meminfo, so
/// accept memory within this fraction of the requirement.
const MEMORY_TOLERANCE: f64 = 0.95;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardwareRequirements {
    pub gpus: u32,
    pub gpu_model: Option<String>,
    pub cpus: u32,
    pub memory_gb: f64,
}

/// What a session's container is given: the environment's requirements,
/// capped by what the machine has (a session made with
/// `--allow-missing-hardware` gets what there is). 0 memory: no limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    pub cpus: u32,
    pub memory_gb: f64,
    pub gpus: u32,
}

impl Grant {
    pub fn new(req: &HardwareRequirements, info: &HardwareInfo) -> Grant {
        Grant {
            cpus: req.cpus.min(info.cpus).max(1),
            memory_gb: info
                .memory_gb
                .map_or(req.memory_gb, |have| req.memory_gb.min(have))
                .max(0.0),
            gpus: req
                .gpus
                .min(u32::try_from(info.gpus.len()).unwrap_or(u32::MAX)),
        }
    }
}

impl From<&Hardware> for HardwareRequirements {
    fn from(h: &Hardware) -> Self {
        HardwareRequirements {
            gpus: h.gpus,
            gpu_model: h.gpu_model.clone(),
            cpus: h.cpus,
            memory_gb: h.memory_gb,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardwareInfo {
    pub cpus: u32,
    /// GiB of total memory; `None` when it could not be read (not Linux).
    pub memory_gb: Option<f64>,
    /// One name per GPU, as nvidia-smi reports it ("NVIDIA H100 80GB HBM3").
    pub gpus: Vec<String>,
}

impl HardwareInfo {
    /// Looks at this machine. Never fails: anything unreadable counts as absent.
    pub fn detect() -> HardwareInfo {
        let cpus = std::thread::available_parallelism()
            .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
            .unwrap_or(1);
        let memory_gb = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| parse_meminfo_gib(&text));
        HardwareInfo {
            cpus,
            memory_gb,
            gpus: detect_gpus(),
        }
    }
}

/// `MemTotal:       16318412 kB` -> GiB.
fn parse_meminfo_gib(meminfo: &str) -> Option<f64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / (1024.0 * 1024.0))
}

fn detect_gpus() -> Vec<String> {
    // No nvidia-smi, or one that fails (no driver), both mean "no usable GPUs".
    let output = Command::new("nvidia-smi")
        .args(["--query-gpu=name", "--format=csv,noheader"])
        .output();
    match output {
        Ok(out) if out.status.success() => parse_gpu_names(&String::from_utf8_lossy(&out.stdout)),
        _ => Vec::new(),
    }
}

fn parse_gpu_names(csv: &str) -> Vec<String> {
    csv.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

fn plural(n: u32, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// "64", "23.4": one decimal at most, no trailing ".0".
fn format_gb(gb: f64) -> String {
    let text = format!("{gb:.1}");
    text.strip_suffix(".0").unwrap_or(&text).to_string()
}

/// Human-readable shortfalls; empty when the machine is good enough.
pub fn missing(req: &HardwareRequirements, info: &HardwareInfo) -> Vec<String> {
    let mut out = Vec::new();
    if req.gpus > 0 {
        let model = req
            .gpu_model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty());
        let matching = match model {
            Some(m) => {
                let wanted = m.to_lowercase();
                info.gpus
                    .iter()
                    .filter(|name| name.to_lowercase().contains(&wanted))
                    .count()
            }
            None => info.gpus.len(),
        };
        let matching = u32::try_from(matching).unwrap_or(u32::MAX);
        if matching < req.gpus {
            let wanted = match model {
                Some(m) => format!("{} ({m})", plural(req.gpus, "GPU")),
                None => plural(req.gpus, "GPU"),
            };
            let mut message = format!("{wanted} required, {matching} found");
            if model.is_some() && info.gpus.len() > matching as usize {
                message.push_str(&format!(" (this machine has: {})", info.gpus.join(", ")));
            }
            out.push(message);
        }
    }
    if info.cpus < req.cpus {
        out.push(format!(
            "{} required, {} found",
            plural(req.cpus, "CPU"),
            info.cpus
        ));
    }
    // Unknown memory (no /proc/meminfo) is not treated as a shortfall.
    if req.memory_gb > 0.0
        && let Some(found) = info.memory_gb
        && found < req.memory_gb * MEMORY_TOLERANCE
    {
        out.push(format!(
            "{} GB memory required, {} GB found",
            format_gb(req.memory_gb),
            format_gb(found)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_is_the_requirement_capped_by_the_machine() {
        let req = HardwareRequirements {
            gpus: 2,
            gpu_model: Some("H100".into()),
            cpus: 26,
            memory_gb: 200.0,
        };
        let small = HardwareInfo {
            cpus: 2,
            memory_gb: Some(23.4),
            gpus: vec![],
        };
        assert_eq!(
            Grant::new(&req, &small),
            Grant {
                cpus: 2,
                memory_gb: 23.4,
                gpus: 0
            }
        );
        let big = HardwareInfo {
            cpus: 64,
            memory_gb: Some(512.0),
            gpus: vec!["NVIDIA H100".into(); 8],
        };
        assert_eq!(
            Grant::new(&req, &big),
            Grant {
                cpus: 26,
                memory_gb: 200.0,
                gpus: 2
            }
        );
    }

    fn req(gpus: u32, model: Option<&str>, cpus: u32, memory_gb: f64) -> HardwareRequirements {
        HardwareRequirements {
            gpus,
            gpu_model: model.map(str::to_string),
            cpus,
            memory_gb,
        }
    }

    fn info(cpus: u32, memory_gb: Option<f64>, gpus: &[&str]) -> HardwareInfo {
        HardwareInfo {
            cpus,
            memory_gb,
            gpus: gpus.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn enough_hardware_has_nothing_missing() {
        let machine = info(
            16,
            Some(62.8),
            &["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"],
        );
        assert!(missing(&req(2, Some("h100"), 16, 64.0), &machine).is_empty());
        assert!(missing(&req(0, None, 1, 0.0), &info(1, None, &[])).is_empty());
        assert!(missing(&req(1, None, 1, 1.0), &machine).is_empty());
    }

    #[test]
    fn messages_name_each_shortfall() {
        let machine = info(2, Some(23.4), &[]);
        assert_eq!(
            missing(&req(1, Some("H100"), 4, 64.0), &machine),
            vec![
                "1 GPU (H100) required, 0 found",
                "4 CPUs required, 2 found",
                "64 GB memory required, 23.4 GB found",
            ]
        );
        assert_eq!(
            missing(&req(2, None, 1, 0.0), &info(1, None, &["NVIDIA A10"])),
            vec!["2 GPUs required, 1 found"]
        );
        assert_eq!(
            missing(&req(0, None, 1, 0.0), &info(0, None, &[])),
            vec!["1 CPU required, 0 found"]
        );
    }

    #[test]
    fn gpu_model_is_a_case_insensitive_substring() {
        let machine = info(8, None, &["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]);
        assert!(missing(&req(1, Some("h100"), 1, 0.0), &machine).is_empty());
        assert!(missing(&req(1, Some("A100"), 1, 0.0), &machine).is_empty());
        assert_eq!(
            missing(&req(2, Some("H100"), 1, 0.0), &machine),
            vec![
                "2 GPUs (H100) required, 1 found \
                 (this machine has: NVIDIA A100-SXM4-80GB, NVIDIA H100 80GB HBM3)"
            ]
        );
    }

    #[test]
    fn unknown_memory_is_not_a_shortfall() {
        assert!(missing(&req(0, None, 1, 512.0), &info(1, None, &[])).is_empty());
    }

    #[test]
    fn parses_meminfo_and_gpu_list() {
        let meminfo = "MemTotal:       16318412 kB\nMemFree:         1234 kB\n";
        let gib = parse_meminfo_gib(meminfo).unwrap();
        assert!((gib - 15.562).abs() < 0.01, "{gib}");
        assert_eq!(parse_meminfo_gib("nothing here"), None);
        assert_eq!(
            parse_gpu_names("NVIDIA H100 80GB HBM3\n  NVIDIA H100 80GB HBM3 \n\n"),
            vec!["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]
        );
    }

    #[test]
    fn detect_runs_without_failing() {
        let here = HardwareInfo::detect();
        assert!(here.cpus >= 1);
    }

    #[test]
    fn requirements_come_from_the_manifest() {
        let h = Hardware {
            gpus: 1,
            gpu_model: Some("H100".into()),
            cpus: 4,
            memory_gb: 32.0,
        };
        assert_eq!(
            HardwareRequirements::from(&h),
            req(1, Some("H100"), 4, 32.0)
        );
    }
}
