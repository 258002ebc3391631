//! The bundled scaling-law environment, smoke profile (CPU): it validates,
//! `prepare` builds its synthetic data and trains the hidden ground-truth
//! table, and the real scorer, run the way the server runs it, scores the
//! starting answer ~0 and the reference ~1, and wrong answers and
//! protected-file changes as invalid with a reason.
//!
//! The preparation goes to `$REBENCH_TORCH_TEST_DATA` or else
//! `target/tmp/torch-envs`, the data dir shared by the torch environment
//! tests (one torch venv for all), and is reused across runs. Preparing the
//! smoke profile trains 5 tiny models on the CPU: about a minute on 2 cores.
//! Without network (no torch) the tests print "SKIPPED: ..." to the real
//! stderr and pass, unless `REBENCH_REQUIRE_TORCH=1` (CI), which fails them.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use rebench::environment::prepare::Prepared;
use rebench::environment::{Environment, ScoringPlan, validate};
use rebench::scoring::{ScorerOutcome, protected};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::torch_env::{self, PROFILE, loud, session_workspace};

fn env_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("environments/scaling-law")
}

fn environment() -> Environment {
    Environment::load(&env_dir()).unwrap()
}

/// The smoke preparation, made once per test binary (see common::torch_env).
fn prepared() -> Option<&'static Prepared> {
    torch_env::prepared_once(&environment())
}

/// Runs the official scorer as the server does (see common::torch_env::score).
fn score(
    plan: &ScoringPlan,
    ready: &Prepared,
    ws: &Path,
    protected_at_start: &BTreeMap<String, String>,
) -> ScorerOutcome {
    torch_env::score(&env_dir(), plan, ready, ws, protected_at_start, &[])
}

fn smoke_plan(env: &Environment) -> ScoringPlan {
    env.scoring(Some(PROFILE)).unwrap()
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn bundled_environment_validates() {
    let problems = validate(&env_dir());
    assert!(problems.is_empty(), "{problems:#?}");
    let env = environment();
    assert_eq!(env.id(), "scaling-law");
    assert!(env.reference_dir().is_some());
    assert_eq!(env.hardware().gpus, 6);
    let full = env.scoring(None).unwrap();
    assert_eq!(full.profile.as_deref(), Some("full"));
    assert_eq!(full.normalizer.starting, 0.24);
    assert_eq!(full.normalizer.reference, 0.84);
    assert!(!full.visible);
    let smoke = smoke_plan(&env);
    assert_eq!(
        smoke.protected,
        vec![
            "train.py",
            "model.py",
            "data.py",
            "config.json",
            "check_answer.py"
        ]
    );
    let prepare = env.manifest.prepare.as_ref().unwrap();
    assert_eq!(prepare.requirements.as_deref(), Some("requirements.txt"));
    // Byte for byte optimize-kernel's, so both use one shared torch venv.
    let ours = std::fs::read(env_dir().join("requirements.txt")).unwrap();
    let theirs = std::fs::read(env_dir().join("../optimize-kernel/requirements.txt")).unwrap();
    assert_eq!(ours, theirs);
    // The workspace's own config.json and answer.json are the full profile's
    // (the smoke preparation overlays its own).
    let full_settings = read_json(&env_dir().join("prepare/full.json"));
    assert_eq!(
        read_json(&env_dir().join("workspace/config.json")),
        full_settings["train"]
    );
    assert_eq!(
        read_json(&env_dir().join("workspace/answer.json")),
        full_settings["starting_answer"]
    );
}

#[test]
fn the_session_workspace_has_smoke_settings_and_no_hidden_data() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let (_tmp, ws) = session_workspace(&env, ready, false);
    let config = read_json(&ws.join("config.json"));
    assert_eq!(config["profile"], "smoke");
    assert_eq!(config["target_flops"], 2e11);
    assert!(ws.join("data/train.bin").is_file());
    assert!(ws.join("data/val.bin").is_file());
    assert!(!ws.join("ground_truth.json").exists());
    assert!(!ws.join("hidden").exists());
    assert!(ready.dir.join("ground_truth.json").is_file());
    assert!(ready.dir.join("hidden/test.bin").is_file());
}

/// Scores `ws` twice: the scorer is deterministic, so both raws must agree.
fn normalized(plan: &ScoringPlan, ready: &Prepared, ws: &Path) -> (f64, f64) {
    let hashes = protected::hash_files(ws, &plan.protected).unwrap();
    let first = score(plan, ready, ws, &hashes);
    assert!(first.valid, "{first:#?}");
    let second = score(plan, ready, ws, &hashes);
    assert_eq!(first.raw, second.raw);
    let raw = first.raw.unwrap();
    (raw, plan.normalizer.normalize(raw).unwrap())
}

#[test]
fn starting_scores_about_zero_and_reference_about_one() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let (_a, start_ws) = session_workspace(&env, ready, false);
    let (start_raw, start) = normalized(&plan, ready, &start_ws);
    let (_b, ref_ws) = session_workspace(&env, ready, true);
    let (ref_raw, reference) = normalized(&plan, ready, &ref_ws);
    loud(&format!(
        "scaling-law smoke: starting raw {start_raw:.4} (normalized {start:.3}), \
         reference raw {ref_raw:.4} (normalized {reference:.3})"
    ));
    // The table is trained at prepare time; on another CPU its losses differ
    // a little (float rounding in training), which moves both raws by a few
    // hundredths: hence the tolerance.
    assert!(
        start <= 0.15,
        "starting normalized {start} (raw {start_raw})"
    );
    assert!(
        reference >= 0.85,
        "reference normalized {reference} (raw {ref_raw})"
    );
}

