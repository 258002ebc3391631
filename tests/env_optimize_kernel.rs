//! The bundled optimize-kernel environment, smoke profile (CPU): it
//! validates, `prepare` builds its torch venv, and the real scorer, run the
//! way the server runs it, times the reference about one normalized unit
//! above the starting solution (in the same run, so on any machine's
//! speed), and scores wrong solutions and protected-file changes as invalid.
//!
//! The preparation goes to `$REBENCH_TORCH_TEST_DATA` or else
//! `target/tmp/torch-envs`, the data dir shared by all torch environment
//! tests, and is reused across runs (the first one installs torch from
//! PyPI into the shared venv: a few minutes, ~5 GB). Without network the
//! tests print "SKIPPED: ..." to the real stderr and pass, unless
//! `REBENCH_REQUIRE_TORCH=1`, which makes that a failure (for CI).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use rebench::environment::files::{copy_workspace, overlay};
use rebench::environment::prepare::Prepared;
use rebench::environment::{Environment, ScoringPlan, validate};
use rebench::scoring::{ScorerOutcome, protected};
use std::path::{Path, PathBuf};

use common::torch_env::{self, PROFILE, loud, measured_span};

fn env_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("environments/optimize-kernel")
}

fn environment() -> Environment {
    Environment::load(&env_dir()).unwrap()
}

/// The smoke preparation, made once per test binary (see common::torch_env).
fn prepared() -> Option<&'static Prepared> {
    torch_env::prepared_once(&environment())
}

fn workspace(env: &Environment, with_reference: bool) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    copy_workspace(&env.workspace_dir(), &ws).unwrap();
    if with_reference {
        overlay(&env.reference_dir().unwrap(), &ws).unwrap();
    }
    (tmp, ws)
}

/// Runs the official scorer as the server does (see common::torch_env::score).
fn score(
    plan: &ScoringPlan,
    ready: &Prepared,
    ws: &Path,
    protected_at_start: &std::collections::BTreeMap<String, String>,
    extra_env: &[(&str, &str)],
) -> ScorerOutcome {
    torch_env::score(&env_dir(), plan, ready, ws, protected_at_start, extra_env)
}

fn smoke_plan(env: &Environment) -> ScoringPlan {
    env.scoring(Some(PROFILE)).unwrap()
}

/// Scores `ws` (valid required) up to four times until `good_enough(raw)`:
/// a busy 2-core machine slows single runs by a third, and a participant
/// would simply score again. The fastest run is kept (a runtime: lower is
/// better).
fn fastest_raw(
    plan: &ScoringPlan,
    ready: &Prepared,
    ws: &Path,
    good_enough: impl Fn(f64) -> bool,
) -> f64 {
    let hashes = protected::hash_files(ws, &plan.protected).unwrap();
    let mut fastest = f64::INFINITY;
    for _ in 0..4 {
        let outcome = score(plan, ready, ws, &hashes, &[]);
        assert!(outcome.valid, "{outcome:#?}");
        fastest = fastest.min(outcome.raw.unwrap());
        if good_enough(fastest) {
            break;
        }
    }
    fastest
}

#[test]
fn bundled_environment_validates() {
    let problems = validate(&env_dir());
    assert!(problems.is_empty(), "{problems:#?}");
    let env = environment();
    assert_eq!(env.id(), "optimize-kernel");
    assert!(env.reference_dir().is_some());
    let hw = env.hardware();
    assert_eq!(hw.gpus, 1);
    let full = env.scoring(None).unwrap();
    assert_eq!(full.profile.as_deref(), Some("full"));
    assert_eq!(full.normalizer.starting, 4.76);
    assert_eq!(full.normalizer.reference, 1.6);
    assert_eq!(full.env["OPTIMIZE_KERNEL_DEVICE"], "cuda");
    let smoke = smoke_plan(&env);
    assert_eq!(smoke.env["OPTIMIZE_KERNEL_DEVICE"], "cpu");
    assert_eq!(smoke.env["OPTIMIZE_KERNEL_N"], "1000000");
    assert!(smoke.normalizer.reference * 2.0 < smoke.normalizer.starting);
    assert_eq!(smoke.protected, vec!["score.py"]);
    let prepare = env.manifest.prepare.as_ref().unwrap();
    assert_eq!(prepare.requirements.as_deref(), Some("requirements.txt"));
}

