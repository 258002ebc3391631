//! The bundled optimize-llm-foundry environment, smoke profile (CPU): it
//! validates, `prepare` makes its tiny base model, data and hidden reference
//! weights, and the real scorer, run the way the server runs it, times the
//! starting finetune.sh and the reference solution (about one normalized
//! unit faster, in the same run), and rejects, each with its reason: a
//! script that changes the computation (L1 over the tolerance), one that
//! ignores finetune.yaml's options (the config probe), one that leaves no
//! trained_model/, a failing one, and changed provided or protected files. The scorer gives
//! finetune.sh none of rebench's variables (no REBENCH_PREPARED).
//!
//! A session workspace is the environment's `workspace/` with the
//! preparation's `workspace/` folder (env.sh, base model, data) laid over it,
//! as the server assembles it. The preparation goes to
//! `$REBENCH_TORCH_TEST_DATA` or else `target/tmp/torch-envs` (shared by all
//! torch environment tests; see common::torch_env) and is reused across runs;
//! without network for the torch venv the tests print "SKIPPED: ..." and
//! pass, unless `REBENCH_REQUIRE_TORCH=1`.
//!
//! Timing on a shared CI machine is noisy and its speed is not ours, so
//! the bound on the span is wide; what must hold firmly is that the
//! reference is valid and clearly faster than the starting script.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use rebench::environment::prepare::Prepared;
use rebench::environment::{Environment, ScoringPlan, validate};
use rebench::scoring::{ScorerOutcome, protected};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::torch_env::{self, PROFILE, invalid_error, loud, measured_span, session_workspace};

fn env_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("environments/optimize-llm-foundry")
}

fn environment() -> Environment {
    Environment::load(&env_dir()).unwrap()
}

/// The smoke preparation, made once per test binary (see common::torch_env).
fn prepared() -> Option<&'static Prepared> {
    torch_env::prepared_once(&environment())
}

fn score(
    plan: &ScoringPlan,
    ready: &Prepared,
    ws: &Path,
    protected_at_start: &BTreeMap<String, String>,
) -> ScorerOutcome {
    torch_env::score(&env_dir(), plan, ready, ws, protected_at_start, &[])
}

/// The smoke plan with one timed run per score (the profile's three are
/// tested once, in `the_reference_scores_about_one_above_the_start_on_any_machine`).
fn smoke_plan(env: &Environment) -> ScoringPlan {
    let mut plan = env.scoring(Some(PROFILE)).unwrap();
    plan.env
        .insert("OPTIMIZE_LLM_FOUNDRY_RUNS".into(), "1".into());
    plan
}

/// Scores `ws` with its protected files hashed as they are now.
fn score_now(plan: &ScoringPlan, ready: &Prepared, ws: &Path) -> ScorerOutcome {
    let hashes = protected::hash_files(ws, &plan.protected).unwrap();
    score(plan, ready, ws, &hashes)
}

/// Replaces the one occurrence of `old` in `ws/rel` by `new`.
fn edit(ws: &Path, rel: &str, old: &str, new: &str) {
    let path = ws.join(rel);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches(old).count(), 1, "{old:?} in {rel}");
    std::fs::write(&path, text.replacen(old, new, 1)).unwrap();
}

fn tolerance(ready: &Prepared) -> f64 {
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ready.dir.join("info.json")).unwrap()).unwrap();
    info["tolerance_l1"].as_f64().unwrap()
}

/// The reference solution's one-process command line in reference/finetune.sh
/// (smoke scale), its start and its last argument.
const FAST: &str = "python scripts/fast_finetune.py finetune.yaml";
const LAST_ARG: &str = "model_name_or_path=\"${BASE_MODEL}\"\n  exit 0";

