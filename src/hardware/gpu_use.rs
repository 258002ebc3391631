//! What runs on the GPUs: the processes holding each (a GPU is not granted
//! again while one does) and each GPU's utilisation and memory, from
//! `nvidia-smi`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// One GPU's use at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuUse {
    pub index: u32,
    pub uuid: String,
    /// Percent of the last sample period a kernel ran.
    pub utilization_pct: u32,
    pub memory_used_mib: u64,
}

/// The uuids of GPUs some process holds now (`--query-compute-apps`);
/// None when nvidia-smi is missing or fails (nothing is known then).
pub fn busy_gpus() -> Option<BTreeSet<String>> {
    let out = Command::new("nvidia-smi")
        .args([
            "--query-compute-apps=pid,gpu_uuid,used_memory",
            "--format=csv,noheader,nounits",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(parse_compute_apps(&String::from_utf8_lossy(&out.stdout)))
}

/// Lines of `pid, gpu_uuid, used_memory`.
pub fn parse_compute_apps(csv: &str) -> BTreeSet<String> {
    csv.lines()
        .filter_map(|line| {
            let mut fields = line.split(',').map(str::trim);
            let pid = fields.next()?;
            let uuid = fields.next()?;
            (pid.parse::<u32>().is_ok() && !uuid.is_empty()).then(|| uuid.to_string())
        })
        .collect()
}

/// Every GPU's use now, by uuid; empty without nvidia-smi.
pub fn sample() -> BTreeMap<String, GpuUse> {
    let out = Command::new("nvidia-smi")
        .args([
            "--query-gpu=index,uuid,utilization.gpu,memory.used",
            "--format=csv,noheader,nounits",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => parse_use(&String::from_utf8_lossy(&o.stdout)),
        _ => BTreeMap::new(),
    }
}

/// Lines of `index, uuid, utilization.gpu, memory.used`; lines that do not
/// parse (`[N/A]`) are left out.
pub fn parse_use(csv: &str) -> BTreeMap<String, GpuUse> {
    csv.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let [index, uuid, util, memory] = fields[..] else {
                return None;
            };
            Some((
                uuid.to_string(),
                GpuUse {
                    index: index.parse().ok()?,
                    uuid: uuid.to_string(),
                    utilization_pct: util.trim_end_matches('%').trim().parse().ok()?,
                    memory_used_mib: memory.trim_end_matches("MiB").trim().parse().ok()?,
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_apps_name_the_gpus_in_use() {
        let busy = parse_compute_apps(
            "4242, GPU-aaa, 1024\n4243, GPU-aaa, 10\n\nNo running processes found\n",
        );
        assert_eq!(busy.into_iter().collect::<Vec<_>>(), ["GPU-aaa"]);
    }

    #[test]
    fn use_lines_parse_and_unknowns_are_skipped() {
        let uses = parse_use("0, GPU-a, 87, 4000\n1, GPU-b, [N/A], [N/A]\n");
        assert_eq!(uses.len(), 1);
        assert_eq!(uses["GPU-a"].utilization_pct, 87);
        assert_eq!(uses["GPU-a"].memory_used_mib, 4000);
    }
}
