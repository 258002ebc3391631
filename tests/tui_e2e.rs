//! End to end: the real `rebench` binary's workspace in a real terminal
//! (tmux), driven by keys and read back from the screen.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::path::PathBuf;

use common::tmux::{Tmux, pane_lines, tmux_or_skip};

/// A tmux server of its own (named `prefix`-pid), a fresh data dir and an
/// empty config folder.
fn harness(prefix: &str) -> (Tmux, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("rbtui")
        .tempdir_in("/tmp")
        .unwrap();
    let config_home = dir.path().join("config");
    std::fs::create_dir_all(&config_home).unwrap();
    let t = Tmux {
        socket: format!("{prefix}-{}", std::process::id()),
        data_dir: dir.path().join("data"),
        _dir: dir,
    };
    (t, config_home)
}

/// `rebench <args>` (a `start`) in tmux session `name`; Enter on the start
/// screen, then waits for the running shell.
fn start_running(t: &Tmux, name: &str, args: &str, config_home: &std::path::Path) {
    t.open(name, args, config_home);
    t.wait_text(name, "to start the clock");
    t.keys(name, &["Enter"]);
    t.wait_for(name, "the running shell", |s| {
        s.contains("RUNNING") && s.contains("[rebench ")
    });
}

#[test]
fn start_type_score_tabs_detach_attach_submit() {
    if !tmux_or_skip("the workspace end-to-end test") {
        return;
    }
    let (t, config_home) = harness("rbtui");
    let env = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("environments/prefix-sum");

    // The start screen, then Enter starts the clock.
    start_running(
        &t,
        "w1",
        &format!(
            "start {} --participant tester --profile smoke",
            env.display()
        ),
        &config_home,
    );

    // Typing reaches the shell and its output the pane.
    t.type_line("w1", "echo hello-tui");
    t.wait_for("w1", "the echo output", |s| {
        pane_lines(s).iter().any(|l| l == "hello-tui")
    });

    // A score taken inside the shell shows in the side panel.
    t.type_line("w1", "score");
    t.wait_text("w1", "1 scoring run");

    // A second tab.
    t.keys("w1", &["C-g"]);
    t.keys("w1", &["c"]);
    t.wait_text("w1", "2:shell");
    t.wait_for("w1", "the second prompt", |s| {
        pane_lines(s)
            .iter()
            .filter(|l| l.starts_with("[rebench "))
            .count()
            == 1
    });
    t.type_line("w1", "echo second-tab");
    t.wait_for("w1", "the second tab's output", |s| {
        pane_lines(s).iter().any(|l| l == "second-tab")
    });

    // Detach: the session goes on; the message says how to come back.
    t.keys("w1", &["C-g"]);
    t.keys("w1", &["d"]);
    let screen = t.wait_text("w1", "WORKSPACE-EXITED 0");
    assert!(screen.contains("Detached from session"), "{screen}");
    let again: Vec<&str> = screen
        .lines()
        .find_map(|l| l.trim().strip_prefix("Come back with: "))
        .expect("the reattach command")
        .split_whitespace()
        .collect();
    // `rebench` is not on this PATH: the hint names the binary itself.
    assert_eq!(
        std::fs::canonicalize(again[0]).ok(),
        std::fs::canonicalize(common::BIN).ok(),
        "{screen}"
    );
    assert_eq!(again[1..3], ["--data-dir", t.data_dir.to_str().unwrap()]);
    assert_eq!(again[3], "attach");
    let session = again[4].to_string();

    // Attach again: both tabs, both screens restored, and the one last typed
    // into (the second) is shown first.
    t.open("w2", &format!("attach {session}"), &config_home);
    t.wait_text("w2", "2:shell");
    t.wait_for("w2", "the second tab's screen, shown first", |s| {
        pane_lines(s).iter().any(|l| l == "second-tab")
    });
    t.keys("w2", &["C-g"]);
    t.keys("w2", &["1"]);
    t.wait_for("w2", "the first tab's screen", |s| {
        pane_lines(s).iter().any(|l| l == "hello-tui")
    });

    // Submit, confirm, and the summary.
    t.keys("w2", &["C-g"]);
    t.keys("w2", &["S"]);
    t.wait_text("w2", "Submit and end the session now?");
    t.keys("w2", &["y"]);
    let summary = t.wait_for("w2", "the summary", |s| {
        s.contains("Session ended") && s.contains("Final score") && s.contains("normalized")
    });
    assert!(summary.contains("Scoring runs"), "{summary}");
    t.keys("w2", &["q"]);
    t.wait_text("w2", "WORKSPACE-EXITED 0");
}

#[test]
fn a_workspace_whose_terminal_hangs_up_exits() {
    if !tmux_or_skip("the workspace hang-up test") {
        return;
    }
    let (t, config_home) = harness("rbhup");
    let env = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/envs/fixed");
    start_running(
        &t,
        "w",
        &format!("start {} --participant tester", env.display()),
        &config_home,
    );
    exits_on_hang_up(&t, "w", "start");
    let shutdown = std::process::Command::new(common::BIN)
        .arg("--data-dir")
        .arg(&t.data_dir)
        .arg("shutdown")
        .output()
        .unwrap();
    assert!(shutdown.status.success(), "{shutdown:?}");
}

