//! The allocator: one pure function from a machine's inventory, the
//! grants its sessions hold and one request to a decision — a grant of
//! concrete devices, a wait (with what is busy), or never (with what the
//! machine lacks).
//!
//! Rules: a GPU belongs to one session at a time, and is not granted again
//! while a process still holds it; a session whose scores are timed gets
//! cores nobody else runs on; other sessions get idle cores where enough
//! are idle, else share the cores of other untimed sessions (least used
//! first), weighted by what they asked for; memory is never over-committed.

use std::collections::{BTreeMap, BTreeSet};

use super::grant::{DeviceGrant, GrantedGpu, trim_gb};
use super::inventory::Inventory;

/// A session's needs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Request {
    pub gpus: u32,
    pub gpu_model: Option<String>,
    pub cpus: u32,
    pub memory_gb: f64,
    /// Its scores are timed (`[scoring] exclusive`): its cores are its own.
    #[serde(default)]
    pub exclusive_cpus: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Grant(DeviceGrant),
    /// Could be met on this machine, not now: what it waits for.
    Wait(String),
    /// Can never be met here: what the machine lacks.
    Never(Vec<String>),
}

/// Memory within this fraction of the requirement counts as enough (a
/// machine's "64 GB" shows up as ~62.8 GiB).
const MEMORY_TOLERANCE: f64 = 0.95;

/// What `request` would never get on `inventory`, even with nothing held.
pub fn shortfalls(inventory: &Inventory, request: &Request) -> Vec<String> {
    let mut out = Vec::new();
    let model = request.gpu_model.as_deref();
    let matching = inventory.gpus.iter().filter(|g| g.is_model(model)).count() as u32;
    if matching < request.gpus {
        let mut message = format!(
            "{} required, {matching} found",
            gpus_wanted(request.gpus, model)
        );
        if model.is_some() && inventory.gpus.len() > matching as usize {
            let names: Vec<&str> = inventory.gpus.iter().map(|g| g.model.as_str()).collect();
            message.push_str(&format!(" (this machine has: {})", names.join(", ")));
        }
        out.push(message);
    }
    let cores = inventory.cpus.len() as u32;
    if cores < request.cpus {
        let reserved = inventory.all_cpus.len() as u32 - cores;
        let mut message = format!("{} required, {cores} found", plural(request.cpus, "CPU"));
        if reserved > 0 {
            message.push_str(&format!(" ({reserved} reserved for the system)"));
        }
        out.push(message);
    }
    if request.memory_gb > 0.0
        && let Some(have) = inventory.memory_gb
        && have < request.memory_gb * MEMORY_TOLERANCE
    {
        out.push(format!(
            "{} GB memory required, {} GB found",
            trim_gb(request.memory_gb),
            trim_gb(have)
        ));
    }
    out
}

/// `request` cut to what `inventory` has at all (`--allow-missing-hardware`).
pub fn capped(inventory: &Inventory, request: &Request) -> Request {
    let model = request.gpu_model.as_deref();
    let matching = inventory.gpus.iter().filter(|g| g.is_model(model)).count() as u32;
    Request {
        gpus: request.gpus.min(matching),
        cpus: request.cpus.min(inventory.cpus.len() as u32),
        memory_gb: match inventory.memory_gb {
            Some(have) => request.memory_gb.min(have),
            None => request.memory_gb,
        },
        ..request.clone()
    }
}

/// The decision for `request`, given the grants sessions hold now and the
/// uuids of GPUs some process still uses (`busy_gpus`).
pub fn allocate(
    inventory: &Inventory,
    held: &[&DeviceGrant],
    busy_gpus: &BTreeSet<String>,
    request: &Request,
) -> Decision {
    let never = shortfalls(inventory, request);
    if !never.is_empty() {
        return Decision::Never(never);
    }
    let mut waits = Vec::new();

    let held_gpus: BTreeSet<&str> = held
        .iter()
        .flat_map(|g| g.gpus.iter().map(|gpu| gpu.uuid.as_str()))
        .collect();
    let model = request.gpu_model.as_deref();
    let free_gpus: Vec<GrantedGpu> = inventory
        .gpus
        .iter()
        .filter(|g| g.is_model(model))
        .filter(|g| !held_gpus.contains(g.uuid.as_str()) && !busy_gpus.contains(&g.uuid))
        .take(request.gpus as usize)
        .map(GrantedGpu::from)
        .collect();
    if (free_gpus.len() as u32) < request.gpus {
        let unclean = inventory
            .gpus
            .iter()
            .filter(|g| g.is_model(model) && !held_gpus.contains(g.uuid.as_str()))
            .filter(|g| busy_gpus.contains(&g.uuid))
            .count();
        let mut why = format!(
            "{} ({} free",
            gpus_wanted(request.gpus, model),
            free_gpus.len()
        );
        if unclean > 0 {
            why.push_str(&format!(
                ", {unclean} still in use by an ended session's process"
            ));
        }
        why.push(')');
        waits.push(why);
    }

    let cpus = match choose_cores(inventory, held, request) {
        Ok(cores) => Some(cores),
        Err(why) => {
            waits.push(why);
            None
        }
    };

    let committed: f64 = held.iter().map(|g| g.memory_gb).sum();
    if request.memory_gb > 0.0
        && let Some(have) = inventory.memory_gb
    {
        let free = (have - committed).max(0.0);
        if free < request.memory_gb * MEMORY_TOLERANCE {
            waits.push(format!(
                "{} GB memory ({} GB free)",
                trim_gb(request.memory_gb),
                trim_gb(free)
            ));
        }
    }

    match cpus {
        Some((cpus, shared_cpus)) if waits.is_empty() => Decision::Grant(DeviceGrant {
            host: inventory.host.clone(),
            gpus: free_gpus,
            cpus,
            shared_cpus,
            cpu_weight: request.cpus.max(1),
            memory_gb: request.memory_gb.max(0.0),
        }),
        _ => Decision::Wait(waits.join("; ")),
    }
}

