//! The `docker` backend through the real server, on the machine's Docker
//! engine (issue 13): a prefix-sum session in a container of its own, as
//! the unprivileged `agent` user in `/home/agent`, without network or a view
//! of the data dir; its shell runs the in-shell commands; scoring runs the
//! participant code in the container; pause freezes a detached `env -i`
//! loop; submitting takes a valid final score in it; a server killed with
//! -9 finds the container again; the end leaves no container. The base image is built once (debootstrap, a minute).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use rebench::session::PauseReason;
use rebench::session::Phase;

fn prefix_sum() -> std::path::PathBuf {
    repo_root().join("environments/prefix-sum")
}

/// A server whose sessions are `docker` ones, with the base image built;
/// None (said on stderr) where no engine answers.
fn docker_server() -> Option<TestServer> {
    if !docker_works("the docker backend tests") {
        return None;
    }
    base_image();
    Some(TestServer::start_with_env(&[("REBENCH_BACKEND", "docker")]))
}

async fn running_session(server: &TestServer) -> String {
    let id = server.new_session_cli(&prefix_sum(), "smoke");
    let out = server.cli(&["begin", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    id
}

fn ticks(ws: &Path) -> usize {
    std::fs::read_to_string(ws.join("ticks")).map_or(0, |t| t.lines().count())
}

const LOOP: &str = "setsid env -i /bin/sh -c 'while :; do echo x >> ticks; sleep 0.01; done' >/dev/null 2>&1 </dev/null &";

#[tokio::test]
async fn a_docker_session_runs_in_its_own_container() {
    let Some(server) = docker_server() else {
        return;
    };
    let id = running_session(&server).await;
    let view = server.show(&id).await;
    assert_eq!(
        (
            view.sandbox.as_str(),
            view.isolation.as_str(),
            view.host.as_str(),
            view.containment.as_str()
        ),
        ("docker", "docker", "local", "container")
    );
    assert_eq!(
        session_containers(&id).len(),
        1,
        "one container per session"
    );
    // prefix-sum asks for 1 CPU and 1 GB, and its scores are timed: the
    // container gets its granted core to itself, and 1 GB.
    let grant = view.grant.clone().expect("a grant");
    assert_eq!(grant.cpus.len(), 1);
    assert!(!grant.shared_cpus);
    let limits = std::process::Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{.HostConfig.CpusetCpus}} {{.HostConfig.NanoCpus}} {{.HostConfig.Memory}}",
        ])
        .arg(format!("rebench-{id}"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&limits.stdout).trim(),
        format!("{} 0 1073741824", grant.cpus[0])
    );

    // Who and where; no network; none of the data dir, the admin socket or
    // the server's processes; no capabilities.
    let data = server.paths.root.display().to_string();
    let admin = server.paths.socket().display().to_string();
    let probe = format!(
        "id -un; pwd; echo $HOME; cat /proc/net/dev | grep -c ':'; ls {data}/db 2>&1 | grep -c 'No such'; \
         python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), timeout=2)' 2>&1 | grep -c Error; \
         test -e {admin} && echo admin-visible || echo admin-hidden; \
         ps -eo comm | grep -c '^rebench$'; grep -c '^CapEff:[[:space:]]*0*$' /proc/self/status"
    );
    let seen = server.exec(&id, &probe).await;
    let lines: Vec<&str> = seen.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "agent",
            "/home/agent",
            "/home/agent",
            "1",
            "1",
            "1",
            "admin-hidden",
            "0",
            "1"
        ],
        "{seen:?}"
    );

    // The shell, and the in-shell commands through the participant socket.
    let (screen, found) =
        shell_until(&server, &id, "echo in-$((6*7)); score\r", "normalized").await;
    assert!(found, "no score in the docker shell: {screen}");
    assert!(screen.contains("in-42"), "{screen}");

    // Scoring ran the solution in the container: a solution that knows.
    let ws = Path::new(&view.workspace);
    let solution = std::fs::read_to_string(ws.join("solution.py")).unwrap();
    std::fs::write(
        ws.join("solution.py"),
        format!("import os\nif not os.path.exists('/.dockerenv'):\n    raise SystemExit('not in the container')\n{solution}"),
    )
    .unwrap();
    let entry = server.score(&id).await;
    assert_eq!(entry["valid"], true, "{entry}");

    // Pause freezes everything in it, however started; resume thaws.
    server.exec(&id, LOOP).await;
    assert!(
        wait_until(Duration::from_secs(10), || ticks(ws) > 5),
        "the loop never ran"
    );

    // prefix-sum is `exclusive`: while its score is measured (the worker in
    // the container) the session's own processes are stopped, then go on.
    let scoring = {
        let mut admin = server.admin().await;
        let id = id.clone();
        tokio::spawn(async move {
            admin
                .call::<serde_json::Value>(rebench::protocol::Request::Score { session: id })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let during = ticks(ws);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !scoring.is_finished(),
        "the score ended before it could be watched"
    );
    assert_eq!(
        ticks(ws),
        during,
        "the session computed beside an exclusive score"
    );
    let entry = scoring.await.unwrap().unwrap();
    assert_eq!(entry["valid"], true, "{entry}");
    assert_eq!(entry["details"]["session_stopped"], true, "{entry}");
    assert!(
        wait_until(Duration::from_secs(10), || ticks(ws) > during + 5),
        "the session's processes stayed stopped after the score"
    );
    assert!(
        server
            .cli(&["pause", "--reason", "break", &id])
            .status
            .success()
    );
    let first = ticks(ws);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        ticks(ws),
        first,
        "a process computed while the session was paused"
    );
    assert!(server.cli(&["resume", &id]).status.success());
    assert!(
        wait_until(Duration::from_secs(10), || ticks(ws) > first),
        "resume did not thaw"
    );

    // Submitting stops the session's processes, takes the final score
    // (running the solution in the container) and leaves nothing.
    let out = server.cli(&["submit", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ended = server.show(&id).await;
    let last = ended
        .scores
        .unwrap_or_default()
        .pop()
        .expect("a final score");
    assert_eq!(
        (last.phase.as_str(), last.valid),
        ("final", Some(true)),
        "{last:?}"
    );
    assert!(
        wait_until(Duration::from_secs(20), || session_containers(&id)
            .is_empty()),
        "{:?}",
        session_containers(&id)
    );
    let last = ticks(ws);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ticks(ws), last, "a process outlived the session");
}

#[tokio::test]
async fn a_killed_server_finds_the_container_again() {
    let Some(mut server) = docker_server() else {
        return;
    };
    let id = running_session(&server).await;
    let ws = std::path::PathBuf::from(server.show(&id).await.workspace);
    server.exec(&id, LOOP).await;
    assert!(
        wait_until(Duration::from_secs(10), || ticks(&ws) > 5),
        "the loop never ran"
    );
    server.kill9();
    server.spawn();
    assert_eq!(
        server.show(&id).await.pause_reason,
        Some(PauseReason::CrashRecovery)
    );
    assert_eq!(session_containers(&id).len(), 1, "the container was kept");
    let first = ticks(&ws);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(ticks(&ws), first, "recovery pauses the container too");
    assert!(server.cli(&["resume", &id]).status.success());
    assert!(
        wait_until(Duration::from_secs(10), || ticks(&ws) > first),
        "the loop did not go on"
    );
    assert_eq!(server.exec(&id, "echo back").await.stdout.trim(), "back");
    // The in-shell commands reach the new server's socket.
    let (screen, found) = shell_until(&server, &id, "score\r", "normalized").await;
    assert!(
        found,
        "no score in the docker shell after a restart: {screen}"
    );
    assert!(server.cli(&["end", &id]).status.success());
    assert!(wait_until(Duration::from_secs(20), || session_containers(
        &id
    )
    .is_empty()));
}

#[tokio::test]
async fn an_engine_that_does_not_answer_is_named() {
    let server = TestServer::start_with_env(&[
        ("REBENCH_BACKEND", "local"),
        ("REBENCH_DOCKER_HOST", "unix:///nonexistent/docker.sock"),
    ]);
    let out = server.cli(&[
        "new",
        prefix_sum().to_str().unwrap(),
        "--participant",
        "p",
        "--sandbox",
        "docker",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unix:///nonexistent/docker.sock")
            && stderr.contains("is dockerd running?"),
        "{stderr}"
    );
}

/// Participant code a scoring run started in the container (detached)
/// does not outlive the run.
#[tokio::test]
async fn nothing_a_scoring_run_starts_in_the_container_outlives_it() {
    let Some(server) = docker_server() else {
        return;
    };
    let (_env_dir, env) = fixture_env(|t| t);
    let session = server.create_running(&env, Some(3600)).await;
    std::fs::write(
        env.join("score.sh"),
        r#"#!/bin/sh
python3 -c '
import json, os, subprocess
jail = json.loads(os.environ["REBENCH_JAIL"])
subprocess.run(jail + ["sh", "-c", "setsid sh -c \"while :; do echo x >> ticks; sleep 0.01; done\" >/dev/null 2>&1 < /dev/null &"])
'
sleep 0.5
echo '{"raw": 1.0}'
"#,
    )
    .unwrap();
    let ws = Path::new(&session.workspace).to_path_buf();
    let entry = server.score(&session.id).await;
    assert_eq!(entry["valid"], true, "{entry}");
    assert!(
        ticks(&ws) > 0,
        "the scorer's code never ran in the container"
    );
    std::thread::sleep(Duration::from_millis(300));
    let first = ticks(&ws);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(ticks(&ws), first, "a process outlived the scoring run");
    assert!(server.cli(&["end", &session.id]).status.success());
}

/// A container killed from outside pauses its session with the cause
/// (`technical_issue`) as soon as the engine says it died, instead of
/// spending budget; resuming starts it again, with the workspace as it was.
#[tokio::test]
async fn a_container_killed_from_outside_pauses_its_session() {
    let Some(server) = docker_server() else {
        return;
    };
    let id = running_session(&server).await;
    server.exec(&id, "echo kept > note.txt").await;
    let killed_at = std::time::Instant::now();
    let killed = std::process::Command::new("docker")
        .args(["kill", &format!("rebench-{id}")])
        .output()
        .unwrap();
    assert!(
        killed.status.success(),
        "{}",
        String::from_utf8_lossy(&killed.stderr)
    );
    let mut view = server.show(&id).await;
    for _ in 0..100 {
        if view.state == Phase::Paused {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        view = server.show(&id).await;
    }
    // The engine's events said so: the periodic check comes every 30 s.
    assert!(
        killed_at.elapsed() < Duration::from_secs(5),
        "the pause took {:?}",
        killed_at.elapsed()
    );
    assert_eq!(
        view.pause_reason,
        Some(PauseReason::TechnicalIssue),
        "{view:?}"
    );
    let note = server.cli(&["show", &id]);
    assert!(
        String::from_utf8_lossy(&note.stdout).contains("container on Docker host local stopped"),
        "{}",
        String::from_utf8_lossy(&note.stdout)
    );
    assert!(server.cli(&["resume", &id]).status.success());
    assert_eq!(server.exec(&id, "cat note.txt").await.stdout.trim(), "kept");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        server.show(&id).await.state,
        Phase::Running,
        "it paused again after resuming"
    );
    assert!(server.cli(&["end", &id]).status.success());
}

/// A participant cannot buy paused time with the engine's events: a
/// process of theirs killed for memory is an `oom` event for the container,
/// which wakes the session's check at once, but the container still runs,
/// so the session and its clock go on.
#[tokio::test]
async fn a_participant_killed_for_memory_does_not_pause_the_session() {
    let Some(server) = docker_server() else {
        return;
    };
    // The fixture grants 0.1 GB: one line that never ends outgrows it in tail.
    let (_dir, env) = fixture_env(|t| t);
    let session = server.create_running(&env, Some(3600)).await;
    let hog = server
        .exec(
            &session.id,
            "head -c 400000000 /dev/zero | tail > /dev/null",
        )
        .await;
    assert_ne!(hog.exit_code, Some(0), "{hog:?}");
    // Time for the event, the check and any pause it would make.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let view = server.show(&session.id).await;
    assert_eq!(view.state, Phase::Running, "{view:?}");
    assert_eq!(
        server.exec(&session.id, "echo on").await.stdout.trim(),
        "on"
    );
    assert!(server.cli(&["end", &session.id]).status.success());
}

/// `[sandbox]`: an environment may give its containers the engine's
/// network, and name an image the engine holds; one it lacks is named,
/// with the host, when a process would start.
#[tokio::test]
async fn an_environment_chooses_its_network_and_image() {
    let Some(server) = docker_server() else {
        return;
    };
    let base = base_image();
    let (_dir, bridged) =
        fixture_env(|t| format!("{t}\n[sandbox]\nnetwork = \"bridge\"\nimage = \"{base}\"\n"));
    let session = server.create_running(&bridged, Some(3600)).await;
    let seen = server.exec(&session.id, "grep -c ':' /proc/net/dev").await;
    assert_eq!(
        seen.stdout.trim(),
        "2",
        "lo and the bridge's interface: {seen:?}"
    );
    assert!(server.cli(&["end", &session.id]).status.success());

    let (_dir, missing) =
        fixture_env(|t| format!("{t}\n[sandbox]\nimage = \"rebench-missing:1\"\n"));
    let session = server.create_running(&missing, Some(3600)).await;
    let mut admin = server.admin().await;
    let refused = admin
        .call::<rebench::protocol::ExecReply>(rebench::protocol::Request::Exec {
            session: session.id.clone(),
            command: "true".into(),
            timeout_s: Some(10.0),
            cwd: None,
        })
        .await
        .expect_err("a session whose image is missing ran a command");
    let text = refused.to_string();
    assert!(
        text.contains("rebench-missing:1") && text.contains("Docker host local"),
        "{text}"
    );
}

/// `REBENCH_KEEP_CONTAINERS=1`: an ended session's container stays, with
/// nothing running in it, for an operator to inspect.
#[tokio::test]
async fn an_operator_may_keep_ended_containers() {
    if !docker_works("the docker backend tests") {
        return;
    }
    base_image();
    let server = TestServer::start_with_env(&[
        ("REBENCH_BACKEND", "docker"),
        ("REBENCH_KEEP_CONTAINERS", "1"),
    ]);
    let id = running_session(&server).await;
    server.exec(&id, LOOP).await;
    assert!(server.cli(&["end", &id]).status.success());
    let kept = session_containers(&id);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        kept[0].ends_with(" exited"),
        "nothing runs in a kept container: {kept:?}"
    );
    let removed = std::process::Command::new("docker")
        .args(["rm", "-f", &format!("rebench-{id}")])
        .output()
        .unwrap();
    assert!(removed.status.success());
}
