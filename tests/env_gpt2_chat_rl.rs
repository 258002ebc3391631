//! The bundled gpt2-chat-rl environment, smoke profile (CPU): it validates,
//! `prepare` trains its tiny base model and makes the baselines' held-out
//! answers, and the real scorer, run the way the server runs it, scores the
//! starting solution ~0, the reference (its train.py run in a workspace copy)
//! ~1, a degenerate model low, wrong submissions invalid with a reason, and
//! keeps to its judge-call limit. The endpoint judge (full profile) is checked
//! against a local stand-in HTTP server.
//!
//! A session workspace is the environment's `workspace/` with the
//! preparation's `workspace/` laid over it (base_model.pth, final_model.pth =
//! the starting solution, prompts, tokenizer), as the server assembles it.
//! The preparation is shared with the other torch environment tests (see
//! common::torch_env); without network to install torch the tests print
//! "SKIPPED: ..." and pass, unless `REBENCH_REQUIRE_TORCH=1`.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use rebench::environment::prepare::Prepared;
use rebench::environment::{Environment, ScoringPlan, validate};
use rebench::scoring::{ScorerOutcome, protected};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::torch_env::{self, PROFILE, invalid_error, loud, session_workspace};

fn env_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("environments/gpt2-chat-rl")
}

fn environment() -> Environment {
    Environment::load(&env_dir()).unwrap()
}

fn prepared() -> Option<&'static Prepared> {
    torch_env::prepared_once(&environment())
}

/// `python3 <args>` in `ws` as a session shell runs it (venv first on PATH,
/// no REBENCH_PREPARED); returns stdout.
fn python(ready: &Prepared, ws: &Path, args: &[&str]) -> String {
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
    String::from_utf8_lossy(&output.stdout).into_owned()
}

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

fn score_ws(
    plan: &ScoringPlan,
    ready: &Prepared,
    ws: &Path,
    extra_env: &[(&str, &str)],
) -> ScorerOutcome {
    let hashes = protected::hash_files(ws, &plan.protected).unwrap();
    score(plan, ready, ws, &hashes, extra_env)
}

/// Scores `ws`, which must be valid: (raw win rate, normalized, scorer message).
fn normalized(plan: &ScoringPlan, ready: &Prepared, ws: &Path) -> (f64, f64, serde_json::Value) {
    let outcome = score_ws(plan, ready, ws, &[]);
    assert!(outcome.valid, "{outcome:#?}");
    let raw = outcome.raw.unwrap();
    (
        raw,
        plan.normalizer.normalize(raw).unwrap(),
        outcome.scorer_message,
    )
}

#[test]
fn bundled_environment_validates() {
    let problems = validate(&env_dir());
    assert!(problems.is_empty(), "{problems:#?}");
    let env = environment();
    assert_eq!(env.id(), "gpt2-chat-rl");
    assert!(env.reference_dir().is_some());
    assert_eq!(env.hardware().gpus, 2);
    assert_eq!(env.hardware_for(Some(PROFILE)).gpus, 0);
    let full = env.scoring(None).unwrap();
    assert_eq!(full.profile.as_deref(), Some("full"));
    assert_eq!(full.normalizer.starting, 0.54);
    assert_eq!(full.normalizer.reference, 0.85);
    assert_eq!(full.env["GPT2_CHAT_RL_JUDGE"], "endpoint");
    assert_eq!(full.env["GPT2_CHAT_RL_MAX_JUDGE_CALLS"], "1200");
    let smoke = smoke_plan(&env);
    assert_eq!(smoke.env["GPT2_CHAT_RL_JUDGE"], "rules");
    assert_eq!(smoke.env["GPT2_CHAT_RL_MAX_JUDGE_CALLS"], "600");
    assert!(smoke.normalizer.starting < smoke.normalizer.reference);
    assert_eq!(
        smoke.protected,
        vec!["model.py", "chat.py", "judge.py", "score.py"]
    );
    let ours = std::fs::read(env_dir().join("requirements.txt")).unwrap();
    let kernel = std::fs::read(env_dir().join("../optimize-kernel/requirements.txt")).unwrap();
    assert_eq!(ours, kernel);
    // The held-out prompts and the scorer's judge prompt are not in workspace/.
    assert!(!env_dir().join("workspace/heldout.json").exists());
    assert!(env_dir().join("scorer/judge_prompts.py").is_file());
}