/// The cores for `request` and whether they are shared; Err says why not now.
fn choose_cores(
    inventory: &Inventory,
    held: &[&DeviceGrant],
    request: &Request,
) -> Result<(Vec<u32>, bool), String> {
    let wanted = request.cpus.max(1) as usize;
    // How many sessions run on each core; None for a core a timed session owns.
    let mut load: BTreeMap<u32, Option<u32>> =
        inventory.cpus.iter().map(|&c| (c, Some(0))).collect();
    for grant in held {
        for core in &grant.cpus {
            if let Some(slot) = load.get_mut(core) {
                *slot = match (*slot, grant.shared_cpus) {
                    (Some(n), true) => Some(n + 1),
                    _ => None,
                };
            }
        }
    }
    let idle: Vec<u32> = load
        .iter()
        .filter(|(_, l)| **l == Some(0))
        .map(|(&c, _)| c)
        .collect();
    if idle.len() >= wanted {
        return Ok((idle[..wanted].to_vec(), !request.exclusive_cpus));
    }
    if request.exclusive_cpus {
        return Err(format!(
            "{} to itself, for timed scores ({} idle)",
            plural(wanted as u32, "CPU core"),
            idle.len()
        ));
    }
    let mut shareable: Vec<(u32, u32)> = load
        .iter()
        .filter_map(|(&c, l)| l.map(|n| (n, c)))
        .collect();
    if shareable.len() < wanted {
        return Err(format!(
            "{} ({} not held by timed sessions)",
            plural(wanted as u32, "CPU core"),
            shareable.len()
        ));
    }
    shareable.sort();
    let mut cores: Vec<u32> = shareable[..wanted].iter().map(|&(_, c)| c).collect();
    cores.sort_unstable();
    Ok((cores, true))
}

fn gpus_wanted(n: u32, model: Option<&str>) -> String {
    match model.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => format!("{} ({m})", plural(n, "GPU")),
        None => plural(n, "GPU"),
    }
}