/// The manifest's smoke values are absolute times from one machine, and a
/// faster or slower one moves both solutions' normalized scores (CI once
/// timed the start at 20.8 ms against the manifest's 28.1 then: 0.41, not
/// ~0).
/// Sessions get this machine's own values from per-machine calibration
/// (env_calibration tests that path); what this test holds, whatever the
/// machine's speed, is the ratio of the two measured in the same run: the
/// reference lies about one normalized unit above the start.
#[test]
fn the_reference_scores_about_one_above_the_start_on_any_machine() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);

    let (_a, start_ws) = workspace(&env, false);
    let start_raw = fastest_raw(&plan, ready, &start_ws, |_| true);
    assert!(!start_ws.join("__pycache__").exists());
    let (_b, ref_ws) = workspace(&env, true);
    let ref_raw = fastest_raw(&plan, ready, &ref_ws, |raw| {
        measured_span(&plan, start_raw, raw) >= 0.7
    });
    let span = measured_span(&plan, start_raw, ref_raw);
    loud(&format!(
        "optimize-kernel smoke: starting {start_raw:.2} ms, reference {ref_raw:.2} ms: \
         span {span:.3} in the manifest's units (normalized against its values: \
         {:.3} and {:.3})",
        plan.normalizer.normalize(start_raw).unwrap(),
        plan.normalizer.normalize(ref_raw).unwrap(),
    ));
    // Manifest: starting 21.9 ms, reference 9.6 ms (medians of 5; timed
    // from outside with the round trip kept, OPTIMIZE_KERNEL_BASELINE =
    // "keep", so the ratio is about 2.3, not the kernels' 5). The project's
    // CI measured 20.8 and 9.53 ms (span 0.95), a 2-core machine here 21.3
    // to 25.2 and 10.1 ms (0.91 to 1.11). The floor, 0.5, is the reference 1.5x faster than the
    // start in the same run, which loaded 2-core machines met in every CI
    // run so far. The ceiling, 2.0, is the kernels' own 5x ratio: with the
    // round trip kept, only a start slowed by noise comes near it.
    assert!(
        (0.5..=2.0).contains(&span),
        "span {span}: starting {start_raw} ms, reference {ref_raw} ms"
    );
}

#[test]
fn wrong_solutions_are_invalid_with_a_reason() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let cases = [
        (
            "inclusive parity",
            "    odd = (torch.cumsum((x > 0).to(torch.int32), 0) & 1)\n    \
             return torch.cumsum(x * odd, 0, dtype=torch.int32)\n",
            "wrong answer (n=",
        ),
        (
            "int64 output",
            "    return torch.zeros_like(x, dtype=torch.int64)\n",
            "wrong dtype: output is torch.int64, expected torch.int32",
        ),
        (
            "short output",
            "    return torch.zeros(max(len(x) - 1, 0), dtype=torch.int32)\n",
            "wrong shape: output is (0,), expected (1,)",
        ),
        (
            "a list",
            "    return [0] * len(x)\n",
            "prefix_sum must return a torch.Tensor, got list",
        ),
        (
            "an exception",
            "    raise RuntimeError('boom')\n",
            "prefix_sum raised RuntimeError: boom",
        ),
    ];
    for (what, body, expected) in cases {
        let (_tmp, ws) = workspace(&env, false);
        std::fs::write(
            ws.join("solution.py"),
            format!("import torch\n\ndef prefix_sum(x):\n    print('noise')\n{body}"),
        )
        .unwrap();
        let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
        let outcome = score(&plan, ready, &ws, &hashes, &[]);
        assert!(!outcome.valid, "{what}: {outcome:#?}");
        let error = outcome.scorer_message["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(expected),
            "{what}: {error:?} in {outcome:#?}"
        );
        assert!(
            outcome.message.contains(expected),
            "{what}: {}",
            outcome.message
        );
    }
}

