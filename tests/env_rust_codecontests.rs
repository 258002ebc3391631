//! The bundled rust-codecontests environment, smoke profile: it validates,
//! `prepare` copies the held-out problems, and the real scorer, run the way
//! the server runs it (protected files checked first, cwd = a copy of the
//! workspace, the protocol's variables plus the preparation's), scores the
//! starting scaffold 0, the reference 1 (the stand-in model is
//! deterministic), broken scaffolds as documented, enforces the spend limit,
//! and counts programs over the time or memory limit as unsolved. The full
//! profile's endpoint path runs against the stand-in served as if it were the
//! operator's model.
//!
//! Needs `python3` and `rustc`; without rustc the tests print
//! "SKIPPED: rustc not found" to the real stderr and pass.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use rebench::environment::files::{assemble_workspace, overlay};
use rebench::environment::prepare::{Prepared, prepare};
use rebench::environment::{Environment, ScoringPlan, validate};
use rebench::scoring::{OUTPUT_LIMIT, ScorerInvocation, ScorerOutcome, protected, run_scorer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};

const PROFILE: &str = "smoke";

fn env_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("environments/rust-codecontests")
}

fn environment() -> Environment {
    Environment::load(&env_dir()).unwrap()
}

/// Straight to fd 2: libtest captures `eprintln!`, and a skip must be seen.
fn loud(message: &str) {
    let _ = writeln!(std::io::stderr(), "\n{message}\n");
}

/// True when python3 and rustc are both here; otherwise says why, loudly.
fn tools_available() -> bool {
    let works = |program: &str| {
        Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !works("rustc") {
        loud("SKIPPED: rustc not found");
        return false;
    }
    if !works("python3") {
        loud("SKIPPED: python3 not found");
        return false;
    }
    true
}

/// The smoke preparation (a copy of the held-out file), made once per test binary.
fn prepared() -> &'static Prepared {
    static PREPARED: OnceLock<Prepared> = OnceLock::new();
    PREPARED.get_or_init(|| {
        let data = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rust-codecontests-data");
        let mut log = Vec::new();
        prepare(&environment(), Some(PROFILE), &data, &mut log)
            .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&log)))
    })
}

/// A session workspace as the server assembles it: workspace/, then the
/// preparation's workspace/ files; with the reference scaffold laid over it.
fn workspace(env: &Environment, with_reference: bool) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    assemble_workspace(&env.workspace_dir(), Some(&prepared().dir), &ws).unwrap();
    if with_reference {
        overlay(&env.reference_dir().unwrap(), &ws).unwrap();
    }
    (tmp, ws)
}

/// Runs the official scorer as the server does. `extra_env` comes last and wins.
fn score(
    plan: &ScoringPlan,
    ws: &Path,
    protected_at_start: &BTreeMap<String, String>,
    extra_env: &[(&str, &str)],
) -> ScorerOutcome {
    if let Err(message) = protected::check_files(ws, protected_at_start) {
        return ScorerOutcome {
            valid: false,
            raw: None,
            message,
            scorer_message: Value::Null,
            details: Value::Null,
            output: String::new(),
            exit_code: None,
            duration_ms: 0,
            infrastructure: None,
        };
    }
    let env_dir = env_dir().canonicalize().unwrap();
    // As the server does: the allowlisted base, none of the operator's variables.
    let mut vars = rebench::sandbox::environ::passed_from_here();
    vars.extend(plan.scorer_env(&env_dir, ws));
    vars.extend(prepared().scorer_env(std::env::var_os("PATH").as_deref()));
    vars.extend(
        extra_env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    // One scorer at a time: the machine is shared and time limits are measured.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let invocation = ScorerInvocation {
        argv: plan.argv(&env_dir, ws),
        cwd: ws.to_path_buf(),
        env: vars,
        env_clear: true,
        cgroups: Vec::new(),
        timeout: plan.timeout,
        output_limit: OUTPUT_LIMIT,
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run_scorer(&invocation))
}

fn smoke_plan(env: &Environment) -> ScoringPlan {
    env.scoring(Some(PROFILE)).unwrap()
}

