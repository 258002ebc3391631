//! Session lifecycle through the real server: budget exhaustion, pause
//! freezing every process, crash recovery after kill -9.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::time::Duration;

use common::*;
use rebench::protocol::{ExecReply, Push, Request, SessionView};
use rebench::session::ScorePhase;
use rebench::session::{EndReason, PauseReason, Phase};

fn read_pid(path: &std::path::Path) -> i32 {
    assert!(wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(path).is_ok_and(|s| !s.trim().is_empty())
    }));
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_three_second_budget_ends_with_a_final_score_and_no_surviving_process() {
    let (_env_dir, env) = fixture_env(|t| t);
    // Host pids of the jobs are read below: no jail.
    let server = TestServer::start_with_env(&[("REBENCH_BACKEND", "local")]);
    let session = server.create_running(&env, Some(3)).await;
    let ws = std::path::Path::new(&session.workspace);
    // Background work that tries hard to survive: nohup, setsid, plain &.
    let command = "nohup sleep 1000 >/dev/null 2>&1 & echo $! > a.pid; setsid sleep 1001 >/dev/null 2>&1 < /dev/null & echo $! > b.pid; (sleep 1002 & echo $! > c.pid) ; echo started";
    let reply = server.exec(&session.id, command).await;
    assert_eq!(reply.exit_code, Some(0), "{reply:?}");
    let pids: Vec<i32> = ["a.pid", "b.pid", "c.pid"]
        .iter()
        .map(|f| read_pid(&ws.join(f)))
        .collect();
    assert!(
        pids.iter().all(|&p| !process_gone(p)),
        "the jobs run at first"
    );
    std::fs::write(ws.join("value"), "2.5").unwrap();

    let ended = wait_until(Duration::from_secs(15), || {
        let out = server.cli(&["show", &session.id, "--json"]);
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .is_ok_and(|v| v["state"] == "ended")
    });
    assert!(ended, "the session ends when its budget runs out");
    let view = server.show(&session.id).await;
    assert_eq!(view.end_reason, Some(EndReason::BudgetExhausted));
    assert_eq!(view.active_s, 3.0, "the clock stops exactly at the budget");
    assert_eq!(view.remaining_s, 0.0);
    let scores = view.scores.unwrap();
    let last = scores.last().unwrap();
    assert_eq!(last.phase, ScorePhase::Final);
    assert_eq!(
        last.raw,
        Some(2.5),
        "the final score sees the last state of the workspace"
    );
    assert!(
        view.pauses.iter().any(|p| p.reason == PauseReason::Scoring),
        "the final score runs under a scoring pause"
    );
    assert!(
        wait_until(Duration::from_secs(5), || pids
            .iter()
            .all(|&p| process_gone(p))),
        "every session process is killed"
    );
}

