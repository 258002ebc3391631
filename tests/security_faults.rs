//! Faults an operator meets (issue 12): a full disk. The data dir lives on
//! a small tmpfs that the test fills and empties again.
//!
//! Needs root (to mount the tmpfs): elsewhere it prints "SKIPPED: ..." and
//! passes, unless `REBENCH_REQUIRE_FAULTS=1` (CI).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use rebench::protocol::Request;

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
        .find(|p| p.reason == "technical_issue")
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
