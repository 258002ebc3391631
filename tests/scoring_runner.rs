//! Runs real scorer processes (sh scripts) through `run_scorer`.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rebench::scoring::{OUTPUT_LIMIT, ScorerInvocation, ScorerOutcome, run_scorer};
use serde_json::json;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/scorers")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn invocation(argv: &[&str], cwd: &Path) -> ScorerInvocation {
    ScorerInvocation {
        argv: argv.iter().map(|arg| arg.to_string()).collect(),
        cwd: cwd.to_path_buf(),
        env: Vec::new(),
        env_clear: false,
        cgroups: Vec::new(),
        timeout: Duration::from_secs(30),
        output_limit: OUTPUT_LIMIT,
    }
}

async fn run_sh(script: &str) -> ScorerOutcome {
    let dir = tempfile::tempdir().unwrap();
    run_scorer(&invocation(&["sh", "-c", script], dir.path())).await
}

fn assert_invalid(outcome: &ScorerOutcome, message: &str) {
    assert!(!outcome.valid, "{outcome:#?}");
    assert_eq!(outcome.raw, None, "{outcome:#?}");
    assert_eq!(outcome.message, message, "{outcome:#?}");
}

/// Reads "<scorer pid> <grandchild pid>" written by a fixture.
fn read_pids(path: &Path) -> Vec<i32> {
    let text = std::fs::read_to_string(path).unwrap();
    text.split_whitespace()
        .map(|pid| pid.parse().unwrap())
        .collect()
}

/// Dead, or a zombie waiting for init to reap it (it runs no code either way).
fn is_dead(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the parenthesised command name.
    stat.rsplit(')')
        .next()
        .is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X']))
}

