//! exec() against real processes, each case twice: spawned by the server
//! (`exec`), and by a session's spawner (`exec_via`, `rebench-enter --serve`).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::path::Path;
use std::time::{Duration, Instant};

use rebench::sandbox::exec::{ExecResult, ExecSpec, exec, exec_via};
use rebench::sandbox::procs::process_state;
use rebench::sandbox::spawner::{SERVE_FLAG, Spawner};

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

/// Which way a case runs its commands.
#[derive(Clone, Copy)]
enum How {
    Direct,
    ViaSpawner,
}

impl How {
    async fn run(self, spec: &ExecSpec) -> anyhow::Result<ExecResult> {
        match self {
            How::Direct => exec(spec).await,
            How::ViaSpawner => {
                let argv = [
                    env!("CARGO_BIN_EXE_rebench-enter").to_string(),
                    SERVE_FLAG.to_string(),
                ];
                let path = std::env::var("PATH").unwrap();
                let spawner =
                    Spawner::start(&argv, &[("PATH".into(), path)], Path::new("/")).await?;
                Ok(exec_via(spec, &spawner).await?)
            }
        }
    }
}

/// Each case as a test of both ways.
macro_rules! both_ways {
    ($($case:ident),* $(,)?) => {
        mod direct {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::How::Direct).await
            })*
        }
        mod via_spawner {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::How::ViaSpawner).await
            })*
        }
    };
}

both_ways!(
    exit_code_and_both_streams_are_captured,
    killed_by_signal_reports_the_signal,
    megabyte_flood_is_bounded_and_marked_truncated,
    timeout_kills_the_whole_process_group,
    background_jobs_outlive_the_command_without_holding_it_open,
    escaped_setsid_grandchild_does_not_hang_exec,
    cwd_and_env_are_respected,
    stdin_is_delivered_and_closed,
    no_stdin_reads_as_empty,
    missing_cwd_is_a_spawn_error,
    invalid_utf8_is_replaced_not_rejected,
    cancelled_exec_kills_its_process_group,
    a_cleared_environment_holds_only_the_added_variables,
);

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

async fn exit_code_and_both_streams_are_captured(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let result = how
        .run(&spec("echo out; echo err >&2; exit 7", dir.path()))
        .await
        .unwrap();
    assert_eq!(result.exit_code, Some(7));
    assert_eq!(result.signal, None);
    assert_eq!(result.stdout, "out\n");
    assert_eq!(result.stderr, "err\n");
    assert!(!result.stdout_truncated && !result.stderr_truncated);
    assert!(!result.timed_out);
}

async fn killed_by_signal_reports_the_signal(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let result = how.run(&spec("kill -9 $$", dir.path())).await.unwrap();
    assert_eq!(result.exit_code, None);
    assert_eq!(result.signal, Some(libc::SIGKILL));
}

async fn megabyte_flood_is_bounded_and_marked_truncated(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let mut flood = spec(
        "head -c 1000000 /dev/zero | tr '\\0' a; head -c 1000000 /dev/zero | tr '\\0' b >&2; echo done",
        dir.path(),
    );
    flood.output_limit = 1000;
    let result = how.run(&flood).await.unwrap();
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.stdout, "a".repeat(1000));
    assert_eq!(result.stderr, "b".repeat(1000));
    assert!(result.stdout_truncated && result.stderr_truncated);
}

async fn timeout_kills_the_whole_process_group(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("bg.pid");
    let mut slow = spec("sleep 100 & echo $! > bg.pid; sleep 100", dir.path());
    slow.timeout = Duration::from_millis(500);
    let started = Instant::now();
    let result = how.run(&slow).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(result.timed_out);
    assert_eq!(result.signal, Some(libc::SIGKILL));
    let background = read_pid(&pid_file);
    assert!(wait_gone(background).await, "background sleep survived");
}