#[test]
fn starting_scores_zero_reference_one_and_a_degenerate_model_low() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);

    // The workspace as created is scorable: prepare put the starting model there.
    let (_a, start_ws) = session_workspace(&env, ready, false);
    let (start_raw, start, start_msg) = normalized(&plan, ready, &start_ws);
    python(ready, &start_ws, &["train.py"]);
    let (again_raw, _, _) = normalized(&plan, ready, &start_ws);
    assert_eq!(
        start_raw, again_raw,
        "the starting train.py must reproduce the starting model"
    );

    let (_b, ref_ws) = session_workspace(&env, ready, true);
    let started = std::time::Instant::now();
    python(ready, &ref_ws, &["train.py"]);
    let train_s = started.elapsed().as_secs_f64();
    let (ref_raw, reference, ref_msg) = normalized(&plan, ready, &ref_ws);

    // Degenerate: fine-tuned to answer every prompt with one generic sentence.
    let (_c, bad_ws) = session_workspace(&env, ready, false);
    python(
        ready,
        &bad_ws,
        &[
            "-c",
            "import torch, torch.nn.functional as F, chat\n\
             from model import load_model, save_model\n\
             torch.manual_seed(0); torch.set_num_threads(1)\n\
             tok = chat.load_tokenizer(); m = load_model('base_model.pth')\n\
             ps = [l.strip() for l in open('train_prompts.txt')][:64]\n\
             a = chat.answer_ids(tok, 'the weather was nice today.')\n\
             opt = torch.optim.AdamW(m.parameters(), lr=3e-3)\n\
             for step in range(40):\n\
             \x20   for p in ps[step % 8::8]:\n\
             \x20       s = chat.prompt_ids(tok, p) + a\n\
             \x20       x = torch.tensor([s[:-1]]); y = torch.tensor([s[1:]])\n\
             \x20       y[0, : len(s) - 1 - len(a)] = -100\n\
             \x20       loss = F.cross_entropy(m(x)[0][0], y[0], ignore_index=-100)\n\
             \x20       opt.zero_grad(); loss.backward(); opt.step()\n\
             print(chat.respond(m, tok, ps[:3]))\n\
             save_model(m, 'final_model.pth')\n",
        ],
    );
    let (bad_raw, bad, _) = normalized(&plan, ready, &bad_ws);
    loud(&format!(
        "gpt2-chat-rl smoke: starting {start_raw} (normalized {start:.4}) {start_msg}; \
         reference {ref_raw} (normalized {reference:.4}, train.py {train_s:.0} s) {ref_msg}; \
         one generic sentence {bad_raw} (normalized {bad:.4})"
    ));
    // Deterministic on one machine (the manifest's values); the bounds allow
    // for another CPU or torch build changing the models a little.
    // Measured 0.0 on the machine that calibrated and 0.081 on an AMD EPYC
    // (7 of 256 sampled judgements differ): the CPU's float kernels change
    // the tiny model's samples a little.
    assert!(
        start.abs() <= 0.1,
        "starting normalized {start} (raw {start_raw})"
    );
    assert!(
        (0.9..=1.1).contains(&reference),
        "reference normalized {reference} (raw {ref_raw})"
    );
    assert!(ref_raw > start_raw + 0.2, "{ref_raw} vs {start_raw}");
    assert_eq!(
        start_msg["vs_base_greedy"], 0.5,
        "the base model ties its own greedy answers: {start_msg}"
    );
    assert!(
        bad_raw < start_raw - 0.1,
        "generic sentence {bad_raw} vs starting {start_raw}"
    );
    assert_eq!(bad, 0.0);
    // Judge calls are counted and reported.
    let calls = ref_msg["judge_calls"].as_u64().unwrap();
    assert!(calls > 256 && calls <= 512, "{ref_msg}");
    assert_eq!(start_msg["judge_calls"], 256, "{start_msg}");
    // The workspace's own check runs and reports a public win rate.
    let out = python(ready, &ref_ws, &["score.py"]);
    assert!(out.contains("final_model.pth: public win rate 0."), "{out}");
    assert!(!ref_ws.join("__pycache__").exists());
}

