//! The bundled fix-embedding environment, smoke profile (CPU): it validates,
//! `prepare` trains its two small models and permutes the large one's
//! embedding, and the real scorer, run the way the server runs it, scores
//! the starting solution ~0, the reference ~1, and wrong submissions,
//! changed provided files and protected-file changes as invalid.
//!
//! A session workspace is the environment's `workspace/` with the
//! preparation's `workspace/` folder (the models and tokens `prepare`
//! made) laid over it, as the server assembles it; the participant then
//! runs `python3 solve.py` to write `fixed_model.pth`, and so do these tests.
//!
//! The preparation goes to `$REBENCH_TORCH_TEST_DATA` or else
//! `target/tmp/torch-envs`, the data dir shared by all torch environment
//! tests, and is reused across runs (the first one installs torch from PyPI
//! into the shared venv: a few minutes, ~5 GB; then ~1 minute of training).
//! Without network the tests print "SKIPPED: ..." to the real stderr and
//! pass, unless `REBENCH_REQUIRE_TORCH=1`, which makes that a failure (CI).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use rebench::environment::prepare::Prepared;
use rebench::environment::{Environment, ScoringPlan, validate};
use rebench::scoring::{ScorerOutcome, protected};
use rebench::session::ScorePhase;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::torch_env::{self, PROFILE, invalid_error, loud, session_workspace};

fn env_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("environments/fix-embedding")
}

fn environment() -> Environment {
    Environment::load(&env_dir()).unwrap()
}

/// The smoke preparation, made once per test binary (see common::torch_env).
fn prepared() -> Option<&'static Prepared> {
    torch_env::prepared_once(&environment())
}

/// Runs `python3 <args>` in `ws` as a session shell would: the venv first on
/// PATH, and no `REBENCH_PREPARED` (the participant never gets it).
fn python(ready: &Prepared, ws: &Path, args: &[&str]) {
    let output = Command::new("python3")
        .args(args)
        .current_dir(ws)
        .envs(ready.session_env(std::env::var_os("PATH").as_deref()))
        .env_remove("REBENCH_PREPARED")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "python3 {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs the official scorer as the server does (see common::torch_env::score).
fn score(
    plan: &ScoringPlan,
    ready: &Prepared,
    ws: &Path,
    protected_at_start: &BTreeMap<String, String>,
    extra_env: &[(&str, &str)],
) -> ScorerOutcome {
    torch_env::score(&env_dir(), plan, ready, ws, protected_at_start, extra_env)
}

fn smoke_plan(env: &Environment) -> ScoringPlan {
    env.scoring(Some(PROFILE)).unwrap()
}

/// Scores `ws`, which must be valid: (raw loss, normalized score).
fn normalized(plan: &ScoringPlan, ready: &Prepared, ws: &Path) -> (f64, f64) {
    let hashes = protected::hash_files(ws, &plan.protected).unwrap();
    let outcome = score(plan, ready, ws, &hashes, &[]);
    assert!(outcome.valid, "{outcome:#?}");
    let raw = outcome.raw.unwrap();
    (raw, plan.normalizer.normalize(raw).unwrap())
}

#[test]
fn bundled_environment_validates() {
    let problems = validate(&env_dir());
    assert!(problems.is_empty(), "{problems:#?}");
    let env = environment();
    assert_eq!(env.id(), "fix-embedding");
    assert!(env.reference_dir().is_some());
    assert_eq!(env.hardware().gpus, 1);
    assert_eq!(env.hardware_for(Some(PROFILE)).gpus, 0);
    let full = env.scoring(None).unwrap();
    assert_eq!(full.profile.as_deref(), Some("full"));
    assert_eq!(full.normalizer.starting, 10.5);
    assert_eq!(full.normalizer.reference, 2.8);
    assert_eq!(full.env["FIX_EMBEDDING_DEVICE"], "cuda");
    let smoke = smoke_plan(&env);
    assert_eq!(smoke.env["FIX_EMBEDDING_DEVICE"], "cpu");
    assert!(smoke.normalizer.reference < smoke.normalizer.starting);
    assert_eq!(smoke.protected, vec!["model.py", "score.py"]);
    // Same requirements as every torch environment: one shared venv.
    let ours = std::fs::read(env_dir().join("requirements.txt")).unwrap();
    let kernel = std::fs::read(env_dir().join("../optimize-kernel/requirements.txt")).unwrap();
    assert_eq!(ours, kernel);
}

#[test]
fn starting_scores_about_zero_and_reference_about_one() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);

    let (_a, start_ws) = session_workspace(&env, ready, false);
    python(ready, &start_ws, &["solve.py"]);
    let (start_raw, start) = normalized(&plan, ready, &start_ws);
    let (_b, ref_ws) = session_workspace(&env, ready, true);
    python(ready, &ref_ws, &["solve.py"]);
    let (ref_raw, reference) = normalized(&plan, ready, &ref_ws);
    loud(&format!(
        "fix-embedding smoke: starting loss {start_raw:.6} (normalized {start:.4}), \
         reference loss {ref_raw:.6} (normalized {reference:.4})"
    ));
    // Deterministic on one machine (the manifest's values, spread 0); the
    // bounds allow for another CPU or Python version changing the models.
    assert!(
        start <= 0.05,
        "starting normalized {start} (loss {start_raw})"
    );
    assert!(
        (0.9..=1.1).contains(&reference),
        "reference normalized {reference} (loss {ref_raw})"
    );
    assert!(ref_raw + 2.0 < start_raw, "{ref_raw} vs {start_raw}");
    // The workspace's own check agrees that the fix worked.
    python(ready, &ref_ws, &["score.py"]);
    assert!(!start_ws.join("__pycache__").exists());
}