#[tokio::test]
async fn pause_freezes_background_jobs_and_resume_thaws_them() {
    let (_env_dir, env) = fixture_env(|t| t);
    // Host pids of the job are read below: no jail.
    let server = TestServer::start_with_env(&[("REBENCH_BACKEND", "local")]);
    let session = server.create_running(&env, Some(3600)).await;
    let ws = std::path::Path::new(&session.workspace);
    let command = "setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > ticks; sleep 0.05; done' >/dev/null 2>&1 < /dev/null & echo $! > loop.pid";
    let reply = server.exec(&session.id, command).await;
    assert_eq!(reply.exit_code, Some(0));
    let pid = read_pid(&ws.join("loop.pid"));
    let ticks = || std::fs::read_to_string(ws.join("ticks")).unwrap_or_default();
    assert!(wait_until(Duration::from_secs(5), || !ticks().is_empty()));

    let out = server.cli(&["pause", &session.id, "--reason", "break", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(is_stopped(pid), "the job is stopped");
    let frozen = ticks();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(ticks(), frozen, "a frozen job makes no progress");
    let paused = server.show(&session.id).await;
    assert_eq!(paused.pause_reason, Some(PauseReason::Break));
    let active_at_pause = paused.active_s;
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(
        server.show(&session.id).await.active_s,
        active_at_pause,
        "the clock does not run while paused"
    );
    // Agents cannot run commands while paused.
    let refused = server
        .admin()
        .await
        .request(Request::Exec {
            session: session.id.clone(),
            command: "true".into(),
            timeout_s: None,
            cwd: None,
        })
        .await;
    assert!(refused.is_err());

    let out = server.cli(&["resume", &session.id]);
    assert!(out.status.success());
    assert!(
        wait_until(Duration::from_secs(5), || ticks() != frozen),
        "the job runs again after resume"
    );
    assert!(!is_stopped(pid));
    let out = server.cli(&["end", &session.id]);
    assert!(out.status.success());
    assert!(wait_until(Duration::from_secs(5), || process_gone(pid)));
}

#[tokio::test]
async fn kill_minus_nine_loses_no_acknowledged_event_and_at_most_seconds_of_clock() {
    let (_env_dir, env) = fixture_env(|t| t);
    let mut server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    for i in 0..20 {
        let _: SessionView = server
            .admin()
            .await
            .call(Request::Note {
                session: session.id.clone(),
                text: format!("note {i}"),
            })
            .await
            .unwrap();
    }
    std::fs::write(
        std::path::Path::new(&session.workspace).join("value"),
        "2.5",
    )
    .unwrap();
    let _: serde_json::Value = server
        .admin()
        .await
        .call(Request::Score {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    std::thread::sleep(Duration::from_millis(3500));
    let before = server.show(&session.id).await;
    server.kill9();
    std::thread::sleep(Duration::from_millis(500));
    server.spawn();

    let after = server.show(&session.id).await;
    assert_eq!(after.notes.len(), 20, "every acknowledged note survives");
    assert_eq!(
        after.score_count, before.score_count,
        "every acknowledged score survives"
    );
    assert_eq!(after.state, Phase::Paused);
    assert_eq!(after.pause_reason, Some(PauseReason::CrashRecovery));
    assert!(
        after.active_s <= before.active_s + 0.001,
        "no time is added: {} > {}",
        after.active_s,
        before.active_s
    );
    assert!(
        before.active_s - after.active_s < 5.0,
        "at most 5 s of clock lost: {} vs {}",
        after.active_s,
        before.active_s
    );
    // The clock stays stopped until someone resumes, then goes on from there.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(server.show(&session.id).await.active_s, after.active_s);
    let resumed: SessionView = server
        .admin()
        .await
        .call(Request::Resume {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(resumed.state, Phase::Running);
    assert!((resumed.active_s - after.active_s).abs() < 0.5);
}

#[tokio::test]
async fn a_graceful_shutdown_pauses_running_sessions_without_losing_time() {
    let (_env_dir, env) = fixture_env(|t| t);
    let mut server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    // A subscribed client (the workspace, the proctor) is told: its
    // session's pause and the notice, before the connection closes.
    let mut watcher = server.admin().await;
    watcher
        .request(Request::Subscribe { session: None })
        .await
        .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let out = server.cli(&["shutdown"]);
    assert!(out.status.success());
    // It returns once the server has let go of the data dir.
    assert!(
        !rebench::server::lock_held(&server.paths.lock_file()),
        "shutdown returned before the server stopped"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("stopped"),
        "{out:?}"
    );
    // A second one finds no server, and starts none.
    let again = server.cli(&["shutdown"]);
    assert!(again.status.success(), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("no server runs"),
        "{again:?}"
    );
    assert!(!rebench::server::lock_held(&server.paths.lock_file()));
    let mut paused = false;
    let mut told = None;
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(push) = watcher.next_push().await {
            match push {
                Push::SessionEvent { event, .. } => {
                    if let rebench::session::EventKind::Paused { reason, .. } = event.kind {
                        assert_eq!(reason, rebench::session::PauseReason::ServerShutdown);
                        paused = true;
                    }
                }
                Push::ServerShutdown { message } => told = Some(message),
                _ => {}
            }
        }
    })
    .await
    .expect("the connection closes");
    let told = told.expect("the shutdown notice");
    assert!(told.contains("shutting down"), "{told}");
    assert!(paused, "the session's pause is pushed too");
    if let Some(mut child) = server.child.take() {
        child.wait().unwrap();
    }
    server.spawn();
    let view = server.show(&session.id).await;
    // Not a crash: no CRASH alert for the proctor, nothing to exclude.
    assert_eq!(view.pause_reason, Some(PauseReason::ServerShutdown));
    assert!(
        view.active_s >= 1.2,
        "time up to the shutdown is kept: {}",
        view.active_s
    );
    // Nobody can fake one, and the participant may resume it.
    let mut admin = server.admin().await;
    let refused = admin
        .call::<SessionView>(Request::Pause {
            session: session.id.clone(),
            reason: rebench::session::PauseReason::ServerShutdown,
            note: None,
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        Some(rebench::protocol::ErrorCode::Forbidden)
    );
    let mut me = server.participant(&session.id).await;
    let resumed: SessionView = me
        .call(Request::Resume {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(resumed.state, Phase::Running);
}

#[tokio::test]
async fn budget_warnings_are_logged_once_each() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    // 301 s: the 5-minute warning is due after one second of active time.
    let session = server.create_running(&env, Some(301)).await;
    let warned = wait_until(Duration::from_secs(10), || {
        String::from_utf8_lossy(&server.cli(&["events", &session.id]).stdout)
            .contains("\"warning\"")
    });
    assert!(warned, "the 5-minute warning is logged");
    std::thread::sleep(Duration::from_millis(600));
    let events = String::from_utf8_lossy(&server.cli(&["events", &session.id]).stdout).to_string();
    let warnings: Vec<&str> = events
        .lines()
        .filter(|l| l.contains("\"warning\""))
        .collect();
    assert_eq!(warnings.len(), 1, "{events}");
    assert!(
        warnings[0].contains("\"threshold_s\":300"),
        "{}",
        warnings[0]
    );
    assert!(
        !events.contains("\"threshold_s\":900"),
        "no 15-minute warning on a 5-minute budget"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_agents_running_exec_loops_at_once_all_finish() {
    // Regression: concurrent sled flushes once left sessions waiting forever.
    let (_env_dir, env) = fixture_env(|t| t);
    let server = std::sync::Arc::new(TestServer::start());
    let mut sessions = Vec::new();
    for _ in 0..12 {
        sessions.push(server.create_running(&env, Some(3600)).await.id);
    }
    let mut loops = Vec::new();
    for id in sessions.clone() {
        let server = server.clone();
        loops.push(tokio::spawn(async move {
            let mut client = server.admin().await;
            for i in 0..15 {
                let reply: ExecReply = client
                    .call(Request::Exec {
                        session: id.clone(),
                        command: format!("echo {i}"),
                        timeout_s: Some(20.0),
                        cwd: None,
                    })
                    .await
                    .unwrap();
                assert_eq!(reply.stdout, format!("{i}\n"));
            }
        }));
    }
    let all = tokio::time::timeout(Duration::from_secs(120), futures_join(loops)).await;
    assert!(all.is_ok(), "every exec loop finished");
    for id in &sessions {
        let view = server.show(id).await;
        assert_eq!(view.state, Phase::Running);
    }
}

#[tokio::test]
async fn an_agents_commands_come_from_the_sessions_spawner_which_comes_back_if_killed() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    // Who started the command: its parent's pid and program.
    let parent = "echo $PPID; tr '\\0' ' ' < /proc/$PPID/cmdline";
    let spawned_by = |reply: &ExecReply| -> (String, String) {
        let mut lines = reply.stdout.lines();
        let pid = lines.next().unwrap_or_default().to_string();
        (pid, lines.next().unwrap_or_default().to_string())
    };
    let (first, program) = spawned_by(&server.exec(&session.id, parent).await);
    assert!(program.contains("rebench-enter --serve"), "{program:?}");
    let again = spawned_by(&server.exec(&session.id, parent).await);
    assert_eq!(again.0, first, "one spawner serves the session's commands");

    // A participant may kill it (it runs as they do): the command that did
    // (once the spawner had said it started) still returns, and the next
    // command gets a new spawner.
    let killed = server
        .exec(&session.id, "sleep 0.5; kill -9 $PPID; echo after")
        .await;
    assert_eq!(killed.stdout, "after\n");
    assert_eq!(killed.exit_code, None, "its exit is not known: {killed:?}");
    let (second, program) = spawned_by(&server.exec(&session.id, parent).await);
    assert!(program.contains("rebench-enter --serve"), "{program:?}");
    assert_ne!(second, first);
    let events: Vec<rebench::session::event::Event> = server
        .admin()
        .await
        .call(Request::Events {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    let execs = events
        .iter()
        .filter(|e| matches!(e.kind, rebench::session::event::EventKind::Exec(_)))
        .count();
    assert_eq!(execs, 4, "every command is in the log");
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<()>>) {
    for h in handles {
        h.await.unwrap();
    }
}

#[tokio::test]
async fn only_allowlisted_variables_reach_sessions_and_scorers_get_what_pass_env_grants() {
    // The scorer prints what it sees of the operator's variables as its message.
    let (_env_dir, env) = fixture_env(|t| {
        t.replace(
            "protected = [\"helper.py\"]",
            "protected = [\"helper.py\"]\npass_env = [\"REBENCH_JUDGE_KEY\"]",
        )
    });
    std::fs::write(
        env.join("score.sh"),
        "#!/bin/sh\necho \"{\\\"raw\\\": 1.0, \\\"message\\\": \\\"key=${REBENCH_JUDGE_KEY:-none} openai=${OPENAI_API_KEY:-none} setting=${OPERATOR_SETTING:-none}\\\"}\"\n",
    )
    .unwrap();
    let server = TestServer::start_with_env(&[
        ("REBENCH_JUDGE_KEY", "sk-operator-judge"),
        ("OPENAI_API_KEY", "sk-operator-openai"),
        ("HF_TOKEN", "hf-operator"),
        ("OPERATOR_SETTING", "dropped"),
        ("DATABASE_URL", "postgres://u:pw@db/x"),
        ("GITHUB_PAT", "ghp-operator"),
        ("REBENCH_BACKEND", "local"),
    ]);
    let session = server.create_running(&env, Some(3600)).await;
    assert_eq!(session.isolation, "none");
    let command = "echo \"judge=${REBENCH_JUDGE_KEY:-none} openai=${OPENAI_API_KEY:-none} hf=${HF_TOKEN:-none} setting=${OPERATOR_SETTING:-none} own=${REBENCH_SESSION:+set}\"; env | grep -c -e pw@ -e ghp-operator -e sk-operator";
    let seen = server.exec(&session.id, command).await;
    assert_eq!(
        seen.stdout.trim(),
        "judge=none openai=none hf=none setting=none own=set\n0",
        "{seen:?}"
    );
    let entry: serde_json::Value = server
        .admin()
        .await
        .call(Request::Score {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    assert!(
        entry
            .to_string()
            .contains("key=sk-operator-judge openai=none setting=none"),
        "the scorer gets the key its manifest grants, and nothing else: {entry}"
    );
}
