//! The bundled restricted-mlm environment, smoke profile (CPU, a byte corpus
//! from Python's stdlib): it validates, `prepare` builds its torch venv and
//! held-out split, and the real scorer, run the way the server runs it,
//! scores the starting solution ~0 and the reference ~1, rejects models
//! whose forward pass uses a disallowed operation (naming it) or that are
//! otherwise wrong, and a changed protected file is caught.
//!
//! The preparation goes to `$REBENCH_TORCH_TEST_DATA` or else
//! `target/tmp/torch-envs`, shared with the other torch environments' tests
//! and reused across runs (the first one installs torch from PyPI: a few
//! minutes, ~5 GB). Without network the tests print "SKIPPED: ..." to the
//! real stderr and pass, unless `REBENCH_REQUIRE_TORCH=1`, which makes that a
//! failure (for CI).

mod common;

use rebench::environment::files::{copy_workspace, overlay};
use rebench::environment::prepare::Prepared;
use rebench::environment::{Environment, ScoringPlan, validate};
use rebench::scoring::{ScorerOutcome, protected};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::torch_env::{self, PROFILE, loud};

fn env_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("environments/restricted-mlm")
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
    protected_at_start: &BTreeMap<String, String>,
    extra_env: &[(&str, &str)],
) -> ScorerOutcome {
    torch_env::score(&env_dir(), plan, ready, ws, protected_at_start, extra_env)
}

fn smoke_plan(env: &Environment) -> ScoringPlan {
    env.scoring(Some(PROFILE)).unwrap()
}

/// Scores `ws` once (the metric is deterministic); valid required.
fn raw_and_normalized(plan: &ScoringPlan, ready: &Prepared, ws: &Path) -> (f64, f64, f64) {
    let hashes = protected::hash_files(ws, &plan.protected).unwrap();
    let outcome = score(plan, ready, ws, &hashes, &[]);
    assert!(outcome.valid, "{outcome:#?}");
    let raw = outcome.raw.unwrap();
    let loss = outcome.scorer_message["loss"].as_f64().unwrap();
    // The raw value is the loss itself (the smoke profile's transform has floor 0.25).
    assert!((raw - loss).abs() < 1e-4, "raw {raw}, loss {loss}");
    (raw, loss, plan.normalizer.normalize(raw).unwrap())
}

#[test]
fn bundled_environment_validates() {
    let problems = validate(&env_dir());
    assert!(problems.is_empty(), "{problems:#?}");
    let env = environment();
    assert_eq!(env.id(), "restricted-mlm");
    assert!(env.reference_dir().is_some());
    let hw = env.hardware();
    assert_eq!((hw.gpus, hw.gpu_model.as_deref()), (2, Some("H100")));
    assert_eq!(env.hardware_for(Some(PROFILE)).gpus, 0);
    let full = env.scoring(None).unwrap();
    assert_eq!(full.profile.as_deref(), Some("full"));
    assert_eq!(full.normalizer.starting, 7.64);
    assert_eq!(full.normalizer.reference, 4.6);
    assert_eq!(full.env["RESTRICTED_MLM_CORPUS"], "openwebtext");
    assert_eq!(full.env["RESTRICTED_MLM_DEVICE"], "cuda");
    // RE-Bench's example: normalized ln(loss - 1.5).
    let n = full.normalizer.normalize(4.0).unwrap();
    assert!((n - 1.314).abs() < 1e-3, "{n}");
    let smoke = smoke_plan(&env);
    assert_eq!(smoke.env["RESTRICTED_MLM_CORPUS"], "stdlib");
    assert_eq!(smoke.env["RESTRICTED_MLM_DEVICE"], "cpu");
    assert!(
        !smoke.env.contains_key("RESTRICTED_MLM_RAW_OFFSET"),
        "the smoke profile has its own transform"
    );
    assert_eq!(smoke.normalizer.transform.to_string(), "log-minus:0.25");
    assert!(smoke.normalizer.reference < smoke.normalizer.starting);
    assert_eq!(smoke.protected, vec!["get_data.py", "rules.py", "score.py"]);
    // One venv serves every torch environment: the same requirements, byte for byte.
    let ours = std::fs::read(env_dir().join("requirements.txt")).unwrap();
    let kernel = std::fs::read(env_dir().join("../optimize-kernel/requirements.txt")).unwrap();
    assert_eq!(
        ours, kernel,
        "requirements.txt differs from optimize-kernel's"
    );
}