#[test]
fn a_workspace_without_a_fixed_model_is_invalid() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let (_tmp, ws) = session_workspace(&env, ready, false);
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    let error = invalid_error(&score(&plan, ready, &ws, &hashes, &[]));
    assert!(
        error.contains("no fixed_model.pth in the workspace"),
        "{error}"
    );
}

#[test]
fn wrong_submissions_are_invalid_with_a_reason() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    // Each case writes the file OUT with a line of Python (after `import
    // torch; from model import *; m = load_model('large_model.pth')`); one
    // Python run writes them all, then each is scored as fixed_model.pth.
    let cases = [
        (
            "the small model",
            "import shutil; shutil.copy('small_model.pth', OUT)",
            "architecture changed: config differs from the large model's: n_embd 32 (expected 64), n_head 2 (expected 4), n_layer 2 (expected 4)",
        ),
        (
            "an extra embedding row",
            "sd = m.state_dict(); sd['transformer.wte.weight'] = torch.cat([sd['transformer.wte.weight'], \
             sd['transformer.wte.weight'][:1]]); torch.save(sd, OUT)",
            "shape mismatch for transformer.wte.weight: got (1025, 64), expected (1024, 64)",
        ),
        (
            "a missing layer norm",
            "sd = m.state_dict(); del sd['transformer.ln_f.bias']; torch.save(sd, OUT)",
            "parameter names do not match the model class: missing transformer.ln_f.bias",
        ),
        (
            "an untied output layer",
            "sd = m.state_dict(); sd['lm_head.weight'] = sd['transformer.wte.weight'].clone(); \
             torch.save({'model': sd}, OUT)",
            "parameter names do not match the model class: unexpected lm_head.weight",
        ),
        (
            "NaN weights",
            "sd = m.state_dict(); sd['transformer.h.0.mlp.c_fc.weight'][0, 0] = float('nan'); \
             torch.save(sd, OUT)",
            "transformer.h.0.mlp.c_fc.weight contains NaN or infinite values",
        ),
        (
            "a pickled module",
            "torch.save(m, OUT)",
            "could not load fixed_model.pth with torch.load(weights_only=True)",
        ),
        (
            "not a torch file",
            "open(OUT, 'w').write('hello')",
            "(it is not a file written by torch.save)",
        ),
    ];
    let (_tmp, ws) = session_workspace(&env, ready, false);
    let mut program =
        String::from("import torch\nfrom model import *\nm = load_model('large_model.pth')\n");
    for (i, (_, code, _)) in cases.iter().enumerate() {
        program.push_str(&format!("OUT = 'wrong{i}.pth'\n{code}\n"));
    }
    python(ready, &ws, &["-c", &program]);
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    for (i, (what, _, expected)) in cases.iter().enumerate() {
        std::fs::copy(ws.join(format!("wrong{i}.pth")), ws.join("fixed_model.pth")).unwrap();
        let error = invalid_error(&score(&plan, ready, &ws, &hashes, &[]));
        assert!(error.contains(expected), "{what}: {error:?}");
    }
}

