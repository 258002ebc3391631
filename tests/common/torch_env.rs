//! The shared harness of the PyTorch environment tests: one data dir (so all
//! of them share one torch venv), a smoke preparation made once per test
//! binary, and the scorer run the way the server runs it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rebench::environment::Environment;
use rebench::environment::ScoringPlan;
use rebench::environment::prepare::{Prepared, check, prepare};
use rebench::scoring::{OUTPUT_LIMIT, ScorerInvocation, ScorerOutcome, protected, run_scorer};

pub const PROFILE: &str = "smoke";

/// The data dir every torch environment test prepares into, so they share
/// one torch venv (`<data>/venvs/<key>`, same requirements.txt).
pub fn data_dir() -> PathBuf {
    match std::env::var_os("REBENCH_TORCH_TEST_DATA") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_TARGET_TMPDIR")).join("torch-envs"),
    }
}

/// Straight to fd 2: libtest captures `eprintln!`, and a skip must be seen.
pub fn loud(message: &str) {
    let _ = writeln!(std::io::stderr(), "\n{message}\n");
}

/// The smoke preparation of `env`, made once per test binary (the other tests
/// wait). None = could not prepare (no network): the caller skips, loudly;
/// with `REBENCH_REQUIRE_TORCH=1` (CI) that is a failure instead.
pub fn prepared_once(env: &Environment) -> Option<&'static Prepared> {
    static PREPARED: OnceLock<Option<Prepared>> = OnceLock::new();
    PREPARED
        .get_or_init(|| {
            let data = data_dir();
            let id = env.id().to_string();
            if let Ok(ready) = check(env, Some(PROFILE), &data) {
                return Some(ready);
            }
            loud(&format!(
                "preparing {id} (smoke) in {}: data, small models, and torch if this data dir has none (minutes)",
                data.display()
            ));
            let started = std::time::Instant::now();
            let mut log = Vec::new();
            match prepare(env, Some(PROFILE), &data, &mut log) {
                Ok(ready) => {
                    loud(&format!("prepared {id} (smoke) in {:.0} s", started.elapsed().as_secs_f64()));
                    Some(ready)
                }
                Err(e) => {
                    let text = format!(
                        "SKIPPED: {id} tests did not run: could not prepare the smoke profile \
                         (torch not installable here?): {e}"
                    );
                    if std::env::var_os("REBENCH_REQUIRE_TORCH").is_some_and(|v| v == "1") {
                        panic!("{text}\n{}", String::from_utf8_lossy(&log));
                    }
                    loud(&text);
                    None
                }
            }
        })
        .as_ref()
}

/// Runs the official scorer as the server does: protected files checked
/// first, cwd = workspace, the protocol's variables plus the preparation's.
/// One scorer at a time: tests run in parallel on a small machine, and the
/// scorers train models or time code.
pub fn score(
    env_dir: &Path,
    plan: &ScoringPlan,
    ready: &Prepared,
    ws: &Path,
    protected_at_start: &BTreeMap<String, String>,
    extra_env: &[(&str, &str)],
) -> ScorerOutcome {
    if let Err(message) = protected::check_files(ws, protected_at_start) {
        return ScorerOutcome {
            valid: false,
            raw: None,
            message,
            scorer_message: serde_json::Value::Null,
            details: serde_json::Value::Null,
            output: String::new(),
            exit_code: None,
            duration_ms: 0,
            infrastructure: None,
        };
    }
    let env_dir = env_dir.canonicalize().unwrap();
    let mut vars: Vec<(String, String)> = plan.scorer_env(&env_dir, ws).into_iter().collect();
    vars.extend(ready.scorer_env(std::env::var_os("PATH").as_deref()));
    vars.extend(
        extra_env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let invocation = ScorerInvocation {
        argv: plan.argv(&env_dir, ws),
        cwd: ws.to_path_buf(),
        env: vars,
        env_clear: false,
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

/// A session workspace as the server assembles it: `workspace/`, then the
/// preparation's `workspace/` files, then (optionally) `reference/`.
pub fn session_workspace(
    env: &Environment,
    ready: &Prepared,
    with_reference: bool,
) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    rebench::environment::files::assemble_workspace(&env.workspace_dir(), Some(&ready.dir), &ws)
        .unwrap();
    if with_reference {
        rebench::environment::files::overlay_reference(
            &env.reference_dir().unwrap(),
            &ws,
            Some(PROFILE),
        )
        .unwrap();
    }
    (tmp, ws)
}

/// The error an invalid attempt reports (the scorer's `error`, non-empty);
/// the server shows the same text.
pub fn invalid_error(outcome: &ScorerOutcome) -> String {
    assert!(!outcome.valid, "expected invalid: {outcome:#?}");
    let error = outcome.scorer_message["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!error.is_empty(), "{outcome:#?}");
    assert!(
        outcome.message.contains(&error),
        "{} vs {error}",
        outcome.message
    );
    error
}

/// A jail for scoring `ws` as the server makes one for an isolated
/// session: the preparation (held-out data) and the environment folder
/// hidden, the venv read-only, the workspace writable.
pub fn scorer_jail(env_dir: &Path, ready: &Prepared, ws: &Path) -> super::TestJail {
    let hidden = [ready.dir.clone(), env_dir.canonicalize().unwrap()];
    let venv: Vec<PathBuf> = ready.venv.iter().cloned().collect();
    super::test_jail(&hidden, &venv, &[ws.to_path_buf()], ws)
}

/// Scores `ws` as it is, then through a jail for it (`scorer_jail`): the
/// open outcome, the jailed one, and the jail (kept for more scoring).
pub fn score_open_and_jailed(
    env_dir: &Path,
    plan: &ScoringPlan,
    ready: &Prepared,
    ws: &Path,
    protected_at_start: &BTreeMap<String, String>,
) -> (ScorerOutcome, ScorerOutcome, super::TestJail) {
    let open = score(env_dir, plan, ready, ws, protected_at_start, &[]);
    let jail = scorer_jail(env_dir, ready, ws);
    let jailed = score(
        env_dir,
        plan,
        ready,
        ws,
        protected_at_start,
        &[("REBENCH_JAIL", jail.prefix.as_str())],
    );
    (open, jailed, jail)
}

/// How far the reference lies above the start in the manifest's normalized
/// units, both timed in the same run: `position(reference) -
/// position(starting)`, unclipped. A timed metric's absolute values follow
/// the machine's speed (per-machine calibration takes care of that in a
/// session), but this span does not: on a log transform it is
/// ln(start/reference) / ln(manifest start/manifest reference), whatever the
/// machine. About 1 means the manifest's smoke values describe the two
/// solutions; a calibrated machine then scores them about 0 and about 1.
pub fn measured_span(plan: &ScoringPlan, start_raw: f64, ref_raw: f64) -> f64 {
    let position = |raw: f64| {
        plan.normalizer
            .position(raw)
            .unwrap_or_else(|| panic!("no normalized position for {raw}"))
    };
    position(ref_raw) - position(start_raw)
}