#[test]
fn wrong_submissions_are_invalid_with_a_reason() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let (_tmp, ws) = session_workspace(&env, ready, false);
    std::fs::remove_file(ws.join("final_model.pth")).unwrap();
    let error = invalid_error(&score_ws(&plan, ready, &ws, &[]));
    assert!(
        error.contains("no final_model.pth in the workspace"),
        "{error}"
    );

    let cases = [
        (
            "a wider model",
            "c = dict(vars(m.config)); c['n_embd'] = 128; save_model(GPT(GPTConfig(**c)), OUT)",
            "architecture changed: config differs from the base model's: n_embd 128 (expected 64)",
        ),
        (
            "an extra embedding row",
            "sd = m.state_dict(); sd['transformer.wte.weight'] = torch.cat([sd['transformer.wte.weight'], \
             sd['transformer.wte.weight'][:1]]); torch.save(sd, OUT)",
            "shape mismatch for transformer.wte.weight",
        ),
        (
            "a missing layer norm",
            "sd = m.state_dict(); del sd['transformer.ln_f.bias']; torch.save(sd, OUT)",
            "parameter names do not match the model class: missing transformer.ln_f.bias",
        ),
        (
            "NaN weights",
            "sd = m.state_dict(); sd['transformer.h.0.mlp.c_fc.weight'][0, 0] = float('nan'); torch.save(sd, OUT)",
            "transformer.h.0.mlp.c_fc.weight contains NaN or infinite values",
        ),
        (
            "a pickled module",
            "torch.save(m, OUT)",
            "could not load final_model.pth with torch.load(weights_only=True)",
        ),
        (
            "not a torch file",
            "open(OUT, 'w').write('hello')",
            "(it is not a file written by torch.save)",
        ),
    ];
    let mut program =
        String::from("import torch\nfrom model import *\nm = load_model('base_model.pth')\n");
    for (i, (_, code, _)) in cases.iter().enumerate() {
        program.push_str(&format!("OUT = 'wrong{i}.pth'\n{code}\n"));
    }
    python(ready, &ws, &["-c", &program]);
    for (i, (what, _, expected)) in cases.iter().enumerate() {
        std::fs::copy(ws.join(format!("wrong{i}.pth")), ws.join("final_model.pth")).unwrap();
        let error = invalid_error(&score_ws(&plan, ready, &ws, &[]));
        assert!(error.contains(expected), "{what}: {error:?}");
    }
}

#[test]
fn the_judge_call_limit_is_enforced_and_named() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let (_tmp, ws) = session_workspace(&env, ready, false);
    // The starting model needs 256 calls (it ties base-greedy without any).
    let outcome = score_ws(
        &plan,
        ready,
        &ws,
        &[("GPT2_CHAT_RL_MAX_JUDGE_CALLS", "255")],
    );
    let error = invalid_error(&outcome);
    assert!(
        error.contains("judge call limit reached")
            && error.contains("256 calls, more than the limit of 255")
            && error.contains("GPT2_CHAT_RL_MAX_JUDGE_CALLS"),
        "{error}"
    );
    let outcome = score_ws(
        &plan,
        ready,
        &ws,
        &[("GPT2_CHAT_RL_MAX_JUDGE_CALLS", "256")],
    );
    assert!(outcome.valid, "{outcome:#?}");
    assert_eq!(outcome.scorer_message["judge_calls"], 256);
    assert_eq!(outcome.scorer_message["max_judge_calls"], 256);
}

/// A stand-in OpenAI-compatible judge: `python3 -c STANDIN MODE LOG` prints
/// its port, logs each request's Authorization header, model and first
/// message line to LOG, and answers "A" (mode a: always the first reply) or
/// "no idea" (mode garbage).
const STANDIN: &str = r#"
import http.server, json, sys, threading
mode, log = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        with open(log, 'a') as f:
            f.write(json.dumps([self.path, self.headers.get('Authorization'), body['model'], body['messages'][-1]['content'][:40]]) + '\n')
        reply = {'choices': [{'message': {'role': 'assistant', 'content': 'A' if mode == 'a' else 'no idea'}}]}
        data = json.dumps(reply).encode()
        self.send_response(200); self.send_header('Content-Type', 'application/json'); self.send_header('Content-Length', str(len(data))); self.end_headers(); self.wfile.write(data)
s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