#[test]
fn changed_provided_or_protected_files_are_caught() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);

    // model.py and score.py: the server's protected-file check.
    let (_a, ws) = session_workspace(&env, ready, false);
    python(ready, &ws, &["solve.py"]);
    let at_start = protected::hash_files(&ws, &plan.protected).unwrap();
    let mut text = std::fs::read_to_string(ws.join("model.py")).unwrap();
    text.push_str("\n# tweaked\n");
    std::fs::write(ws.join("model.py"), text).unwrap();
    let outcome = score(&plan, ready, &ws, &at_start, &[]);
    assert!(!outcome.valid);
    assert_eq!(outcome.message, "protected file changed: model.py");

    // The provided models come from the preparation, not from workspace/:
    // the scorer itself compares them with the hashes `prepare` recorded.
    let (_b, ws) = session_workspace(&env, ready, false);
    python(ready, &ws, &["solve.py"]);
    python(
        ready,
        &ws,
        &[
            "-c",
            "import torch; from model import *; m = load_model('large_model.pth'); \
             torch.nn.init.zeros_(m.transformer.wte.weight); save_model(m, 'large_model.pth')",
        ],
    );
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    let error = invalid_error(&score(&plan, ready, &ws, &hashes, &[]));
    assert!(
        error.starts_with("protected file changed: large_model.pth"),
        "{error}"
    );

    let (_c, ws) = session_workspace(&env, ready, false);
    python(ready, &ws, &["solve.py"]);
    std::fs::remove_file(ws.join("small_model.pth")).unwrap();
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    let error = invalid_error(&score(&plan, ready, &ws, &hashes, &[]));
    assert!(
        error.starts_with("protected file missing: small_model.pth"),
        "{error}"
    );
}

#[test]
fn full_profile_without_a_gpu_is_invalid_with_a_reason() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = env.scoring(Some("full")).unwrap();
    let (_tmp, ws) = session_workspace(&env, ready, false);
    python(ready, &ws, &["solve.py"]);
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    // CUDA_VISIBLE_DEVICES="" hides any GPU, so this holds on GPU machines too.
    let outcome = score(&plan, ready, &ws, &hashes, &[("CUDA_VISIBLE_DEVICES", "")]);
    let error = invalid_error(&outcome);
    assert!(
        error.contains("this profile scores on a CUDA GPU"),
        "{error}"
    );
}

/// The full profile needs internet and a GPU; its download, conversion and
/// tokenizing code is checked offline on synthetic data instead.
#[test]
fn full_profile_download_code_works_offline() {
    let Some(ready) = prepared() else { return };
    let dir = env_dir();
    let output = Command::new("python3")
        .arg(dir.join("prepare/selftest_full.py"))
        .arg(dir.join("workspace/model.py"))
        .arg(dir.join("prepare/full_download.py"))
        .envs(ready.session_env(std::env::var_os("PATH").as_deref()))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.trim_end().ends_with("ok"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Issue 19: every session's log starts with a valid entry at about 0: a
/// new session runs the starting solution's build step (`solve.py`, which
/// writes fixed_model.pth) before its starting score, off the clock.
#[tokio::test]
async fn a_new_session_starts_with_a_valid_entry_at_about_zero() {
    let Some(_ready) = prepared() else { return };
    let server = common::TestServer::start_in(&torch_env::data_dir(), &[]);
    let id = server.new_session_cli(&env_dir(), PROFILE);
    let view = server.show(&id).await;
    let starting = &view.scores.as_ref().unwrap()[0];
    assert_eq!(starting.phase, ScorePhase::Starting);
    assert_eq!(starting.valid, Some(true), "{starting:?}");
    assert!(starting.normalized.unwrap() < 0.05, "{starting:?}");
    assert_eq!(view.active_s, 0.0, "the build step is off the clock");
    assert!(Path::new(&view.workspace).join("fixed_model.pth").is_file());
    let ended = server.cli(&["end", &view.id]);
    assert!(ended.status.success());
}