async fn background_jobs_outlive_the_command_without_holding_it_open(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("bg.pid");
    let started = Instant::now();
    let result = how
        .run(&spec(
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

async fn escaped_setsid_grandchild_does_not_hang_exec(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("escaped.pid");
    let started = Instant::now();
    let result = how
        .run(&spec(
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

async fn cwd_and_env_are_respected(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let mut with_env = spec("pwd; echo \"$TZ\"", dir.path());
    with_env.env = vec![("TZ".into(), "value with spaces".into())];
    let result = how.run(&with_env).await.unwrap();
    let canonical = dir.path().canonicalize().unwrap();
    assert_eq!(
        result.stdout,
        format!("{}\nvalue with spaces\n", canonical.display())
    );
}

async fn stdin_is_delivered_and_closed(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let mut with_input = spec("wc -c; cat", dir.path());
    with_input.stdin = Some(b"12345".to_vec());
    let result = how.run(&with_input).await.unwrap();
    assert_eq!(result.stdout.trim(), "5");

    let mut echo_back = spec("cat", dir.path());
    echo_back.stdin = Some(b"line one\nline two\n".to_vec());
    let result = how.run(&echo_back).await.unwrap();
    assert_eq!(result.stdout, "line one\nline two\n");
}

async fn no_stdin_reads_as_empty(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let result = how.run(&spec("cat; echo end", dir.path())).await.unwrap();
    assert_eq!(result.stdout, "end\n");
}

async fn missing_cwd_is_a_spawn_error(how: How) {
    let result = how
        .run(&spec("true", Path::new("/nonexistent/rebench/dir")))
        .await;
    assert!(result.is_err());
}

async fn invalid_utf8_is_replaced_not_rejected(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let result = how
        .run(&spec("printf 'a\\377b'", dir.path()))
        .await
        .unwrap();
    assert_eq!(result.stdout, "a\u{FFFD}b");
}

async fn cancelled_exec_kills_its_process_group(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("bg.pid");
    let long = spec("sleep 100 & echo $! > bg.pid; sleep 100", dir.path());
    let cancelled = tokio::time::timeout(Duration::from_millis(500), how.run(&long)).await;
    assert!(cancelled.is_err(), "exec should still have been running");
    assert!(
        wait_gone(read_pid(&pid_file)).await,
        "background sleep survived"
    );
}

async fn a_cleared_environment_holds_only_the_added_variables(how: How) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(
        "echo \"${HOME:-no-home} ${LANGUAGE:-no-added}\"",
        dir.path(),
    );
    s.env_clear = true;
    s.env = vec![("LANGUAGE".into(), "yes".into())];
    let result = how.run(&s).await.unwrap();
    assert_eq!(result.stdout.trim(), "no-home yes", "{result:?}");
}

async fn spawner() -> Spawner {
    let argv = [
        env!("CARGO_BIN_EXE_rebench-enter").to_string(),
        SERVE_FLAG.to_string(),
    ];
    let path = std::env::var("PATH").unwrap();
    Spawner::start(&argv, &[("PATH".into(), path)], Path::new("/"))
        .await
        .unwrap()
}

#[tokio::test]
async fn the_spawner_gives_commands_the_launchers_environment_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(
        "echo \"$TZ ${OPENAI_API_KEY:-none} ${OPERATOR_SETTING:-none}\"",
        dir.path(),
    );
    s.env_clear = true;
    s.env = vec![
        ("TZ".into(), "UTC".into()),
        ("OPENAI_API_KEY".into(), "sk-operator".into()),
        ("OPERATOR_SETTING".into(), "x".into()),
    ];
    let result = exec_via(&s, &spawner().await).await.unwrap();
    assert_eq!(result.stdout, "UTC none none\n", "{result:?}");
}

#[tokio::test]
async fn a_program_the_spawner_cannot_find_is_named() {
    let spawner = spawner().await;
    let stdio = || -> [std::os::fd::OwnedFd; 3] {
        std::array::from_fn(|_| std::fs::File::open("/dev/null").unwrap().into())
    };
    let path = vec![("PATH".to_string(), "/nonexistent".to_string())];
    let err = spawner
        .spawn(vec!["bash".into()], path.clone(), "/".into(), stdio())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&err, rebench::sandbox::spawner::SpawnError::NotFound(m) if m.contains("bash")),
        "{err:?}"
    );
    // A path is taken as it is.
    let started = spawner
        .spawn(
            vec!["/bin/sh".into(), "-c".into(), "exit 5".into()],
            path,
            "/".into(),
            stdio(),
        )
        .await
        .unwrap();
    let exit = started.exited.await.unwrap();
    assert_eq!((exit.code, exit.signal), (Some(5), None));
}

#[tokio::test]
async fn the_spawner_ends_when_the_server_lets_go_and_its_commands_carry_on() {
    let dir = tempfile::tempdir().unwrap();
    let spawner = spawner().await;
    let pid = spawner.pid().unwrap() as i32;
    let result = exec_via(
        &spec("sleep 100 & echo $! > bg.pid; echo started", dir.path()),
        &spawner,
    )
    .await
    .unwrap();
    assert_eq!(result.stdout, "started\n");
    assert!(spawner.is_alive());
    drop(spawner);
    assert!(wait_gone(pid).await, "the spawner outlived its server end");
    let background = read_pid(&dir.path().join("bg.pid"));
    assert!(
        !is_gone(background),
        "a background job belongs to the session"
    );
    kill_pid(background);
}

#[tokio::test]
async fn a_command_whose_spawner_dies_still_returns_and_the_next_one_is_refused_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let spawner = spawner().await;
    // The command kills the spawner (a participant may: same user), once
    // the spawner has said it started (it does within microseconds).
    let result = exec_via(
        &spec("sleep 0.5; kill -9 $PPID; echo after", dir.path()),
        &spawner,
    )
    .await
    .unwrap();
    assert_eq!(result.stdout, "after\n");
    assert_eq!((result.exit_code, result.signal), (None, None), "not known");
    assert!(wait_until_dead(&spawner).await);
    let err = exec_via(&spec("true", dir.path()), &spawner)
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, rebench::sandbox::spawner::SpawnError::Unreachable(_)),
        "{err:?}"
    );
}

async fn wait_until_dead(spawner: &Spawner) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while spawner.is_alive() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    !spawner.is_alive()
}

#[tokio::test]
async fn a_command_timed_out_while_its_spawner_is_stopped_returns_without_it() {
    // As when the session is paused mid-command: the spawner, frozen with
    // it, cannot say how the command ended.
    let dir = tempfile::tempdir().unwrap();
    let spawner = spawner().await;
    let pid = spawner.pid().unwrap() as i32;
    let mut stuck = spec("kill -STOP $PPID; sleep 100", dir.path());
    stuck.timeout = Duration::from_millis(800);
    let started = Instant::now();
    let result = exec_via(&stuck, &spawner).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(result.timed_out, "{result:?}");
    assert_eq!((result.exit_code, result.signal), (None, None), "not known");
    // SAFETY: signalling the spawner this test started.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    drop(spawner);
    assert!(wait_gone(pid).await);
}