#[test]
fn a_replay_whose_terminal_hangs_up_exits() {
    if !tmux_or_skip("the replay hang-up test") {
        return;
    }
    let (t, config_home) = harness("rbhupr");
    let cast = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sessions/prefix-sum-human.cast");
    t.open("r", &format!("replay {}", cast.display()), &config_home);
    t.wait_text("r", "prefix");
    exits_on_hang_up(&t, "r", "replay");
}

/// Closes the tmux session `name` (its terminal goes away, as with a
/// dropped ssh connection) and waits for `rebench … <command>` to exit.
fn exits_on_hang_up(t: &Tmux, name: &str, command: &str) {
    // The program and the shell command around it (not zombies).
    let pattern = format!("--data-dir {} {command}", t.data_dir.display());
    let running = || {
        let pgrep = std::process::Command::new("pgrep")
            .args(["-r", "R,S,D,T", "-f", "--", &pattern])
            .output()
            .unwrap();
        String::from_utf8_lossy(&pgrep.stdout).trim().to_string()
    };
    assert!(!running().is_empty(), "no {command} process found");
    assert!(t.tmux(&["kill-session", "-t", name]).status.success());
    let hung_up = std::time::Instant::now();
    loop {
        let left = running();
        if left.is_empty() {
            break;
        }
        assert!(
            hung_up.elapsed().as_secs() < 10,
            "{command} outlived its terminal: pids {left}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn the_workspace_waits_out_a_server_shutdown_and_comes_back_paused() {
    if !tmux_or_skip("the workspace reconnect test") {
        return;
    }
    let (t, config_home) = harness("rbrec");
    let env = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/envs/fixed");
    let cli = |args: &[&str]| {
        std::process::Command::new(common::BIN)
            .arg("--data-dir")
            .arg(&t.data_dir)
            .args(args)
            .output()
            .unwrap()
    };
    start_running(
        &t,
        "w",
        &format!("start {} --participant tester", env.display()),
        &config_home,
    );

    // An orderly stop: the workspace stays, says what it means, and waits.
    assert!(cli(&["shutdown"]).status.success());
    let waiting = t.wait_text("w", "Reconnecting to session");
    assert!(waiting.contains("the server was shut down"), "{waiting}");
    assert!(waiting.contains("server_shutdown"), "{waiting}");
    assert!(!waiting.contains("WORKSPACE-EXITED"), "{waiting}");

    // Once the old server is gone, the operator starts it again (any command
    // does): the workspace is back, on the paused session, with a new shell.
    let socket = t.data_dir.join("rebench.sock");
    let gone = std::time::Instant::now();
    while socket.exists() {
        assert!(gone.elapsed().as_secs() < 20, "the server did not stop");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(cli(&["sessions"]).status.success());
    // The participant may resume it (and gets a new shell).
    t.wait_for("w", "the reconnected workspace", |s| {
        s.contains("PAUSED (server shutdown)") && s.contains("p to resume")
    });
    t.keys("w", &["C-g"]);
    t.keys("w", &["p"]);
    t.wait_for("w", "the resumed shell", |s| {
        s.contains("RUNNING") && s.contains("[rebench ")
    });
    t.type_line("w", "echo back-again");
    t.wait_for("w", "the echo", |s| {
        pane_lines(s).iter().any(|l| l == "back-again")
    });
    t.keys("w", &["C-g"]);
    t.keys("w", &["d"]);
    t.wait_text("w", "WORKSPACE-EXITED 0");
}

#[test]
fn the_proctor_waits_out_a_server_shutdown_and_reconnects() {
    if !tmux_or_skip("the proctor reconnect test") {
        return;
    }
    let (t, config_home) = harness("rbprec");
    let env = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/envs/fixed");
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(common::BIN)
            .arg("--data-dir")
            .arg(&t.data_dir)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "rebench {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let id = cli(&["new", &env.display().to_string(), "--participant", "tester"]);
    t.open("p", "proctor --name ana", &config_home);
    t.wait_for("p", "the session's row", |s| {
        s.contains(&id) && s.contains("ana (proctor)")
    });

    // An orderly stop: the dashboard stays, says so, and keeps the last view.
    cli(&["shutdown"]);
    let waiting = t.wait_text("p", "SERVER SHUT DOWN");
    assert!(waiting.contains("reconnecting: next try in"), "{waiting}");
    assert!(waiting.contains(&id), "{waiting}");
    assert!(!waiting.contains("WORKSPACE-EXITED"), "{waiting}");
    // An action meanwhile is refused out loud, not lost in silence.
    t.keys("p", &["n"]);
    t.wait_text("p", "Proctor note");
    t.type_line("p", "are you there?");
    t.wait_text("p", "not sent: the server is away");

    // The operator starts the server again: the dashboard is back by itself.
    let socket = t.data_dir.join("rebench.sock");
    let gone = std::time::Instant::now();
    while socket.exists() {
        assert!(gone.elapsed().as_secs() < 20, "the server did not stop");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    cli(&["sessions"]);
    let back = t.wait_text("p", "reconnected to the server");
    assert!(back.contains(&id), "{back}");
    assert!(!back.contains("SERVER SHUT DOWN"), "{back}");
    t.keys("p", &["q"]);
    t.wait_text("p", "WORKSPACE-EXITED 0");
}
