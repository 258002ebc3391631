//! exec() against real processes.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::path::Path;
use std::time::{Duration, Instant};

use rebench::sandbox::exec::{ExecSpec, exec};
use rebench::sandbox::procs::process_state;

fn spec(command: &str, cwd: &Path) -> ExecSpec {
    ExecSpec {
        command: command.to_string(),
        cwd: cwd.to_path_buf(),
        env: Vec::new(),
        env_clear: false,
        prefix: Vec::new(),
        timeout: Duration::from_secs(20),
        output_limit: 64 * 1024,
        stdin: None,
    }
}

fn is_gone(pid: i32) -> bool {
    matches!(process_state(pid), None | Some('Z' | 'X'))
}

async fn wait_gone(pid: i32) -> bool {
    wait_gone_within(pid, Duration::from_secs(5)).await
}

async fn wait_gone_within(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if is_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn exit_code_and_both_streams_are_captured() {
    let dir = tempfile::tempdir().unwrap();
    let result = exec(&spec("echo out; echo err >&2; exit 7", dir.path()))
        .await
        .unwrap();
    assert_eq!(result.exit_code, Some(7));
    assert_eq!(result.signal, None);
    assert_eq!(result.stdout, "out\n");
    assert_eq!(result.stderr, "err\n");
    assert!(!result.stdout_truncated && !result.stderr_truncated);
    assert!(!result.timed_out);
}

#[tokio::test]
async fn killed_by_signal_reports_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let result = exec(&spec("kill -9 $$", dir.path())).await.unwrap();
    assert_eq!(result.exit_code, None);
    assert_eq!(result.signal, Some(libc::SIGKILL));
}

#[tokio::test]
async fn megabyte_flood_is_bounded_and_marked_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let mut flood = spec(
        "head -c 1000000 /dev/zero | tr '\\0' a; head -c 1000000 /dev/zero | tr '\\0' b >&2; echo done",
        dir.path(),
    );
    flood.output_limit = 1000;
    let result = exec(&flood).await.unwrap();
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.stdout, "a".repeat(1000));
    assert_eq!(result.stderr, "b".repeat(1000));
    assert!(result.stdout_truncated && result.stderr_truncated);
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("bg.pid");
    let mut slow = spec("sleep 100 & echo $! > bg.pid; sleep 100", dir.path());
    slow.timeout = Duration::from_millis(500);
    let started = Instant::now();
    let result = exec(&slow).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(result.timed_out);
    assert_eq!(result.signal, Some(libc::SIGKILL));
    let background = read_pid(&pid_file);
    assert!(wait_gone(background).await, "background sleep survived");
}

#[tokio::test]
async fn background_jobs_outlive_the_command_without_holding_it_open() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("bg.pid");
    let started = Instant::now();
    let result = exec(&spec(
        "sleep 100 & echo $! > bg.pid; echo quick",
        dir.path(),
    ))
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(result.stdout, "quick\n");
    assert!(!result.timed_out);
    // Like `nohup train.py &` in a terminal: the job keeps running (the session
    // kills it when it ends), but exec returned promptly.
    let background = read_pid(&pid_file);
    assert!(
        !wait_gone_within(background, Duration::from_millis(300)).await,
        "the background job was killed"
    );
    // SAFETY: signalling a pid this test started.
    unsafe { libc::kill(background, libc::SIGKILL) };
    assert!(wait_gone(background).await);
}

#[tokio::test]
async fn escaped_setsid_grandchild_does_not_hang_exec() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("escaped.pid");
    let started = Instant::now();
    let result = exec(&spec(
        "setsid sh -c 'echo $$ > escaped.pid; exec sleep 100' & sleep 0.2; echo main",
        dir.path(),
    ))
    .await
    .unwrap();
    let escaped = read_pid(&pid_file);
    // The escapee is procs::kill_all's job; clean it up here.
    kill_pid(escaped);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(result.stdout, "main\n");
    assert_eq!(result.exit_code, Some(0));
}

fn kill_pid(pid: i32) {
    // The kill command keeps the test free of unsafe code.
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
}

#[tokio::test]
async fn cwd_and_env_are_respected() {
    let dir = tempfile::tempdir().unwrap();
    let mut with_env = spec("pwd; echo \"$REBENCH_TEST_VAR\"", dir.path());
    with_env.env = vec![("REBENCH_TEST_VAR".into(), "value with spaces".into())];
    let result = exec(&with_env).await.unwrap();
    let canonical = dir.path().canonicalize().unwrap();
    assert_eq!(
        result.stdout,
        format!("{}\nvalue with spaces\n", canonical.display())
    );
}

#[tokio::test]
async fn stdin_is_delivered_and_closed() {
    let dir = tempfile::tempdir().unwrap();
    let mut with_input = spec("wc -c; cat", dir.path());
    with_input.stdin = Some(b"12345".to_vec());
    let result = exec(&with_input).await.unwrap();
    assert_eq!(result.stdout.trim(), "5");

    let mut echo_back = spec("cat", dir.path());
    echo_back.stdin = Some(b"line one\nline two\n".to_vec());
    let result = exec(&echo_back).await.unwrap();
    assert_eq!(result.stdout, "line one\nline two\n");
}

#[tokio::test]
async fn no_stdin_reads_as_empty() {
    let dir = tempfile::tempdir().unwrap();
    let result = exec(&spec("cat; echo end", dir.path())).await.unwrap();
    assert_eq!(result.stdout, "end\n");
}

#[tokio::test]
async fn missing_cwd_is_a_spawn_error() {
    let result = exec(&spec("true", Path::new("/nonexistent/rebench/dir"))).await;
    assert!(result.is_err());
}

#[tokio::test]
async fn invalid_utf8_is_replaced_not_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let result = exec(&spec("printf 'a\\377b'", dir.path())).await.unwrap();
    assert_eq!(result.stdout, "a\u{FFFD}b");
}

#[tokio::test]
async fn cancelled_exec_kills_its_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("bg.pid");
    let long = spec("sleep 100 & echo $! > bg.pid; sleep 100", dir.path());
    let cancelled = tokio::time::timeout(Duration::from_millis(500), exec(&long)).await;
    assert!(cancelled.is_err(), "exec should still have been running");
    assert!(
        wait_gone(read_pid(&pid_file)).await,
        "background sleep survived"
    );
}

#[tokio::test]
async fn a_cleared_environment_holds_only_the_added_variables() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("echo \"${HOME:-no-home} ${ADDED:-no-added}\"", dir.path());
    s.env_clear = true;
    s.env = vec![("ADDED".into(), "yes".into())];
    let result = exec(&s).await.unwrap();
    assert_eq!(result.stdout.trim(), "no-home yes", "{result:?}");
}