#[test]
fn wrong_answers_are_invalid_with_a_reason() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let cases: [(&str, Option<&str>, &str); 7] = [
        ("no answer", None, "answer.json not found in the workspace"),
        (
            "not JSON",
            Some("{\"n_embd\": 32,"),
            "answer.json is not valid JSON",
        ),
        (
            "a list",
            Some("[32, 800, 2.0]"),
            "answer.json must hold a JSON object",
        ),
        (
            "missing key",
            Some("{\"n_embd\": 32, \"max_iters\": 800}"),
            "answer.json lacks loss_prediction",
        ),
        (
            "bad n_embd",
            Some("{\"n_embd\": 30, \"max_iters\": 800, \"loss_prediction\": 2.0}"),
            "n_embd must be a positive multiple of 8",
        ),
        (
            "text prediction",
            Some("{\"n_embd\": 32, \"max_iters\": 800, \"loss_prediction\": \"2.0\"}"),
            "loss_prediction must be a finite number",
        ),
        (
            "over budget",
            Some("{\"n_embd\": 32, \"max_iters\": 100000, \"loss_prediction\": 2.0}"),
            "the target budget of 2e+11; at most 1.1x is allowed",
        ),
    ];
    for (what, answer, expected) in cases {
        let (_tmp, ws) = session_workspace(&env, ready, false);
        match answer {
            Some(text) => std::fs::write(ws.join("answer.json"), text).unwrap(),
            None => std::fs::remove_file(ws.join("answer.json")).unwrap(),
        }
        let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
        let outcome = score(&plan, ready, &ws, &hashes);
        assert!(!outcome.valid, "{what}: {outcome:#?}");
        assert!(
            outcome.message.contains(expected),
            "{what}: {:?} lacks {expected:?}",
            outcome.message
        );
    }
}

#[test]
fn a_changed_protected_file_is_caught() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let (_tmp, ws) = session_workspace(&env, ready, false);
    let at_start = protected::hash_files(&ws, &plan.protected).unwrap();
    let config = std::fs::read_to_string(ws.join("config.json")).unwrap();
    std::fs::write(
        ws.join("config.json"),
        config.replace(
            "\"experiment_flop_cap\": 4000000000.0",
            "\"experiment_flop_cap\": 1e15",
        ),
    )
    .unwrap();
    assert_ne!(
        std::fs::read_to_string(ws.join("config.json")).unwrap(),
        config
    );
    let outcome = score(&plan, ready, &ws, &at_start);
    assert!(!outcome.valid);
    assert_eq!(outcome.message, "protected file changed: config.json");
}

/// The participant's tools in a smoke workspace: train.py refuses a run over
/// the experiment cap, runs a small one, and check_answer.py checks answers.
#[test]
fn train_py_enforces_the_cap_and_check_answer_agrees_with_the_scorer() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let (_tmp, ws) = session_workspace(&env, ready, false);
    let python = ready.bin_dir.as_ref().unwrap().join("python");
    let run = |args: &[&str]| {
        let out = Command::new(&python)
            .args(args)
            .current_dir(&ws)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, stderr) = run(&["train.py", "--n_embd", "32", "--max_iters", "100"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("over the experiment cap of 4e+09 FLOPs"),
        "{stderr}"
    );
    let (code, stdout, stderr) = run(&["train.py", "--n_embd", "8", "--max_iters", "20"]);
    assert_eq!(code, Some(0), "{stderr}");
    let result: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    // 6 * params * tokens with params = 12*2*8^2 + (2*2 + 1 + 2*256 + 64)*8.
    let params = 12 * 2 * 64 + (4 + 1 + 512 + 64) * 8;
    assert_eq!(result["params"], params);
    assert_eq!(result["flops"], 6 * params * 64 * 16 * 20);
    assert!(result["final_val_loss"].as_f64().unwrap() < 5.6);

    let (code, stdout, _) = run(&["check_answer.py"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.starts_with("valid: "), "{stdout}");
    std::fs::write(
        ws.join("answer.json"),
        "{\"n_embd\": 32, \"max_iters\": 100000, \"loss_prediction\": 2.0}",
    )
    .unwrap();
    let (code, stdout, _) = run(&["check_answer.py"]);
    assert_eq!(code, Some(1));
    assert!(stdout.contains("over 1.1x the target"), "{stdout}");
}

/// The scorer reads only `answer.json`, the file the instructions name: a
/// file named like the reference's per-profile answers is not a second,
/// hidden way in (issue 19).
#[test]
fn only_answer_json_is_read() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let (_tmp, ws) = session_workspace(&env, ready, false);
    std::fs::remove_file(ws.join("answer.json")).unwrap();
    let good = env.reference_dir().unwrap().join("answer.smoke.json");
    std::fs::copy(&good, ws.join("answer.smoke.json")).unwrap();
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    let outcome = score(&plan, ready, &ws, &hashes);
    assert!(!outcome.valid, "{outcome:#?}");
    assert!(
        outcome.message.contains("answer.json not found"),
        "{}",
        outcome.message
    );
}