#[test]
fn bundled_environment_validates() {
    let problems = validate(&env_dir());
    assert!(problems.is_empty(), "{problems:#?}");
    let env = environment();
    assert_eq!(env.id(), "optimize-llm-foundry");
    assert!(env.reference_dir().is_some());
    assert_eq!(env.hardware().gpus, 4);
    assert_eq!(env.hardware_for(Some(PROFILE)).gpus, 0);
    let full = env.scoring(None).unwrap();
    assert_eq!(full.profile.as_deref(), Some("full"));
    assert_eq!(full.normalizer.starting, 272.0);
    assert_eq!(full.normalizer.reference, 94.0);
    let smoke = smoke_plan(&env);
    assert!(smoke.normalizer.reference < smoke.normalizer.starting);
    assert_eq!(smoke.protected, vec!["score.py"]);
    // Same requirements as every torch environment: one shared venv. The
    // full scale has its own (llm-foundry).
    let ours = std::fs::read(env_dir().join("requirements.txt")).unwrap();
    let kernel = std::fs::read(env_dir().join("../optimize-kernel/requirements.txt")).unwrap();
    assert_eq!(ours, kernel);
    let manifest = std::fs::read_to_string(env_dir().join("environment.toml")).unwrap();
    assert!(manifest.contains("requirements = \"requirements-full.txt\""));
    let full_reqs = std::fs::read_to_string(env_dir().join("requirements-full.txt")).unwrap();
    assert!(
        full_reqs.lines().any(|l| l.starts_with("llm-foundry==")),
        "{full_reqs}"
    );
    // One finetune.sh for both scales; the instructions forbid downloads.
    let instructions = std::fs::read_to_string(env_dir().join("instructions.md")).unwrap();
    assert!(instructions.contains("Do not download or install new software"));
}

#[test]
fn the_reference_scores_about_one_above_the_start_on_any_machine() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = env.scoring(Some(PROFILE)).unwrap();
    let tol = tolerance(ready);

    let (_a, start_ws) = session_workspace(&env, ready, false);
    let start = score_now(&plan, ready, &start_ws);
    assert!(start.valid, "{start:#?}");
    let (_b, ref_ws) = session_workspace(&env, ready, true);
    let reference = score_now(&plan, ready, &ref_ws);
    assert!(reference.valid, "{reference:#?}");

    let (start_raw, ref_raw) = (start.raw.unwrap(), reference.raw.unwrap());
    let start_n = plan.normalizer.normalize(start_raw).unwrap();
    let ref_n = plan.normalizer.normalize(ref_raw).unwrap();
    let l1 = |o: &ScorerOutcome, key: &str| o.scorer_message[key].as_f64().unwrap();
    loud(&format!(
        "optimize-llm-foundry smoke: starting {start_raw:.1} s (normalized {start_n:.3}, L1 {}, probe L1 {}), \
         reference {ref_raw:.1} s (normalized {ref_n:.3}, L1 {}, probe L1 {}), tolerance {tol}",
        l1(&start, "l1"),
        l1(&start, "probe_l1"),
        l1(&reference, "l1"),
        l1(&reference, "probe_l1"),
    ));
    // Three timed runs each, the fastest scored, their spread shown.
    for outcome in [&start, &reference] {
        let runs = outcome.scorer_message["runs_s"].as_array().unwrap();
        assert_eq!(runs.len(), 3, "{:?}", outcome.scorer_message);
        let fastest = runs
            .iter()
            .filter_map(|r| r.as_f64())
            .fold(f64::MAX, f64::min);
        assert!((fastest - outcome.raw.unwrap()).abs() < 0.001);
        assert!(outcome.scorer_message["spread_s"].as_f64().unwrap() >= 0.0);
    }
    // The starting script computes the reference weights itself (bitwise).
    assert_eq!(l1(&start, "l1"), 0.0);
    assert_eq!(l1(&start, "probe_l1"), 0.0);
    // The reference solution differs by float rounding only, well inside.
    assert!(l1(&reference, "l1") < tol / 10.0);
    assert!(l1(&reference, "probe_l1") < tol / 10.0);
    // Timing: the reference must be clearly faster in the same run. The
    // normalized scores against the manifest's absolute times follow the
    // machine's speed (sessions use per-machine calibration), so what is
    // held is the span between the two, which does not: the manifest's
    // 21.1 and 6.54 s are 1 unit apart, loaded machines' figures in the
    // manifest give 0.75-1.15, this machine's test runs 0.96-1.22.
    let span = measured_span(&plan, start_raw, ref_raw);
    assert!(ref_raw * 2.0 < start_raw, "{ref_raw} vs {start_raw}");
    assert!(
        (0.55..=2.2).contains(&span),
        "span {span} in the manifest's units: starting {start_raw} s ({start_n}), reference {ref_raw} s ({ref_n})"
    );
    // The workspace's own check runs the script and compares with a model.
    let output = Command::new("python3")
        .args(["score.py", "--compare"])
        .arg(ready.dir.join("reference/main"))
        .current_dir(&ref_ws)
        .envs(ready.session_env(std::env::var_os("PATH").as_deref()))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("(within the tolerance"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_changed_computation_is_invalid() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    // Two fewer steps (22 of 24 batches): faster, and not the same model.
    let (_tmp, ws) = session_workspace(&env, ready, true);
    edit(
        &ws,
        "finetune.sh",
        LAST_ARG,
        "model_name_or_path=\"${BASE_MODEL}\" max_duration=22ba\n  exit 0",
    );
    let error = invalid_error(&score_now(&plan, ready, &ws));
    assert!(
        error.starts_with("trained weights differ from the reference: L1 "),
        "{error}"
    );
    assert!(
        error.contains(&format!("> tolerance {}", tolerance(ready))),
        "{error}"
    );
}

