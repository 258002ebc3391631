//! Faults an operator meets (issue 12): a full disk. The data dir lives on
//! a small tmpfs that the test fills and empties again.
//!
//! Needs root (to mount the tmpfs): elsewhere it prints "SKIPPED: ..." and
//! passes, unless `REBENCH_REQUIRE_FAULTS=1` (CI).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use rebench::protocol::Request;
use rebench::session::PauseReason;

/// A mounted tmpfs, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::Builder::new()
            .prefix("rbdisk")
            .tempdir_in("/tmp")
            .ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let text = "SKIPPED: fault tests need to mount a tmpfs (run as root)";
            if std::env::var_os("REBENCH_REQUIRE_FAULTS").is_some_and(|v| v == "1") {
                panic!("{text}");
            }
            eprintln!("\n{text}\n");
            return None;
        }
        Some(SmallDisk { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the disk with one file; returns its path.
    fn fill(&self) -> PathBuf {
        let filler = self.path().join("filler");
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=64k"])
            .arg(format!("of={}", filler.display()))
            .stderr(std::process::Stdio::null())
            .status();
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

#[tokio::test]
async fn a_full_disk_pauses_the_session_and_it_resumes_when_space_returns() {
    let Some(disk) = SmallDisk::mount("96m") else {
        return;
    };
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start_in(&disk.path().join("data"), &[]);
    let session = server.create_running(&env, Some(3600)).await;
    let mut admin = server.admin().await;
    let note = |text: &str| Request::Note {
        session: session.id.clone(),
        text: text.into(),
    };
    let _: serde_json::Value = admin.call(note("before")).await.unwrap();

    let filler = disk.fill();
    // The server notices within a flush (200 ms), releases its ballast so
    // that it can still record, and pauses the session on record.
    let paused = wait_until(Duration::from_secs(10), || {
        let out = server.cli(&["show", &session.id, "--json"]);
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .is_ok_and(|v| v["state"] == "paused" && v["pause_reason"] == "technical_issue")
    });
    if !paused {
        let log = std::fs::read_to_string(server.paths.log_file()).unwrap_or_default();
        panic!(
            "the session did not pause itself; log:\n{}",
            log.lines().rev().take(20).collect::<Vec<_>>().join("\n")
        );
    }
    let stopped_at = server.show(&session.id).await.active_s;
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        server.show(&session.id).await.active_s,
        stopped_at,
        "the clock does not run while the disk is full"
    );
    // Events can still be recorded in the room the ballast left.
    let _: serde_json::Value = admin.call(note("while full")).await.unwrap();

    std::fs::remove_file(&filler).unwrap();
    let resumed = wait_until(Duration::from_secs(15), || {
        let out = server.cli(&["show", &session.id, "--json"]);
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .is_ok_and(|v| v["state"] == "running")
    });
    assert!(resumed, "the session resumes once there is room");
    // No hole, no sequence collision: recording goes on.
    let _: serde_json::Value = admin.call(note("after")).await.unwrap();
    let view = server.show(&session.id).await;
    let texts: Vec<&str> = view.notes.iter().map(|n| n.text.as_str()).collect();
    assert_eq!(texts, ["before", "while full", "after"]);
    let pause = view
        .pauses
        .iter()
        .find(|p| p.reason == PauseReason::TechnicalIssue)
        .unwrap();
    assert!(
        pause
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("almost full"),
        "{pause:?}"
    );
    assert!(
        view.active_s < stopped_at + 1.0,
        "{} vs {stopped_at}",
        view.active_s
    );
}

#[tokio::test]
async fn descriptor_exhaustion_by_a_participant_leaves_the_operator_and_scorer_working() {
    let (_env_dir, env) = fixture_env(|t| t);
    // 600 descriptors: after the reserve of 512, participants get a few dozen.
    let server = TestServer::start_with_nofile(600, &[("REBENCH_BACKEND", "local")]);
    let session = server.create_running(&env, Some(3600)).await;
    let creds = server.credentials(&session.id).await;
    // Idle connections that never say hello, far more than the server allows.
    let mut idle = Vec::new();
    let mut refused = 0;
    for _ in 0..400 {
        match std::os::unix::net::UnixStream::connect(&creds.socket) {
            Ok(stream) => idle.push(stream),
            Err(_) => refused += 1,
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    // The operator still gets in, and a score is taken and valid.
    let entry: serde_json::Value = tokio::time::timeout(Duration::from_secs(20), async {
        server
            .admin()
            .await
            .call(Request::Score {
                session: session.id.clone(),
            })
            .await
            .unwrap()
    })
    .await
    .expect("the admin socket answers");
    assert_eq!(
        entry["valid"], true,
        "{entry} ({refused} refused at connect)"
    );
    let exec = server.exec(&session.id, "echo fine").await;
    assert_eq!(exec.stdout.trim(), "fine");
    // Past the cap, connections are told why.
    use std::io::{BufRead, BufReader};
    let last = idle.last().unwrap().try_clone().unwrap();
    last.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut line = String::new();
    let _ = BufReader::new(last).read_line(&mut line);
    assert!(line.contains("connections open"), "{line:?}");
    drop(idle);
    let view = server.show(&session.id).await;
    assert!(
        view.scores.unwrap().iter().all(|s| s.valid != Some(false)),
        "no infrastructure failure was recorded as an invalid score"
    );
}

#[tokio::test]
async fn a_scoring_run_cut_by_kill_minus_nine_leaves_nothing_behind() {
    let (_env_dir, env) = fixture_env(|t| t.replace("timeout = \"2s\"", "timeout = \"60s\""));
    // With a `hang` file in the workspace the scorer starts a detached
    // process and takes its time.
    std::fs::write(
        env.join("score.sh"),
        "#!/bin/sh\n\
         if [ -e \"$REBENCH_WORKSPACE/hang\" ]; then\n\
         \x20 setsid sh -c 'while :; do echo x >> \"$REBENCH_WORKSPACE/orphan-ticks\"; sleep 0.02; done' >/dev/null 2>&1 < /dev/null &\n\
         \x20 sleep 30\n\
         fi\n\
         echo '{\"raw\": 1.0}'\n",
    )
    .unwrap();
    let mut server = TestServer::start_with_env(&[("REBENCH_BACKEND", "local")]);
    let session = server.create_running(&env, Some(3600)).await;
    let ws = std::path::PathBuf::from(&session.workspace);
    std::fs::write(ws.join("hang"), "").unwrap();
    // Sent, not awaited: the reply never comes (the server dies first).
    let mut admin = server.admin().await;
    admin
        .send(Request::Score {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    let ticks = || std::fs::metadata(ws.join("orphan-ticks")).map_or(0, |m| m.len());
    assert!(
        wait_until(Duration::from_secs(10), || ticks() > 0),
        "the scorer ran"
    );
    server.kill9();
    drop(admin);
    // Still running with no server...
    let at_kill = ticks();
    assert!(
        wait_until(Duration::from_secs(5), || ticks() > at_kill),
        "the orphan kept running after the server died"
    );
    // The orphan outlives the dead server only until the server is back.
    server.spawn();
    let _ = server.show(&session.id).await;
    std::thread::sleep(Duration::from_millis(300));
    let before = ticks();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        ticks(),
        before,
        "the scoring run's leftovers were killed at recovery"
    );
}

#[tokio::test]
async fn a_deleted_workspace_pauses_the_session_instead_of_spending_its_budget() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start_with_env(&[("REBENCH_BACKEND", "local")]);
    let session = server.create_running(&env, Some(3600)).await;
    std::fs::remove_dir_all(&session.workspace).unwrap();
    // The next command fails, with a reason, and wakes the session's timer.
    let refused = server
        .admin()
        .await
        .request(Request::Exec {
            session: session.id.clone(),
            command: "true".into(),
            timeout_s: Some(5.0),
            cwd: None,
        })
        .await;
    assert!(refused.is_err());
    let paused = wait_until(Duration::from_secs(10), || {
        let out = server.cli(&["show", &session.id, "--json"]);
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .is_ok_and(|v| v["pause_reason"] == "technical_issue")
    });
    assert!(paused, "the session paused itself");
    let view = server.show(&session.id).await;
    let note = view.pauses.last().unwrap().note.clone().unwrap_or_default();
    assert!(
        note.contains("workspace") && note.contains("gone"),
        "{note}"
    );
}

/// A participant's job that left its shell (`setsid`, `nohup`, closed
/// descriptors) while the session was paused does not come back to life
/// when a killed server restarts: recovery kills it rather than thawing it.
#[tokio::test]
async fn a_detached_job_of_a_paused_session_is_gone_after_a_crash_and_restart() {
    let (_env_dir, env) = fixture_env(|t| t);
    let mut server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let ws = PathBuf::from(&session.workspace);
    let started = server
        .exec(
            &session.id,
            "setsid nohup sh -c 'while :; do echo x >> ticks; sleep 0.05; done' >/dev/null 2>&1 </dev/null & echo started",
        )
        .await;
    assert_eq!(started.stdout.trim(), "started", "{started:?}");
    let ticks = || std::fs::metadata(ws.join("ticks")).map_or(0, |m| m.len());
    assert!(
        wait_until(Duration::from_secs(10), || ticks() > 0),
        "the job runs"
    );
    let mut admin = server.admin().await;
    let _: rebench::protocol::SessionView = admin
        .call(Request::Pause {
            session: session.id.clone(),
            reason: PauseReason::Break,
            note: None,
        })
        .await
        .unwrap();
    drop(admin);
    server.kill9();
    server.spawn();
    let _ = server.show(&session.id).await;
    // Resumed, the session runs again; the job does not.
    assert!(server.cli(&["resume", &session.id]).status.success());
    std::thread::sleep(Duration::from_millis(300));
    let before = ticks();
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        ticks(),
        before,
        "the detached job came back after the restart"
    );
}
