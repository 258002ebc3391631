//! Upgrades lose nothing (issue 12): `tests/fixtures/datadir-v1.tar.gz` is
//! a data dir made by the release before the store carried a schema version
//! (main at ad5f521), with a session in every state, notes, an extension,
//! scores (valid and invalid), an exec, a shell recording, and a server that
//! was killed with -9 while a session ran. This server must open it, keep
//! all of it, and be able to back it up while it runs.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use rebench::protocol::SessionView;
use rebench::session::Phase;

/// The fixture's sessions, by participant.
const CREATED: &str = "2n8vbd";
const RUNNING: &str = "2fuznp";
const PAUSED: &str = "fgzus5";
const SUBMITTED: &str = "tf58sv";
const ENDED: &str = "x7pfm5";
const EXHAUSTED: &str = "w23cpy";

fn unpack(into: &Path) {
    let archive = repo_root().join("tests/fixtures/datadir-v1.tar.gz");
    let ok = Command::new("tar")
        .arg("xzf")
        .arg(&archive)
        .arg("-C")
        .arg(into)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "could not unpack {}", archive.display());
}

async fn check_sessions(server: &TestServer) {
    let out = server.cli(&["sessions", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let views: Vec<SessionView> = serde_json::from_slice(&out.stdout).unwrap();
    let state = |id: &str| {
        let v = views
            .iter()
            .find(|v| v.id == id)
            .unwrap_or_else(|| panic!("{id} lost"));
        (
            v.state.to_string(),
            v.pause_reason.map(|r| r.to_string()).unwrap_or_default(),
            v.end_reason.map(|r| r.to_string()).unwrap_or_default(),
        )
    };
    assert_eq!(views.len(), 6);
    assert_eq!(state(CREATED).0, "created");
    // Running when the server was killed: paused for crash recovery.
    assert_eq!(state(RUNNING).1, "crash_recovery");
    assert_eq!(state(PAUSED).1, "break");
    assert_eq!(state(SUBMITTED).2, "submitted");
    assert_eq!(state(ENDED).2, "ended_by_proctor");
    assert_eq!(state(EXHAUSTED).2, "budget_exhausted");

    let riley = server.show(RUNNING).await;
    assert_eq!(riley.participant, "riley");
    // The fixture was made in another folder: its workspaces moved with it.
    assert_eq!(
        Path::new(&riley.workspace),
        server.paths.workspace(RUNNING),
        "{riley:?}"
    );
    assert_eq!(riley.notes[0].text, "first idea: vectorize");
    assert_eq!(riley.extensions.len(), 1);
    assert_eq!(riley.budget_s, 8.0 * 3600.0 + 1800.0);
    let scores = riley.scores.unwrap();
    assert_eq!(scores.len(), 2);
    assert_eq!(scores[1].raw, Some(3.5));
    let events = server.cli(&["events", RUNNING]);
    let events = String::from_utf8_lossy(&events.stdout);
    assert!(
        events.contains("\"command\":\"echo 3.5 > value; echo done\""),
        "{events}"
    );
    let cast = server.cli(&["export", RUNNING, "--format", "asciicast-v2"]);
    assert!(
        String::from_utf8_lossy(&cast.stdout).contains("hello-from-shell"),
        "the shell recording survived"
    );

    let sam = server.show(SUBMITTED).await;
    let best = sam.final_score.expect("a final score");
    assert!((best.normalized - 0.842).abs() < 0.001, "{best:?}");
    let eve = server.show(ENDED).await;
    assert_eq!(eve.scores.unwrap()[1].valid, Some(false));
}

#[tokio::test]
async fn a_data_dir_from_the_release_before_opens_with_everything_in_it() {
    let tmp = tempfile::tempdir().unwrap();
    unpack(tmp.path());
    let data = tmp.path().join("data");
    let server = TestServer::start_in(&data, &[("REBENCH_BACKEND", "local")]);
    check_sessions(&server).await;
    // Old sessions go on: the created one starts and runs commands.
    let out = server.cli(&["begin", CREATED]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply = server.exec(CREATED, "echo still-works").await;
    assert_eq!(reply.stdout.trim(), "still-works");

    // A consistent copy while the server runs, served by another server.
    let backup = tmp.path().join("backup");
    let out = server.cli(&["backup", backup.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refused = server.cli(&["backup", backup.to_str().unwrap()]);
    assert!(!refused.status.success(), "a backup never overwrites");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not empty"));
    drop(server);
    let copy = TestServer::start_in(&backup, &[("REBENCH_BACKEND", "local")]);
    let view = copy.show(CREATED).await;
    assert_eq!(
        view.state,
        Phase::Paused,
        "shut down while running: {view:?}"
    );
    assert_eq!(
        copy.show(RUNNING).await.notes[0].text,
        "first idea: vectorize"
    );
}