/// Scores `ws` under the smoke profile with the scaffold replaced by `scaffold`.
fn score_scaffold(scaffold: Option<&str>, extra_env: &[(&str, &str)]) -> ScorerOutcome {
    let env = environment();
    let plan = smoke_plan(&env);
    let (_tmp, ws) = workspace(&env, false);
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    match scaffold {
        Some(text) => std::fs::write(ws.join("scaffold.py"), text).unwrap(),
        None => std::fs::remove_file(ws.join("scaffold.py")).unwrap(),
    }
    score(&plan, &ws, &hashes, extra_env)
}

fn verdicts(outcome: &ScorerOutcome) -> BTreeMap<String, u64> {
    let counts = outcome.scorer_message["verdicts"].as_object();
    counts
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn bundled_environment_validates() {
    let problems = validate(&env_dir());
    assert!(problems.is_empty(), "{problems:#?}");
    let env = environment();
    assert_eq!(env.id(), "rust-codecontests");
    assert!(env.reference_dir().is_some());
    for profile in [None, Some("full"), Some("smoke")] {
        let hw = env.hardware_for(profile);
        assert_eq!((hw.cpus, hw.gpus), (2, 0), "{profile:?}");
    }
    let full = env.scoring(None).unwrap();
    assert_eq!(full.profile.as_deref(), Some("full"));
    assert_eq!(
        (full.normalizer.starting, full.normalizer.reference),
        (0.0, 0.127)
    );
    assert_eq!(full.env["RUST_CODECONTESTS_MODEL_SOURCE"], "endpoint");
    let smoke = smoke_plan(&env);
    assert_eq!(smoke.env["RUST_CODECONTESTS_MODEL_SOURCE"], "standin");
    assert_eq!(smoke.normalizer.starting, 0.0);
    assert!((smoke.normalizer.reference - 8.0 / 12.0).abs() < 1e-12);
    assert!(smoke.protected.contains(&"score.py".to_string()));
    assert!(smoke.protected.contains(&"rcc/rust.py".to_string()));
    let prepare = env.manifest.prepare.as_ref().unwrap();
    assert!(prepare.requirements.is_none());
    // The held-out problems are in the preparation, not in the workspace.
    let ready = prepared();
    assert!(ready.dir.join("heldout.jsonl").is_file());
    assert!(ready.venv.is_none());
    let (_tmp, ws) = workspace(&env, false);
    assert!(!ws.join("heldout.jsonl").exists());
}

#[test]
fn judge_unit_tests_pass() {
    if !tools_available() {
        return;
    }
    let output = Command::new("python3")
        .arg("-B")
        .arg(env_dir().join("tests/test_judge.py"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("OK"), "{text}");
}

#[test]
fn starting_scores_zero_and_reference_one() {
    if !tools_available() {
        return;
    }
    let env = environment();
    let plan = smoke_plan(&env);
    let mut results = Vec::new();
    for with_reference in [false, true] {
        let (_tmp, ws) = workspace(&env, with_reference);
        let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
        let outcome = score(&plan, &ws, &hashes, &[]);
        assert!(outcome.valid, "{outcome:#?}");
        assert!(!ws.join("__pycache__").exists());
        assert!(!ws.join("rcc/__pycache__").exists());
        let raw = outcome.raw.unwrap();
        let normalized = plan.normalizer.normalize(raw).unwrap();
        results.push((raw, normalized, outcome));
    }
    let (start_raw, start, start_outcome) = &results[0];
    let (ref_raw, reference, ref_outcome) = &results[1];
    loud(&format!(
        "rust-codecontests smoke: starting {start_raw} (normalized {start}), \
         reference {ref_raw} (normalized {reference})"
    ));
    assert_eq!(*start_raw, 0.0, "{start_outcome:#?}");
    assert_eq!(*start, 0.0);
    assert_eq!(verdicts(start_outcome)["compile_error"], 12);
    assert!((reference - 1.0).abs() < 1e-9, "{ref_outcome:#?}");
    assert_eq!(ref_outcome.scorer_message["solved"], 8);
    let v = verdicts(ref_outcome);
    assert_eq!(v["time_limit"], 1, "{v:?}");
    assert_eq!(v["memory_limit"], 1, "{v:?}");
    assert_eq!(ref_outcome.scorer_message["spend_limit_hit"], false);
}

#[test]
fn broken_scaffolds_score_zero_or_invalid() {
    if !tools_available() {
        return;
    }
    // Crashing on every problem: a valid entry with 0 solved and the error shown.
    let outcome = score_scaffold(
        Some("def solve(problem, client):\n    print('noise')\n    raise RuntimeError('boom')\n"),
        &[],
    );
    assert!(outcome.valid, "{outcome:#?}");
    assert_eq!(outcome.raw, Some(0.0));
    assert_eq!(outcome.scorer_message["scaffold_errors"], 12);
    let first = outcome.scorer_message["first_scaffold_error"]
        .as_str()
        .unwrap();
    assert!(first.contains("RuntimeError: boom"), "{first}");

    let outcome = score_scaffold(Some("def solve(problem, client):\n    return None\n"), &[]);
    assert!(outcome.valid, "{outcome:#?}");
    assert_eq!(outcome.raw, Some(0.0));
    assert!(
        outcome.message.contains("returned NoneType, not str"),
        "{}",
        outcome.message
    );

    // Missing or unimportable: invalid, with the reason.
    let cases = [
        (None, "there is no scaffold.py in the workspace"),
        (
            Some("def solve(problem, client)\n    return ''\n"),
            "could not load scaffold.py: SyntaxError",
        ),
        (
            Some("import no_such_module_here\n"),
            "could not load scaffold.py: ModuleNotFoundError",
        ),
        (
            Some("def answer(problem, client):\n    return ''\n"),
            "does not define solve(problem, client)",
        ),
    ];
    for (scaffold, expected) in cases {
        let outcome = score_scaffold(scaffold, &[]);
        assert!(!outcome.valid, "{expected}: {outcome:#?}");
        assert!(
            outcome.message.contains(expected),
            "{expected}: {}",
            outcome.message
        );
    }
}

#[test]
fn programs_over_the_time_or_memory_limit_are_unsolved() {
    if !tools_available() {
        return;
    }
    // Half the problems get a busy loop, the other half a 1 GiB allocation.
    let scaffold = r#"
SPIN = "fn main() { let mut x: u64 = 1; loop { x = x.wrapping_mul(3).wrapping_add(1); if x == 0 { break; } } println!(\"{}\", x); }\n"
HOG = "fn main() { let v: Vec<u64> = vec![7; 1 << 27]; println!(\"{}\", v.iter().sum::<u64>()); }\n"

def solve(problem, client):
    return SPIN if len(problem["name"]) % 2 else HOG
"#;
    let outcome = score_scaffold(Some(scaffold), &[]);
    assert!(outcome.valid, "{outcome:#?}");
    assert_eq!(outcome.raw, Some(0.0));
    let v = verdicts(&outcome);
    assert!(v["time_limit"] > 0 && v["memory_limit"] > 0, "{v:?}");
    assert_eq!(v["time_limit"] + v["memory_limit"], 12, "{v:?}");
}

#[test]
fn a_changed_protected_file_is_caught() {
    let env = environment();
    let plan = smoke_plan(&env);
    let (_tmp, ws) = workspace(&env, false);
    let at_start = protected::hash_files(&ws, &plan.protected).unwrap();
    let path = ws.join("rcc/rust.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("\ndef outputs_match(expected, got):\n    return True\n");
    std::fs::write(&path, text).unwrap();
    let outcome = score(&plan, &ws, &at_start, &[]);
    assert!(!outcome.valid);
    assert_eq!(outcome.message, "protected file changed: rcc/rust.py");
}

#[test]
fn the_spend_limit_stops_a_scoring_run() {
    if !tools_available() {
        return;
    }
    let env = environment();
    let plan = smoke_plan(&env);
    let (_tmp, ws) = workspace(&env, true);
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();
    let outcome = score(
        &plan,
        &ws,
        &hashes,
        &[("RUST_CODECONTESTS_MAX_REQUESTS", "3")],
    );
    assert!(outcome.valid, "{outcome:#?}");
    assert_eq!(outcome.scorer_message["spend_limit_hit"], true);
    assert_eq!(outcome.scorer_message["requests"], 3);
    let v = verdicts(&outcome);
    assert!(v["not_attempted"] >= 9, "{v:?}");
    assert!(outcome.raw.unwrap() < 8.0 / 12.0);
}

/// The stand-in served on its own, standing in for the operator's endpoint.
struct Endpoint(Child, String);

impl Endpoint {
    fn start() -> Endpoint {
        let heldout = prepared().dir.join("heldout.jsonl");
        let mut child = Command::new("python3")
            .args(["-B", "-u", "-m", "rcc.standin"])
            .arg(&heldout)
            .args(["--port", "0"])
            .current_dir(env_dir().join("workspace"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_string();
        Endpoint(child, url)
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn full_profile_uses_the_operators_endpoint() {
    if !tools_available() {
        return;
    }
    let env = environment();
    let plan = env.scoring(Some("full")).unwrap();
    let (_tmp, ws) = workspace(&env, true);
    let hashes = protected::hash_files(&ws, &plan.protected).unwrap();

    let outcome = score(&plan, &ws, &hashes, &[]);
    assert!(!outcome.valid);
    assert!(
        outcome
            .message
            .contains("the operator must set REBENCH_MODEL_URL and REBENCH_MODEL_KEY"),
        "{}",
        outcome.message
    );

    // (The smoke preparation's held-out file stands in for the CodeContests one.)
    let endpoint = Endpoint::start();
    let outcome = score(
        &plan,
        &ws,
        &hashes,
        &[
            ("REBENCH_MODEL_URL", endpoint.1.as_str()),
            ("REBENCH_MODEL_KEY", "operator-secret"),
            ("RUST_CODECONTESTS_WORKERS", "2"),
        ],
    );
    assert!(outcome.valid, "{outcome:#?}");
    assert_eq!(outcome.scorer_message["solved"], 8, "{outcome:#?}");
    assert_eq!(outcome.details["model"], "gpt-3.5-turbo-0125");
    assert!(!outcome.output.contains("operator-secret"));
}

#[test]
fn in_an_isolated_session_scaffolds_cannot_read_the_held_out_problems() {
    if !tools_available() || !common::bwrap_works("the isolated rust-codecontests test") {
        return;
    }
    let env = environment();
    let plan = smoke_plan(&env);
    let hidden = env_dir()
        .canonicalize()
        .unwrap()
        .join("hidden/heldout_smoke.jsonl");
    let peeking = format!(
        "def solve(problem, client):\n    open({:?}).read()\n    raise RuntimeError('LEAKED')\n",
        hidden.display().to_string()
    );
    // The jail the server gives an isolated session's scorer (REBENCH_JAIL):
    // the environment folder and the preparation hidden, the workspace shown.
    let jailed = |ws: &Path, scaffold: Option<&str>| {
        let hashes = protected::hash_files(ws, &plan.protected).unwrap();
        if let Some(text) = scaffold {
            std::fs::write(ws.join("scaffold.py"), text).unwrap();
        }
        let jail = common::test_jail(
            &[env_dir().canonicalize().unwrap(), prepared().dir.clone()],
            &[],
            &[ws.to_path_buf()],
            ws,
        );
        score(
            &plan,
            ws,
            &hashes,
            &[("REBENCH_JAIL", jail.prefix.as_str())],
        )
    };

    // Without a jail the scaffold can read them (the hole isolation closes).
    let open = score_scaffold(Some(&peeking), &[]);
    let first = open.scorer_message["first_scaffold_error"]
        .as_str()
        .unwrap_or("");
    assert!(first.contains("LEAKED"), "{open:#?}");

    let (_a, ws) = workspace(&env, false);
    let outcome = jailed(&ws, Some(&peeking));
    assert!(outcome.valid, "{outcome:#?}");
    let first = outcome.scorer_message["first_scaffold_error"]
        .as_str()
        .unwrap_or("");
    assert!(
        first.contains("FileNotFoundError") && !first.contains("LEAKED"),
        "{first}"
    );

    // Scoring still works in the jail: the reference scaffold solves its 8.
    let (_b, ws) = workspace(&env, true);
    let outcome = jailed(&ws, None);
    assert!(outcome.valid, "{outcome:#?}");
    assert_eq!(outcome.scorer_message["solved"], 8, "{outcome:#?}");
    let leftovers: Vec<_> = std::fs::read_dir(&ws)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".rcc-run-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