#[test]
fn a_script_that_ignores_its_config_fails_the_probe() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    // Reads a private copy of the original config instead of finetune.yaml:
    // right on finetune.yaml itself, wrong on any other.
    let (_tmp, ws) = session_workspace(&env, ready, true);
    std::fs::copy(ws.join("finetune.yaml"), ws.join("frozen.yaml")).unwrap();
    edit(
        &ws,
        "finetune.sh",
        FAST,
        "python scripts/fast_finetune.py frozen.yaml",
    );
    let outcome = score_now(&plan, ready, &ws);
    let error = invalid_error(&outcome);
    assert!(error.starts_with("config probe: "), "{error}");
    assert!(
        error.contains("the trained weights differ from the reference's: L1 "),
        "{error}"
    );
    assert!(error.contains("nothing hard-coded"), "{error}");
    // The timed run itself was fine.
    assert!(outcome.details["l1"].as_f64().unwrap() < tolerance(ready));
}

#[test]
fn missing_output_failures_and_the_environment_of_finetune_sh() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);

    // Exits 0 but trains nothing; records what environment it was given.
    let (_a, ws) = session_workspace(&env, ready, false);
    std::fs::write(
        ws.join("finetune.sh"),
        "cd \"$(dirname \"$0\")\"\nenv > seen_env.txt\necho done\n",
    )
    .unwrap();
    let error = invalid_error(&score_now(&plan, ready, &ws));
    assert_eq!(
        error,
        "timed run: finetune.sh left no usable trained_model/: no trained_model/ folder"
    );
    let seen = std::fs::read_to_string(ws.join("seen_env.txt")).unwrap();
    assert!(seen.contains("PATH="), "{seen}");
    assert!(!seen.contains("REBENCH_"), "{seen}");
    assert!(
        !seen.contains(&*ready.dir.to_string_lossy()),
        "the preparation folder leaked: {seen}"
    );

    // A stale trained_model/ from an earlier run does not count.
    std::fs::create_dir_all(ws.join("trained_model")).unwrap();
    std::fs::copy(
        ready.dir.join("reference/main/pytorch_model.bin"),
        ws.join("trained_model/pytorch_model.bin"),
    )
    .unwrap();
    let error = invalid_error(&score_now(&plan, ready, &ws));
    assert!(error.contains("no trained_model/ folder"), "{error}");

    // A failing script: its exit code and last output lines.
    std::fs::write(ws.join("finetune.sh"), "echo 'out of memory' >&2\nexit 3\n").unwrap();
    let error = invalid_error(&score_now(&plan, ready, &ws));
    assert!(
        error.starts_with("timed run: finetune.sh failed (exit 3)")
            && error.contains("out of memory"),
        "{error}"
    );

    // Not a model file.
    std::fs::write(
        ws.join("finetune.sh"),
        "cd \"$(dirname \"$0\")\"\nmkdir -p trained_model\necho hi > trained_model/pytorch_model.bin\n",
    )
    .unwrap();
    let error = invalid_error(&score_now(&plan, ready, &ws));
    assert!(
        error.contains("could not load pytorch_model.bin with torch.load(weights_only=True)"),
        "{error}"
    );
}

