//! End to end: the real `rebench` binary's workspace in a real terminal
//! (tmux), driven by keys and read back from the screen.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rebench");
const WAIT: Duration = Duration::from_secs(20);

/// A private tmux server (its own socket), killed with everything on drop,
/// together with the rebench server of the data dir.
struct Tmux {
    socket: String,
    data_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// Runs `rebench <args>` in a new 140×45 tmux session named `name`.
    fn open(&self, name: &str, args: &str, config_home: &Path) {
        let command = format!(
            "env XDG_CONFIG_HOME={} {BIN} --data-dir {} {args}; echo WORKSPACE-EXITED $?; sleep 120",
            config_home.display(),
            self.data_dir.display()
        );
        let out = self.tmux(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "140",
            "-y",
            "45",
            &command,
        ]);
        assert!(out.status.success(), "tmux: {out:?}");
    }

    fn screen(&self, name: &str) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-t", name]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, name: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", name];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success());
    }

    /// Types text literally, then Enter.
    fn type_line(&self, name: &str, text: &str) {
        assert!(
            self.tmux(&["send-keys", "-t", name, "-l", text])
                .status
                .success()
        );
        self.keys(name, &["Enter"]);
    }

    /// Polls the screen until `ok` holds; fails with the last screen.
    fn wait_for(&self, name: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen(name);
            if ok(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; the screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_text(&self, name: &str, text: &str) -> String {
        self.wait_for(name, &format!("{text:?}"), |s| s.contains(text))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("shutdown")
            .output();
        let _ = self.tmux(&["kill-server"]);
    }
}

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The shell's own lines, without the side panel to their right.
fn pane_lines(screen: &str) -> Vec<String> {
    screen
        .lines()
        .map(|l| l.split('│').next().unwrap_or("").trim_end().to_string())
        .collect()
}

#[test]
fn start_type_score_tabs_detach_attach_submit() {
    if !tmux_available() {
        println!("SKIPPED: tmux not found");
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("rbtui")
        .tempdir_in("/tmp")
        .unwrap();
    let config_home = dir.path().join("config");
    std::fs::create_dir_all(&config_home).unwrap();
    let env = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("environments/prefix-sum");
    let t = Tmux {
        socket: format!("rbtui-{}", std::process::id()),
        data_dir: dir.path().join("data"),
        _dir: dir,
    };

    // The start screen, then Enter starts the clock.
    t.open(
        "w1",
        &format!(
            "start {} --participant tester --profile smoke",
            env.display()
        ),
        &config_home,
    );
    t.wait_text("w1", "to start the clock");
    t.keys("w1", &["Enter"]);
    t.wait_for("w1", "the running shell", |s| {
        s.contains("RUNNING") && s.contains("[rebench ")
    });

    // Typing reaches the shell and its output the pane.
    t.type_line("w1", "echo hello-tui");
    t.wait_for("w1", "the echo output", |s| {
        pane_lines(s).iter().any(|l| l == "hello-tui")
    });

    // A score taken inside the shell shows in the side panel.
    t.type_line("w1", "score");
    t.wait_text("w1", "2 scoring runs");

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
    let session = screen
        .lines()
        .find_map(|l| l.trim().strip_prefix("Come back with: "))
        .and_then(|cmd| cmd.split_whitespace().last())
        .expect("the reattach command")
        .to_string();

    // Attach again: both tabs, both screens restored.
    t.open("w2", &format!("attach {session}"), &config_home);
    t.wait_text("w2", "2:shell");
    t.wait_for("w2", "the first tab's screen", |s| {
        pane_lines(s).iter().any(|l| l == "hello-tui")
    });
    t.keys("w2", &["C-g"]);
    t.keys("w2", &["2"]);
    t.wait_for("w2", "the second tab's screen", |s| {
        pane_lines(s).iter().any(|l| l == "second-tab")
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