#[test]
fn starting_scores_about_zero_and_reference_about_one() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);

    let (_a, start_ws) = workspace(&env, false);
    let (start_raw, start_loss, start) = raw_and_normalized(&plan, ready, &start_ws);
    assert!(!start_ws.join("__pycache__").exists());
    let (_b, ref_ws) = workspace(&env, true);
    let (ref_raw, ref_loss, reference) = raw_and_normalized(&plan, ready, &ref_ws);
    loud(&format!(
        "restricted-mlm smoke: starting loss {start_loss:.5} (raw {start_raw:.5}, normalized \
         {start:.3}), reference loss {ref_loss:.5} (raw {ref_raw:.5}, normalized {reference:.3})"
    ));
    // Manifest: starting 1.68847, reference 1.21208; every run on the
    // calibration machine gave exactly these. Another CPU, Python or torch
    // build may round differently and so train a little differently (about
    // +-0.03 normalized, see the manifest); the bounds allow several times that.
    assert!(
        start <= 0.15,
        "starting normalized {start} (loss {start_loss})"
    );
    assert!(
        (0.85..=1.15).contains(&reference),
        "reference normalized {reference} (loss {ref_loss})"
    );
}

/// A tiny untrained model: `forward` computes `h = self.out(self.embed(tokens))`
/// then runs `lines`; `get` is the body of `get_trained_model()`.
fn tiny_model(lines: &[&str], get: &str) -> String {
    let body: String = lines.iter().map(|l| format!("        {l}\n")).collect();
    format!(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\
         class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        \
         self.embed = nn.Embedding(257, 8)\n        self.out = nn.Linear(8, 257)\n\n    \
         def forward(self, tokens):\n        h = self.out(self.embed(tokens))\n{body}\n\
         def get_trained_model():\n    print('noise')\n    {get}\n"
    )
}

#[test]
fn an_untrained_model_of_allowed_operations_is_valid() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let (_tmp, ws) = workspace(&env, false);
    let lines = [
        "e = torch.einsum('bld,dk->blk', self.embed(tokens), self.embed.weight[:8, :8])",
        "g = torch.cat([e[:, :1], e[:, :-1]], dim=1).sum(-1, keepdim=True)",
        "return F.relu(h[:, :, None, :].reshape(h.shape) * 0.5 + g - 1)",
    ];
    std::fs::write(ws.join("model.py"), tiny_model(&lines, "return M()")).unwrap();
    let (raw, loss, normalized) = raw_and_normalized(&plan, ready, &ws);
    // About ln(257) = 5.55 nats: far worse than the start, so it clips to 0.
    assert!((5.0..6.5).contains(&loss), "raw {raw}, loss {loss}");
    assert_eq!(normalized, 0.0);
}

#[test]
fn wrong_models_are_invalid_with_a_reason() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let get = "return M()";
    let cases = [
        (
            "softmax",
            tiny_model(&["return torch.softmax(h, -1)"], get),
            "disallowed operation in forward: aten._softmax (called as torch.softmax)",
        ),
        (
            "exp",
            tiny_model(&["return h.exp()"], get),
            "disallowed operation in forward: aten.exp (called as Tensor.exp)",
        ),
        (
            "division",
            tiny_model(&["return h / 2"], get),
            "disallowed operation in forward: aten.div",
        ),
        (
            "layer norm",
            tiny_model(&["return F.layer_norm(h, (257,))"], get),
            "disallowed operation in forward: aten.native_layer_norm",
        ),
        (
            "a caught violation",
            tiny_model(
                &[
                    "try:",
                    "    h.sigmoid()",
                    "except Exception:",
                    "    pass",
                    "return h",
                ],
                get,
            ),
            "disallowed operation in forward: aten.sigmoid",
        ),
        (
            "item",
            tiny_model(&["return h * self.embed.weight[0, 0].item()"], get),
            "disallowed operation in forward: Tensor.item",
        ),
        (
            "wrong shape",
            tiny_model(&["return h[:, :, :10]"], get),
            "the model returned logits torch.float32 (32, 128, 10); expected floating point \
             (32, 128, 257)",
        ),
        (
            "a raising get_trained_model",
            tiny_model(&["return h"], "raise RuntimeError('no weights')"),
            "get_trained_model() raised RuntimeError: no weights",
        ),
        (
            "no get_trained_model",
            "import torch\n".to_string(),
            "model.py does not define get_trained_model()",
        ),
    ];
    for (what, model_py, expected) in cases {
        let (_tmp, ws) = workspace(&env, false);
        std::fs::write(ws.join("model.py"), model_py).unwrap();
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
    let rules = ws.join("rules.py");
    let text = std::fs::read_to_string(&rules).unwrap();
    std::fs::write(
        &rules,
        text.replace("\"relu\", \"relu_\",", "\"relu\", \"exp\","),
    )
    .unwrap();
    let outcome = score(&plan, ready, &ws, &at_start, &[]);
    assert!(!outcome.valid);
    assert_eq!(outcome.message, "protected file changed: rules.py");
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
        outcome
            .message
            .contains("this profile scores on a CUDA GPU"),
        "{}",
        outcome.message
    );
}
