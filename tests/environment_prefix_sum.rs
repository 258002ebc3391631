//! The bundled prefix-sum environment: it validates, and its scorer follows
//! the protocol on the starting, reference and a wrong solution.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use rebench::environment::files::{copy_workspace, overlay};
use rebench::environment::{Environment, validate};
use std::path::{Path, PathBuf};
use std::process::Command;

fn env_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("environments/prefix-sum")
}

fn python_available() -> bool {
    let found = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: python3 not found");
    }
    found
}

/// Runs the smoke-profile scorer on `workspace` and returns its last stdout line as JSON.
fn score(env: &Environment, workspace: &Path) -> serde_json::Value {
    let plan = env.scoring(Some("smoke")).unwrap();
    let argv = plan.argv(&env.dir, workspace);
    let output = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(workspace)
        .envs(plan.scorer_env(&env.dir, workspace))
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "scorer failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let last = stdout.lines().last().expect("scorer printed nothing");
    serde_json::from_str(last).unwrap()
}

fn starting_workspace(env: &Environment) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    copy_workspace(&env.workspace_dir(), &ws).unwrap();
    (tmp, ws)
}

#[test]
fn bundled_environment_validates() {
    let problems = validate(&env_dir());
    assert!(problems.is_empty(), "{problems:#?}");
    let env = Environment::load(&env_dir()).unwrap();
    assert_eq!(env.id(), "prefix-sum");
    assert!(env.reference_dir().is_some());
    assert!(env.instructions_path().is_file());
    let full = env.scoring(None).unwrap();
    assert_eq!(full.profile.as_deref(), Some("full"));
    let smoke = env.scoring(Some("smoke")).unwrap();
    assert_eq!(smoke.timeout.as_secs(), 60);
    assert!(smoke.normalizer.reference < smoke.normalizer.starting);
}

#[test]
fn scorer_times_starting_and_reference_solutions() {
    if !python_available() {
        return;
    }
    let env = Environment::load(&env_dir()).unwrap();

    let (_start_tmp, start_ws) = starting_workspace(&env);
    let start = score(&env, &start_ws);
    let start_raw = start["raw"].as_f64().unwrap_or_else(|| panic!("{start}"));
    assert!(start_raw > 0.0, "{start}");
    assert_eq!(start["message"]["n"], 100000);
    assert!(!start_ws.join("__pycache__").exists());

    let (_ref_tmp, ref_ws) = starting_workspace(&env);
    overlay(&env.reference_dir().unwrap(), &ref_ws).unwrap();
    // Timings vary on a loaded machine: the best of up to three runs.
    let mut tries = Vec::new();
    let mut ref_raw = f64::INFINITY;
    for _ in 0..3 {
        let reference = score(&env, &ref_ws);
        let raw = reference["raw"]
            .as_f64()
            .unwrap_or_else(|| panic!("{reference}"));
        assert!(raw > 0.0, "{reference}");
        ref_raw = ref_raw.min(raw);
        tries.push(reference);
        if ref_raw < start_raw {
            break;
        }
    }
    assert!(ref_raw < start_raw, "start {start} references {tries:?}");
}

/// Issue 19: nothing timed beside the solution is taken off its time. A
/// baseline subtracted per call could be slowed by a process of the
/// participant's that spins only while their own call is not running,
/// forging a faster score; so the raw score must come from the solution's
/// own call times alone: each process's first quartile, the median of those.
#[test]
fn the_score_is_the_solutions_own_call_times_and_nothing_subtracted() {
    if !python_available() {
        return;
    }
    let env = Environment::load(&env_dir()).unwrap();
    let (_tmp, ws) = starting_workspace(&env);
    let result = score(&env, &ws);
    let raw = result["raw"].as_f64().unwrap_or_else(|| panic!("{result}"));
    let per_process: Vec<Vec<f64>> = result["details"]["times_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p.as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_f64().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(per_process.len(), 8, "{result}");
    // statistics.quantiles(method="inclusive"), n = 4: the first cut.
    let first_quartile = |times: &[f64]| {
        let mut sorted = times.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = (sorted.len() - 1) as f64 * 0.25;
        let (low, frac) = (at.floor() as usize, at.fract());
        sorted[low] + (sorted[(low + 1).min(sorted.len() - 1)] - sorted[low]) * frac
    };
    let mut firsts: Vec<f64> = per_process.iter().map(|p| first_quartile(p)).collect();
    firsts.sort_by(f64::total_cmp);
    let median = (firsts[3] + firsts[4]) / 2.0;
    assert!(
        (raw - median).abs() < 1e-9,
        "raw {raw}, recomputed {median}: {result}"
    );
    let fastest = per_process
        .iter()
        .flatten()
        .copied()
        .fold(f64::INFINITY, f64::min);
    assert!(
        raw >= fastest,
        "raw {raw} is below every call's time {fastest}"
    );
    assert!(result["details"].get("baseline_ms").is_none(), "{result}");
}

#[test]
fn scorer_rejects_a_wrong_solution() {
    if !python_available() {
        return;
    }
    let env = Environment::load(&env_dir()).unwrap();
    let (_tmp, ws) = starting_workspace(&env);
    std::fs::write(
        ws.join("solution.py"),
        "def prefix_sum(xs):\n    print('noise')\n    return [0] * len(xs)\n",
    )
    .unwrap();
    let result = score(&env, &ws);
    assert!(result["raw"].is_null(), "{result}");
    let error = result["message"]["error"].as_str().unwrap();
    assert!(error.contains("wrong answer"), "{error}");
}

#[test]
fn scorer_reports_exceptions() {
    if !python_available() {
        return;
    }
    let env = Environment::load(&env_dir()).unwrap();
    let (_tmp, ws) = starting_workspace(&env);
    std::fs::write(
        ws.join("solution.py"),
        "def prefix_sum(xs):\n    raise RuntimeError('boom')\n",
    )
    .unwrap();
    let result = score(&env, &ws);
    assert!(result["raw"].is_null(), "{result}");
    let error = result["message"]["error"].as_str().unwrap();
    assert!(error.contains("RuntimeError: boom"), "{error}");
}