#[test]
fn a_changed_protected_file_is_caught() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let (_tmp, ws) = workspace(&env, false);
    let at_start = protected::hash_files(&ws, &plan.protected).unwrap();
    let mut text = std::fs::read_to_string(ws.join("score.py")).unwrap();
    text.push_str("\n# faster now\n");
    std::fs::write(ws.join("score.py"), text).unwrap();
    let outcome = score(&plan, ready, &ws, &at_start, &[]);
    assert!(!outcome.valid);
    assert_eq!(outcome.message, "protected file changed: score.py");
}

/// The Triton kernels cannot run without a GPU, but Triton's interpreter
/// runs them on CPU tensors: the scorer's exactness checks must pass.
#[test]
fn reference_triton_kernels_are_exact_under_the_interpreter() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let (_tmp, ws) = workspace(&env, true);
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    let extra = [
        ("TRITON_INTERPRET", "1"),
        ("OPTIMIZE_KERNEL_N", "100003"),
        ("OPTIMIZE_KERNEL_REPEATS", "1"),
        ("OPTIMIZE_KERNEL_WARMUP", "0"),
    ];
    let outcome = score(&plan, ready, &ws, &hashes, &extra);
    assert!(outcome.valid, "{outcome:#?}");
    assert_eq!(outcome.scorer_message["n"], 100003);
}

#[test]
fn full_profile_without_a_gpu_is_invalid_with_a_reason() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = env.scoring(Some("full")).unwrap();
    let (_tmp, ws) = workspace(&env, false);
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    // CUDA_VISIBLE_DEVICES="" hides any GPU, so this holds on GPU machines too.
    let outcome = score(&plan, ready, &ws, &hashes, &[("CUDA_VISIBLE_DEVICES", "")]);
    assert!(!outcome.valid);
    assert!(
        outcome.message.contains("this profile times on a CUDA GPU"),
        "{}",
        outcome.message
    );
}

#[test]
fn in_an_isolated_session_the_solution_runs_where_the_reference_is_not() {
    let Some(ready) = prepared() else { return };
    if !common::bwrap_works("the isolated optimize-kernel test") {
        return;
    }
    let env = environment();
    let plan = smoke_plan(&env);
    let (_a, ws) = workspace(&env, false);
    // A solution that refuses to run where it could read the reference.
    let reference = env_dir()
        .canonicalize()
        .unwrap()
        .join("reference/solution.py");
    let starting = std::fs::read_to_string(ws.join("solution.py")).unwrap();
    std::fs::write(
        ws.join("solution.py"),
        format!(
            "import os as _os\nif _os.path.exists({:?}):\n    raise RuntimeError('LEAKED')\n{starting}",
            reference.display().to_string()
        ),
    )
    .unwrap();
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    let (open, jailed, jail) =
        torch_env::score_open_and_jailed(&env_dir(), &plan, ready, &ws, &hashes);
    assert!(!open.valid && open.message.contains("LEAKED"), "{open:#?}");
    assert!(jailed.valid, "{jailed:#?}");
    assert_eq!(jailed.details["runner"], "REBENCH_JAIL", "{jailed:#?}");

    // Wrong answers are still caught in the jail.
    std::fs::write(
        ws.join("solution.py"),
        "import torch\ndef prefix_sum(x):\n    return torch.zeros_like(x)\n",
    )
    .unwrap();
    let wrong = score(
        &plan,
        ready,
        &ws,
        &hashes,
        &[("REBENCH_JAIL", jail.prefix.as_str())],
    );
    assert!(
        !wrong.valid && wrong.message.contains("wrong answer"),
        "{wrong:#?}"
    );
}
