//! What an environment needs from the machine (its `[hardware]`), and the
//! gap to what a machine has (`crate::hardware` grants the devices).

use super::manifest::Hardware;
use crate::hardware::allocate::{Request, shortfalls};
use crate::hardware::inventory::{Inventory, Reserve};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardwareRequirements {
    pub gpus: u32,
    pub gpu_model: Option<String>,
    pub cpus: u32,
    pub memory_gb: f64,
}

impl HardwareRequirements {
    /// The allocator's request; `timed`: its scores are timed, so its
    /// cores are its own.
    pub fn request(&self, timed: bool) -> Request {
        Request {
            gpus: self.gpus,
            gpu_model: self.gpu_model.clone(),
            cpus: self.cpus,
            memory_gb: self.memory_gb,
            exclusive_cpus: timed,
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

/// Human-readable shortfalls of `inventory`; empty when it is good enough.
pub fn missing(req: &HardwareRequirements, inventory: &Inventory) -> Vec<String> {
    shortfalls(inventory, &req.request(false))
}

/// This machine, with nothing reserved (what `env show` compares against).
pub fn this_machine() -> Inventory {
    Inventory::detect(Reserve::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::inventory::Gpu;

    fn req(gpus: u32, model: Option<&str>, cpus: u32, memory_gb: f64) -> HardwareRequirements {
        HardwareRequirements {
            gpus,
            gpu_model: model.map(str::to_string),
            cpus,
            memory_gb,
        }
    }

    fn info(cpus: u32, memory_gb: Option<f64>, gpus: &[&str]) -> Inventory {
        let gpus = gpus
            .iter()
            .enumerate()
            .map(|(i, name)| Gpu {
                index: i as u32,
                uuid: format!("GPU-{i}"),
                model: name.to_string(),
                memory_mib: 0,
            })
            .collect();
        Inventory::from_parts(gpus, (0..cpus).collect(), memory_gb, Reserve::default())
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
    fn detect_runs_without_failing() {
        let here = this_machine();
        assert!(!here.cpus.is_empty());
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
        assert!(HardwareRequirements::from(&h).request(true).exclusive_cpus);
    }
}