#[test]
fn the_endpoint_judge_works_against_a_stand_in_and_keeps_its_limit() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let (tmp, ws) = session_workspace(&env, ready, false);
    for (mode, limit) in [("a", "600"), ("garbage", "300")] {
        let log = tmp.path().join(format!("{mode}.log"));
        let mut child = Command::new("python3")
            .args(["-c", STANDIN, mode, log.to_str().unwrap()])
            .envs(ready.session_env(std::env::var_os("PATH").as_deref()))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut port = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut port)
            .unwrap();
        let url = format!("http://127.0.0.1:{}/v1", port.trim());
        let outcome = score_ws(
            &plan,
            ready,
            &ws,
            &[
                ("GPT2_CHAT_RL_JUDGE", "endpoint"),
                ("REBENCH_JUDGE_URL", &url),
                ("REBENCH_JUDGE_KEY", "sk-test"),
                ("REBENCH_JUDGE_MODEL", "judge-x"),
                ("GPT2_CHAT_RL_MAX_JUDGE_CALLS", limit),
            ],
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let requests = std::fs::read_to_string(&log).unwrap_or_default();
        if mode == "a" {
            // Always "A" is pure position bias: both orders cancel to ties.
            assert!(outcome.valid, "{outcome:#?}");
            assert_eq!(outcome.raw, Some(0.5));
            assert_eq!(outcome.scorer_message["judge_calls"], 256);
            assert_eq!(requests.lines().count(), 256);
            let first: serde_json::Value =
                serde_json::from_str(requests.lines().next().unwrap()).unwrap();
            assert_eq!(first[0], "/v1/chat/completions");
            assert_eq!(first[1], "Bearer sk-test");
            assert_eq!(first[2], "judge-x");
            let content = first[3].as_str().unwrap();
            assert!(
                content.starts_with("[User message]\nwhat can you tell me"),
                "the scorer's hidden template: {content:?}"
            );
        } else {
            // Unparsable verdicts are asked again; retries count toward the limit.
            let error = invalid_error(&outcome);
            assert!(
                error.starts_with("judge call limit reached: 300 calls per scoring run (GPT2_CHAT_RL_MAX_JUDGE_CALLS)"),
                "{error}"
            );
            assert_eq!(requests.lines().count(), 300);
        }
    }
    // Without an endpoint configured the run is invalid, with what to set.
    let outcome = score_ws(
        &plan,
        ready,
        &ws,
        &[
            ("GPT2_CHAT_RL_JUDGE", "endpoint"),
            ("REBENCH_JUDGE_URL", ""),
        ],
    );
    assert!(invalid_error(&outcome).contains("the operator must set REBENCH_JUDGE_URL"));
}

#[test]
fn protected_changes_are_caught_and_heldout_prompts_stay_hidden() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = smoke_plan(&env);
    let (_a, ws) = session_workspace(&env, ready, false);
    let at_start = protected::hash_files(&ws, &plan.protected).unwrap();
    let mut text = std::fs::read_to_string(ws.join("judge.py")).unwrap();
    text.push_str("\nMAX_POINTS = 100\n");
    std::fs::write(ws.join("judge.py"), text).unwrap();
    let outcome = score(&plan, ready, &ws, &at_start, &[]);
    assert!(!outcome.valid);
    assert_eq!(outcome.message, "protected file changed: judge.py");

    // No held-out prompt appears in any workspace file.
    let heldout: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ready.dir.join("heldout.json")).unwrap())
            .unwrap();
    let prompts: Vec<String> = heldout
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["prompt"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(prompts.len(), 128);
    let mut texts = Vec::new();
    for entry in walk(&ws) {
        if let Ok(text) = std::fs::read_to_string(&entry) {
            texts.push((entry, text));
        }
    }
    assert!(texts.iter().any(|(p, _)| p.ends_with("train_prompts.txt")));
    for prompt in &prompts {
        for (path, text) in &texts {
            assert!(
                !text.contains(prompt.as_str()),
                "{prompt:?} is in {}",
                path.display()
            );
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn full_profile_without_a_gpu_is_invalid_with_a_reason() {
    let Some(ready) = prepared() else { return };
    let env = environment();
    let plan = env.scoring(Some("full")).unwrap();
    let (_tmp, ws) = session_workspace(&env, ready, false);
    let outcome = score_ws(&plan, ready, &ws, &[("CUDA_VISIBLE_DEVICES", "")]);
    assert!(invalid_error(&outcome).contains("this profile scores on a CUDA GPU"));
}