fn plural(n: u32, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::inventory::{Gpu, Reserve};

    fn machine(gpus: u32, cores: u32, memory_gb: f64) -> Inventory {
        let gpus = (0..gpus)
            .map(|i| Gpu {
                index: i,
                uuid: format!("GPU-{i}"),
                model: if i < 6 {
                    "NVIDIA H100 80GB HBM3"
                } else {
                    "NVIDIA A100-SXM4-40GB"
                }
                .into(),
                memory_mib: 81559,
            })
            .collect();
        Inventory::from_parts(
            gpus,
            (0..cores).collect(),
            Some(memory_gb),
            Reserve::default(),
        )
    }

    fn req(gpus: u32, cpus: u32, memory_gb: f64, exclusive: bool) -> Request {
        Request {
            gpus,
            gpu_model: None,
            cpus,
            memory_gb,
            exclusive_cpus: exclusive,
        }
    }

    fn granted(decision: Decision) -> DeviceGrant {
        match decision {
            Decision::Grant(g) => g,
            other => panic!("expected a grant, got {other:?}"),
        }
    }

    fn none() -> BTreeSet<String> {
        BTreeSet::new()
    }

    #[test]
    fn sessions_that_fit_get_different_gpus_and_cores() {
        let box8 = machine(8, 16, 512.0);
        let a = granted(allocate(&box8, &[], &none(), &req(1, 4, 64.0, true)));
        assert_eq!(a.gpus[0].index, 0);
        assert_eq!(a.cpus, [0, 1, 2, 3]);
        assert!(!a.shared_cpus);
        let b = granted(allocate(&box8, &[&a], &none(), &req(2, 4, 64.0, true)));
        assert_eq!(b.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(b.cpus, [4, 5, 6, 7]);
        assert_eq!(b.memory_gb, 64.0);
    }

    #[test]
    fn freed_gpus_leave_holes_that_are_filled_first() {
        let box4 = machine(4, 8, 64.0);
        let a = granted(allocate(&box4, &[], &none(), &req(1, 1, 0.0, false)));
        let b = granted(allocate(&box4, &[&a], &none(), &req(1, 1, 0.0, false)));
        let c = granted(allocate(&box4, &[&a, &b], &none(), &req(1, 1, 0.0, false)));
        // b ends: GPU 1 is free again; a two-GPU request gets 1 and 3.
        let d = granted(allocate(&box4, &[&a, &c], &none(), &req(2, 1, 0.0, false)));
        assert_eq!(d.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), [1, 3]);
        let full = allocate(&box4, &[&a, &c, &d], &none(), &req(1, 1, 0.0, false));
        assert_eq!(full, Decision::Wait("1 GPU (0 free)".into()));
    }

    #[test]
    fn the_model_must_match_and_a_machine_without_it_is_never_enough() {
        let mixed = machine(8, 16, 512.0);
        let mut wants_a100 = req(2, 1, 0.0, false);
        wants_a100.gpu_model = Some("A100".into());
        let g = granted(allocate(&mixed, &[], &none(), &wants_a100));
        assert_eq!(g.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), [6, 7]);
        wants_a100.gpus = 3;
        match allocate(&mixed, &[], &none(), &wants_a100) {
            Decision::Never(why) => {
                assert!(
                    why[0].starts_with("3 GPUs (A100) required, 2 found"),
                    "{why:?}"
                )
            }
            other => panic!("{other:?}"),
        }
        let capped = capped(&mixed, &wants_a100);
        assert_eq!(capped.gpus, 2);
    }

    #[test]
    fn timed_sessions_never_share_a_core_and_wait_instead() {
        let box2 = machine(0, 2, 24.0);
        let a = granted(allocate(&box2, &[], &none(), &req(0, 1, 1.0, true)));
        let b = granted(allocate(&box2, &[&a], &none(), &req(0, 1, 1.0, true)));
        assert_ne!(a.cpus, b.cpus);
        let third = allocate(&box2, &[&a, &b], &none(), &req(0, 1, 1.0, true));
        assert_eq!(
            third,
            Decision::Wait("1 CPU core to itself, for timed scores (0 idle)".into())
        );
        // An untimed session cannot squeeze onto a timed session's cores either.
        let untimed = allocate(&box2, &[&a, &b], &none(), &req(0, 1, 1.0, false));
        assert!(matches!(untimed, Decision::Wait(_)), "{untimed:?}");
    }

    #[test]
    fn untimed_sessions_share_the_least_used_cores_with_a_weight() {
        let box2 = machine(0, 2, 24.0);
        let a = granted(allocate(&box2, &[], &none(), &req(0, 2, 4.0, false)));
        assert_eq!(a.cpus, [0, 1]);
        assert!(a.shared_cpus, "untimed cores may be shared later");
        let b = granted(allocate(&box2, &[&a], &none(), &req(0, 1, 4.0, false)));
        assert!(b.shared_cpus);
        assert_eq!(b.cpu_weight, 1);
        let c = granted(allocate(&box2, &[&a, &b], &none(), &req(0, 1, 4.0, false)));
        assert_ne!(b.cpus, c.cpus, "the least used core first");
        // A timed session finds no idle core while untimed ones run.
        let timed = allocate(&box2, &[&a, &b, &c], &none(), &req(0, 1, 1.0, true));
        assert!(matches!(timed, Decision::Wait(_)));
    }

    #[test]
    fn memory_is_never_over_committed() {
        let box1 = machine(0, 8, 32.0);
        let a = granted(allocate(&box1, &[], &none(), &req(0, 1, 20.0, false)));
        match allocate(&box1, &[&a], &none(), &req(0, 1, 20.0, false)) {
            Decision::Wait(why) => assert_eq!(why, "20 GB memory (12 GB free)"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            allocate(&box1, &[&a], &none(), &req(0, 1, 12.0, false)),
            Decision::Grant(_)
        ));
        assert!(matches!(
            allocate(&box1, &[], &none(), &req(0, 1, 64.0, false)),
            Decision::Never(_)
        ));
    }

    #[test]
    fn the_reserve_is_never_granted() {
        let inv = Inventory::from_parts(
            vec![],
            vec![0, 1, 2, 3],
            Some(16.0),
            Reserve {
                cpus: 2,
                memory_gb: 4.0,
            },
        );
        let a = granted(allocate(&inv, &[], &none(), &req(0, 2, 12.0, true)));
        assert_eq!(a.cpus, [2, 3]);
        match allocate(&inv, &[], &none(), &req(0, 3, 1.0, true)) {
            Decision::Never(why) => {
                assert_eq!(
                    why,
                    ["3 CPUs required, 2 found (2 reserved for the system)"]
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            allocate(&inv, &[], &none(), &req(0, 1, 13.0, true)),
            Decision::Never(_)
        ));
    }

    #[test]
    fn a_gpu_a_process_still_holds_is_not_granted() {
        let box2 = machine(2, 4, 64.0);
        let busy: BTreeSet<String> = ["GPU-0".to_string()].into();
        let a = granted(allocate(&box2, &[], &busy, &req(1, 1, 0.0, false)));
        assert_eq!(a.gpus[0].index, 1);
        match allocate(&box2, &[&a], &busy, &req(1, 1, 0.0, false)) {
            Decision::Wait(why) => assert!(why.contains("still in use"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
