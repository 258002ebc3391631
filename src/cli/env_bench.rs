//! `rebench env bench`: how steady an environment's scores are on this
//! machine. The starting and reference solutions are each scored `runs`
//! times while `busy` other threads spin (the machine is not quiet in real
//! use), and their normalized scores are reported unclipped with their
//! spread, against the targets in docs/timing.md: each solution's spread
//! at most 0.05, the starting solution at 0 ± 0.05, the reference at
//! 1 ± 0.05. A benchmark, not a test: it prints, and says whether the
//! targets held; it fails only when a run is invalid.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::environment::{Environment, ScoringPlan, calibration, prepare};

use super::env_calibrate::{Scorer, solution_workspaces, tempdir};

/// The largest spread, and distance from 0 (starting) or 1 (reference),
/// that counts as steady.
pub const TOLERANCE: f64 = 0.05;

/// Spinning threads, stopped on drop.
struct Busy {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start(count: usize) -> Busy {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..count)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        Busy { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One solution's scores.
#[derive(Debug, serde::Serialize)]
struct Series {
    solution: &'static str,
    raw: Vec<f64>,
    /// Unclipped: a starting solution measured slower than its calibration is below 0.
    normalized: Vec<f64>,
    spread: f64,
    /// What the solution should normalize to.
    target: f64,
    /// The spread and every value's distance from the target are within TOLERANCE.
    steady: bool,
    invalid: usize,
}

impl Series {
    fn new(
        solution: &'static str,
        target: f64,
        raw: Vec<f64>,
        plan: &ScoringPlan,
        invalid: usize,
    ) -> Series {
        let normalized: Vec<f64> = raw
            .iter()
            .filter_map(|&r| plan.normalizer.position(r))
            .collect();
        let spread = spread(&normalized);
        let steady = invalid == 0
            && !normalized.is_empty()
            && spread <= TOLERANCE
            && normalized.iter().all(|n| (n - target).abs() <= TOLERANCE);
        Series {
            solution,
            raw,
            normalized,
            spread,
            target,
            steady,
            invalid,
        }
    }
}

/// max − min (0 for fewer than two values).
fn spread(values: &[f64]) -> f64 {
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    if values.len() < 2 { 0.0 } else { max - min }
}

pub async fn bench(
    env: &Environment,
    profile: Option<&str>,
    data_dir: &Path,
    runs: u32,
    busy: usize,
    json: bool,
) -> anyhow::Result<i32> {
    let mut plan = env.scoring(profile)?;
    let prepared = prepare::check(env, profile, data_dir)?;
    // Normalized as a new session here would be.
    let source = match (
        calibration::use_here(&mut plan, env, &prepared.dir),
        &plan.calibration,
    ) {
        (Err(why), _) => format!("the manifest's (calibration not used: {why})"),
        (Ok(()), Some(c)) => c.origin(),
        (Ok(()), None) => "the manifest's (no calibration on this machine)".to_string(),
    };
    let temp = tempdir()?;
    let (starting_ws, reference_ws) = solution_workspaces(env, &plan, &prepared, &temp)?;
    let Some(reference_ws) = reference_ws else {
        let _ = std::fs::remove_dir_all(&temp);
        anyhow::bail!(
            "{} has no reference/ folder: nothing to compare with",
            env.id()
        );
    };
    let scorer = Scorer {
        env,
        plan: &plan,
        prepared: &prepared,
    };
    if !json {
        eprintln!(
            "{}: scoring the starting and reference solutions {runs} times each, {busy} busy thread(s); starting {} and reference {}: {source}",
            env.id(),
            plan.normalizer.starting,
            plan.normalizer.reference
        );
    }
    let spinning = Busy::start(busy);
    let mut series = Vec::new();
    for (solution, target, workspace) in [
        ("starting", 0.0, &starting_ws),
        ("reference", 1.0, &reference_ws),
    ] {
        if let Err(why) = scorer.setup(workspace, solution, json).await {
            anyhow::bail!("{solution}: {why}");
        }
        let (raw, invalid) = scorer.raw_values(workspace, runs, solution, json).await;
        series.push(Series::new(solution, target, raw, &plan, invalid));
    }
    drop(spinning);
    let _ = std::fs::remove_dir_all(&temp);
    if json {
        println!(
            "{}",
            serde_json::json!({
                "env": env.id(), "profile": plan.profile, "runs": runs, "busy": busy,
                "starting": plan.normalizer.starting, "reference": plan.normalizer.reference,
                "normalized_with": source, "tolerance": TOLERANCE, "series": series,
            })
        );
    } else {
        println!(
            "{} (profile {}), {runs} runs each, {busy} busy thread(s), normalized with {source}:",
            env.id(),
            plan.profile.as_deref().unwrap_or("(base)")
        );
        for s in &series {
            let shown: Vec<String> = s.normalized.iter().map(|n| format!("{n:.3}")).collect();
            println!(
                "  {:<9} raw {}\n            normalized {}\n            spread {:.3}, target {} ± {TOLERANCE}: {}{}",
                s.solution,
                s.raw
                    .iter()
                    .map(|r| format!("{r:.4}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                shown.join(" "),
                s.spread,
                s.target,
                if s.steady { "held" } else { "NOT held" },
                if s.invalid > 0 {
                    format!(" ({} invalid run(s))", s.invalid)
                } else {
                    String::new()
                }
            );
        }
    }
    Ok(if series.iter().any(|s| s.invalid > 0) {
        1
    } else {
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_max_minus_min() {
        assert_eq!(spread(&[]), 0.0);
        assert_eq!(spread(&[0.3]), 0.0);
        assert!((spread(&[0.1, -0.02, 0.04]) - 0.12).abs() < 1e-12);
    }
}