fn assert_dies_soon(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while !is_dead(pid) {
        assert!(Instant::now() < deadline, "process {pid} is still alive");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn valid_scorer_gets_cwd_and_env() {
    let workspace = tempfile::tempdir().unwrap();
    let mut inv = invocation(&["sh", &fixture("echo_context.sh")], workspace.path());
    let workspace_path = workspace.path().canonicalize().unwrap();
    let workspace_text = workspace_path.to_string_lossy().into_owned();
    inv.env = vec![
        ("REBENCH_WORKSPACE".into(), workspace_text.clone()),
        ("REBENCH_PROFILE".into(), "gpu-small".into()),
        ("REBENCH_ENV_DIR".into(), "/envs/fix_embedding".into()),
    ];
    inv.env_clear = true;

    let outcome = run_scorer(&inv).await;

    assert!(outcome.valid, "{outcome:#?}");
    assert_eq!(outcome.raw, Some(0.5));
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(
        outcome.scorer_message,
        json!({"cwd": workspace_text, "workspace": workspace_text, "profile": "gpu-small", "home": "unset"})
    );
    assert_eq!(
        outcome.message,
        format!(
            "cwd: {workspace_text}, home: unset, profile: gpu-small, workspace: {workspace_text}"
        )
    );
    assert_eq!(outcome.details, json!({"env_dir": "/envs/fix_embedding"}));
    assert!(
        outcome
            .output
            .contains(&format!("scoring in {workspace_text}")),
        "{}",
        outcome.output
    );
}

#[tokio::test]
async fn non_zero_exit_is_invalid_even_with_json() {
    let outcome = run_sh(r#"echo '{"raw": 1}'; exit 3"#).await;
    assert_invalid(&outcome, "scorer exited with status 3");
    assert_eq!(outcome.exit_code, Some(3));

    let outcome = run_sh(r#"echo '{"raw": 1}'; kill -9 $$"#).await;
    assert_invalid(&outcome, "scorer killed by signal 9");
    assert_eq!(outcome.exit_code, None);
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let pid_arg = pid_file.to_string_lossy().into_owned();
    let mut inv = invocation(
        &["sh", &fixture("hang_with_child.sh"), &pid_arg],
        dir.path(),
    );
    inv.timeout = Duration::from_secs(1);

    let started = Instant::now();
    let outcome = run_scorer(&inv).await;
    let elapsed = started.elapsed();

    assert_invalid(&outcome, "timeout after 1s");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    assert!(outcome.output.contains("working..."), "{}", outcome.output);
    for pid in read_pids(&pid_file) {
        assert_dies_soon(pid);
    }
}

#[tokio::test]
async fn stray_children_do_not_delay_or_outlive_a_finished_scorer() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let pid_arg = pid_file.to_string_lossy().into_owned();
    let inv = invocation(
        &["sh", &fixture("exit_leaving_child.sh"), &pid_arg],
        dir.path(),
    );

    let started = Instant::now();
    let outcome = run_scorer(&inv).await;

    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    assert!(outcome.valid, "{outcome:#?}");
    assert_eq!(outcome.raw, Some(7.0));
    assert_eq!(outcome.message, "done");
    let pids = read_pids(&pid_file);
    assert_dies_soon(pids[1]);
}

#[tokio::test]
async fn output_without_json_is_invalid() {
    assert_invalid(
        &run_sh("echo hello; echo 'not a result'").await,
        "scorer printed no JSON result (last stdout line: \"not a result\")",
    );
    assert_invalid(
        &run_sh("true").await,
        "scorer printed no JSON result (stdout was empty)",
    );
    // The result must be on stdout, not stderr.
    assert_invalid(
        &run_sh(r#"echo '{"raw": 1}' >&2"#).await,
        "scorer printed no JSON result (stdout was empty)",
    );
}

#[tokio::test]
async fn huge_output_is_truncated_but_still_parsed() {
    let outcome = run_sh(
        r#"echo FIRST; head -c 5000000 /dev/zero | tr '\0' x; echo; echo '{"raw": 1, "message": "big"}'"#,
    )
    .await;
    assert!(outcome.valid, "{}", outcome.message);
    assert_eq!(outcome.raw, Some(1.0));
    assert_eq!(outcome.message, "big");
    assert!(
        outcome.output.len() <= OUTPUT_LIMIT,
        "{}",
        outcome.output.len()
    );
    assert!(outcome.output.starts_with("FIRST\n"));
    assert!(outcome.output.contains(" bytes truncated ...]"));
    assert!(
        outcome
            .output
            .ends_with("{\"raw\": 1, \"message\": \"big\"}\n")
    );
}

#[tokio::test]
async fn small_output_limit_is_respected() {
    let dir = tempfile::tempdir().unwrap();
    let mut inv = invocation(
        &["sh", "-c", r#"seq 1 10000; echo '{"raw": 2}'"#],
        dir.path(),
    );
    inv.output_limit = 200;
    let outcome = run_scorer(&inv).await;
    assert_eq!(outcome.raw, Some(2.0), "{}", outcome.message);
    assert!(outcome.output.len() <= 200, "{}", outcome.output.len());
    assert!(
        outcome.output.starts_with("1\n2\n3\n"),
        "{}",
        outcome.output
    );
}

#[tokio::test]
async fn flooding_stderr_does_not_deadlock() {
    let started = Instant::now();
    let outcome = run_sh(
        r#"head -c 5000000 /dev/zero | tr '\0' e >&2; head -c 3000000 /dev/zero | tr '\0' o; echo; echo '{"raw": 2}'"#,
    )
    .await;
    assert!(outcome.valid, "{}", outcome.message);
    assert_eq!(outcome.raw, Some(2.0));
    assert!(outcome.output.len() <= OUTPUT_LIMIT);
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[tokio::test]
async fn missing_program_or_workspace_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run_scorer(&invocation(
        &["python9-not-installed", "score.py"],
        dir.path(),
    ))
    .await;
    assert_invalid(
        &outcome,
        "scorer could not start: python9-not-installed: No such file or directory",
    );
    assert_eq!(outcome.exit_code, None);

    let gone = PathBuf::from("/nonexistent/rebench-workspace");
    let outcome = run_scorer(&invocation(&["sh", "-c", "true"], &gone)).await;
    assert!(
        outcome
            .message
            .starts_with("scorer could not start: working directory"),
        "{}",
        outcome.message
    );

    let outcome = run_scorer(&invocation(&[], dir.path())).await;
    assert_invalid(&outcome, "scorer could not start: empty command");
}

#[tokio::test]
async fn raw_null_reports_the_scorer_message() {
    let outcome = run_sh(
        r#"echo '{"raw": null, "message": "wrong answer at index 3", "details": {"i": 3}}'"#,
    )
    .await;
    assert_invalid(&outcome, "no score: wrong answer at index 3");
    assert_eq!(outcome.scorer_message, json!("wrong answer at index 3"));
    assert_eq!(outcome.details, json!({"i": 3}));
}

#[tokio::test]
async fn python_nan_is_invalid() {
    let has_python = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !has_python {
        println!("SKIPPED: python3 not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = r#"import json; print(json.dumps({"raw": float("nan"), "message": {"loss": float("inf")}}))"#;
    let outcome = run_scorer(&invocation(&["python3", "-c", script], dir.path())).await;
    assert_invalid(&outcome, "raw is NaN");
    assert_eq!(outcome.scorer_message, json!({"loss": "Infinity"}));
}

#[tokio::test]
async fn outcome_round_trips_through_json() {
    let outcome = run_sh(r#"echo '{"raw": 0.25, "message": {"acc": 0.9}}'"#).await;
    let text = serde_json::to_string(&outcome).unwrap();
    let back: ScorerOutcome = serde_json::from_str(&text).unwrap();
    assert_eq!(back, outcome);
}
