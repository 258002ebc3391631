//! End to end: the real `rebench proctor` in a real terminal (tmux), driven
//! by keys and read back from the screen. Skipped without tmux.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{BIN, TestServer, fixture_env};
use rebench::protocol::Request;
use rebench::session::{Event, EventKind, PauseReason};

const WAIT: Duration = Duration::from_secs(20);

/// A private tmux server (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start() -> Option<Tmux> {
        let ok = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then(|| Tmux {
            socket: format!("rebench-proctor-{}", std::process::id()),
        })
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-t", "proctor"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "proctor"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success());
        // Separate keys: an Esc followed at once by a letter reads as Alt+letter.
        std::thread::sleep(Duration::from_millis(150));
    }

    fn text(&self, text: &str) {
        assert!(
            self.tmux(&["send-keys", "-t", "proctor", "-l", text])
                .status
                .success()
        );
        std::thread::sleep(Duration::from_millis(150));
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

#[tokio::test]
async fn the_dashboard_pauses_a_session_from_the_keyboard() {
    let Some(tmux) = Tmux::start() else {
        eprintln!("skipped: no tmux");
        return;
    };
    let server = TestServer::start();
    let (_env_dir, env) = fixture_env(|m| m);
    let view = server.create_running(&env, None).await;
    let command = format!(
        "{BIN} --data-dir {} proctor --name ana; echo PROCTOR-EXITED $?; sleep 60",
        server.paths.root.display()
    );
    let out = tmux.tmux(&[
        "new-session",
        "-d",
        "-s",
        "proctor",
        "-x",
        "160",
        "-y",
        "40",
        &command,
    ]);
    assert!(out.status.success(), "tmux: {out:?}");
    tmux.wait_for("the session's row", |s| {
        s.contains(&view.id) && s.contains("RUNNING") && s.contains("ana (proctor)")
    });

    tmux.keys(&["p"]);
    tmux.wait_for("the pause dialog", |s| s.contains("reason:"));
    tmux.text("fire alarm");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the paused row", |s| s.contains("PAUSED proctor"));

    tmux.keys(&["Enter"]);
    tmux.wait_for("the detail view", |s| {
        s.contains("read-only mirror") && s.contains("proctor by ana (proctor)")
    });
    tmux.keys(&["Escape"]);
    tmux.keys(&["q"]);
    tmux.wait_for("the dashboard to exit", |s| s.contains("PROCTOR-EXITED 0"));

    let events: Vec<Event> = server
        .admin()
        .await
        .call(Request::Events {
            session: view.id.clone(),
        })
        .await
        .expect("events");
    assert!(events.iter().any(|e| matches!(&e.kind,
        EventKind::Paused { reason: PauseReason::Proctor, by, note }
            if by == "ana (proctor)" && note.as_deref() == Some("fire alarm"))));
}