#[test]
fn changed_provided_or_protected_files_are_caught() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);

    // score.py: the server's protected-file check.
    let (_a, ws) = session_workspace(&env, ready, true);
    let at_start = protected::hash_files(&ws, &plan.protected).unwrap();
    let mut text = std::fs::read_to_string(ws.join("score.py")).unwrap();
    text.push_str("\n# tweaked\n");
    std::fs::write(ws.join("score.py"), text).unwrap();
    let outcome = score(&plan, ready, &ws, &at_start);
    assert!(!outcome.valid);
    assert_eq!(outcome.message, "protected file changed: score.py");

    // The provided files come from the preparation: the scorer compares
    // them with the hashes `prepare` recorded, before running anything.
    let (_b, ws) = session_workspace(&env, ready, true);
    edit(&ws, "env.sh", "OMP_NUM_THREADS=1", "OMP_NUM_THREADS=2");
    let error = invalid_error(&score_now(&plan, ready, &ws));
    assert!(
        error.starts_with("protected file changed: env.sh"),
        "{error}"
    );
    let (_c, ws) = session_workspace(&env, ready, true);
    std::fs::remove_file(ws.join("base_model/pytorch_model.bin")).unwrap();
    let error = invalid_error(&score_now(&plan, ready, &ws));
    assert!(
        error.starts_with("protected file missing: base_model/pytorch_model.bin"),
        "{error}"
    );
}

/// The full scale needs its own venv (llm-foundry), 4 GPUs and internet;
/// here its preparation must stop at once with a message saying what is
/// missing, not fake anything.
#[test]
fn full_preparation_fails_clearly_without_its_venv() {
    let Some(ready) = prepared() else { return };
    let dir = env_dir();
    let out = tempfile::tempdir().unwrap();
    let output = Command::new("python3")
        .arg(dir.join("prepare/prepare.py"))
        .arg(dir.join("prepare/smoke_data.py"))
        .arg(dir.join("prepare/full.py"))
        .env("REBENCH_PREPARED", out.path())
        .env("OPTIMIZE_LLM_FOUNDRY_SCALE", "full")
        .envs(ready.session_env(std::env::var_os("PATH").as_deref()))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("optimize-llm-foundry full profile cannot be prepared here: No module named 'llmfoundry'"),
        "{stderr}"
    );
    assert!(!out.path().join("info.json").exists());

    // Its config probe is made from RE-Bench's finetune.yaml by exact line
    // edits (each must match once): all of them apply.
    let program = "import sys; sys.path[:0] = sys.argv[1:3]\n\
                   import prepare, full\n\
                   text = open(sys.argv[3]).read()\n\
                   probe = prepare.make_probe(text, full.PROBE_EDITS)\n\
                   changed = [a for a, b in zip(text.splitlines(), probe.splitlines()) if a != b]\n\
                   print(len(changed), len(full.PROBE_EDITS))";
    let output = Command::new("python3")
        .args(["-c", program])
        .arg(dir.join("prepare"))
        .arg(dir.join("prepare"))
        .arg(dir.join("prepare/full/finetune.yaml"))
        .envs(ready.session_env(std::env::var_os("PATH").as_deref()))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout.trim(),
        "7 7",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn in_an_isolated_session_the_script_cannot_copy_the_hidden_reference() {
    let Some(ready) = prepared() else { return };
    if !common::bwrap_works("the isolated foundry test") {
        return;
    }
    let env = environment();
    let plan = smoke_plan(&env);
    // The cheat: "train" by copying the hidden reference weights, the probe's
    // when run by the probe. Without isolation it works (fast and valid).
    let (_a, ws) = session_workspace(&env, ready, false);
    let reference = ready.dir.join("reference");
    std::fs::write(
        ws.join("finetune.sh"),
        format!(
            "cd \"$(dirname \"$0\")\"\ncase \"$PWD\" in *.olf-probe-*) src=probe ;; *) src=main ;; esac\n\
             mkdir -p trained_model && cp {}/$src/* trained_model/\n",
            reference.display()
        ),
    )
    .unwrap();
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    let open = score(&plan, ready, &ws, &hashes);
    assert!(open.valid, "the cheat works without a jail: {open:#?}");

    // In the session's jail (as the server sets REBENCH_JAIL for isolated
    // sessions) the preparation folder does not exist.
    let venv: Vec<PathBuf> = ready.venv.iter().cloned().collect();
    let jail = common::test_jail(
        &[ready.dir.clone(), env_dir()],
        &venv,
        std::slice::from_ref(&ws),
        &ws,
    );
    let jailed = torch_env::score(
        &env_dir(),
        &plan,
        ready,
        &ws,
        &hashes,
        &[("REBENCH_JAIL", jail.prefix.as_str())],
    );
    let error = invalid_error(&jailed);
    assert!(
        error.starts_with("timed run: finetune.sh failed") && error.contains("No such file"),
        "{error}"
    );
}
