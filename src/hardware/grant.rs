//! A grant: the concrete devices one session holds (GPUs by index and
//! uuid, CPU cores, a memory limit), stored in its event log before any of
//! its processes starts, and what each backend makes of it.

use serde::{Deserialize, Serialize};

use super::inventory::{Gpu, format_cpu_list};

/// One GPU a session holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantedGpu {
    pub index: u32,
    pub uuid: String,
    pub model: String,
}

impl From<&Gpu> for GrantedGpu {
    fn from(gpu: &Gpu) -> Self {
        GrantedGpu {
            index: gpu.index,
            uuid: gpu.uuid.clone(),
            model: gpu.model.clone(),
        }
    }
}

/// What a session holds on its host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceGrant {
    /// The machine (`local`: the server's own).
    pub host: String,
    /// Its GPUs: no other session holds them.
    #[serde(default)]
    pub gpus: Vec<GrantedGpu>,
    /// The cores its processes may run on (empty: any).
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// Whether other sessions may be given the same cores (only sessions
    /// whose scores are not timed ever share).
    #[serde(default)]
    pub shared_cpus: bool,
    /// The CPUs it asked for: its weight where cores are shared.
    #[serde(default)]
    pub cpu_weight: u32,
    /// Memory limit in GiB (0: none).
    #[serde(default)]
    pub memory_gb: f64,
}

impl DeviceGrant {
    /// The GPUs' uuids, comma-separated (what CUDA and the NVIDIA runtime take).
    pub fn gpu_uuids(&self) -> String {
        self.gpus
            .iter()
            .map(|g| g.uuid.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `0-3`: the cores as a cpuset list.
    pub fn cpu_list(&self) -> String {
        format_cpu_list(&self.cpus)
    }

    /// Memory limit in bytes, None for no limit.
    pub fn memory_bytes(&self) -> Option<u64> {
        (self.memory_gb > 0.0).then_some((self.memory_gb * 1024.0 * 1024.0 * 1024.0) as u64)
    }

    /// The variables that tell CUDA and the NVIDIA runtime which GPUs are
    /// the session's: set from the grant, never passed on from the
    /// operator. A session without GPUs gets none visible. Uuids, not
    /// indices: CUDA numbers devices its own way.
    pub fn visible_devices_env(&self) -> Vec<(String, String)> {
        let uuids = self.gpu_uuids();
        let nvidia = if uuids.is_empty() {
            "void".to_string()
        } else {
            uuids.clone()
        };
        vec![
            ("CUDA_VISIBLE_DEVICES".to_string(), uuids),
            ("CUDA_DEVICE_ORDER".to_string(), "PCI_BUS_ID".to_string()),
            ("NVIDIA_VISIBLE_DEVICES".to_string(), nvidia),
        ]
    }

    /// One line for screens and logs: `GPU 1 (H100…), cores 2-3, 16 GB`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.gpus.is_empty() {
            let gpus: Vec<String> = self
                .gpus
                .iter()
                .map(|g| format!("{} ({})", g.index, g.model))
                .collect();
            let noun = if self.gpus.len() == 1 { "GPU" } else { "GPUs" };
            parts.push(format!("{noun} {}", gpus.join(", ")));
        }
        if !self.cpus.is_empty() {
            let noun = if self.cpus.len() == 1 {
                "core"
            } else {
                "cores"
            };
            let shared = if self.shared_cpus { " (shared)" } else { "" };
            parts.push(format!("{noun} {}{shared}", self.cpu_list()));
        }
        if self.memory_gb > 0.0 {
            parts.push(format!("{} GB memory", trim_gb(self.memory_gb)));
        }
        if parts.is_empty() {
            "no limits".to_string()
        } else {
            format!("{} on {}", parts.join(", "), self.host)
        }
    }
}

/// "64", "23.4": one decimal at most.
pub fn trim_gb(gb: f64) -> String {
    let text = format!("{gb:.1}");
    text.strip_suffix(".0").unwrap_or(&text).to_string()
}

/// What sessions made before grants held devices stored: counts only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LegacyGrant {
    pub cpus: u32,
    pub memory_gb: f64,
    pub gpus: u32,
}

impl LegacyGrant {
    /// As a grant of no particular devices: its memory limit stands.
    pub fn as_device_grant(&self) -> DeviceGrant {
        DeviceGrant {
            host: super::inventory::LOCAL_HOST.to_string(),
            gpus: Vec::new(),
            cpus: Vec::new(),
            shared_cpus: true,
            cpu_weight: self.cpus,
            memory_gb: self.memory_gb,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32) -> GrantedGpu {
        GrantedGpu {
            index,
            uuid: format!("GPU-{index}"),
            model: "H100".into(),
        }
    }

    #[test]
    fn the_visible_devices_are_the_granted_uuids_or_none() {
        let grant = DeviceGrant {
            host: "local".into(),
            gpus: vec![gpu(2), gpu(5)],
            cpus: vec![4, 5, 6],
            shared_cpus: false,
            cpu_weight: 3,
            memory_gb: 16.0,
        };
        let env = grant.visible_devices_env();
        assert!(env.contains(&("CUDA_VISIBLE_DEVICES".into(), "GPU-2,GPU-5".into())));
        assert!(env.contains(&("NVIDIA_VISIBLE_DEVICES".into(), "GPU-2,GPU-5".into())));
        assert_eq!(grant.cpu_list(), "4-6");
        assert_eq!(grant.memory_bytes(), Some(16 << 30));
        assert_eq!(
            grant.describe(),
            "GPUs 2 (H100), 5 (H100), cores 4-6, 16 GB memory on local"
        );
        let none = DeviceGrant {
            gpus: vec![],
            memory_gb: 0.0,
            ..grant
        };
        let env = none.visible_devices_env();
        assert!(env.contains(&("CUDA_VISIBLE_DEVICES".into(), String::new())));
        assert!(env.contains(&("NVIDIA_VISIBLE_DEVICES".into(), "void".into())));
        assert_eq!(none.memory_bytes(), None);
    }

    #[test]
    fn a_legacy_grant_keeps_its_memory_limit_only() {
        let legacy: LegacyGrant =
            serde_json::from_str(r#"{"cpus": 2, "memory_gb": 4.0, "gpus": 1}"#).unwrap();
        let grant = legacy.as_device_grant();
        assert!(grant.gpus.is_empty() && grant.cpus.is_empty());
        assert_eq!(grant.memory_gb, 4.0);
    }
}
