//! A private tmux server driving the real `rebench` binary's terminal UIs,
//! read back from the screen (`send-keys`, `capture-pane`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::BIN;

const WAIT: Duration = Duration::from_secs(20);

/// A private tmux server (its own socket), killed with everything on drop,
/// together with the rebench server of the data dir.
pub struct Tmux {
    pub socket: String,
    pub data_dir: PathBuf,
    pub _dir: tempfile::TempDir,
}

impl Tmux {
    pub fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// Runs `rebench <args>` in a new 140×45 tmux session named `name`.
    pub fn open(&self, name: &str, args: &str, config_home: &Path) {
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

    pub fn screen(&self, name: &str) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-t", name]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn keys(&self, name: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", name];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success());
    }

    /// Types text literally, then Enter.
    pub fn type_line(&self, name: &str, text: &str) {
        assert!(
            self.tmux(&["send-keys", "-t", name, "-l", text])
                .status
                .success()
        );
        self.keys(name, &["Enter"]);
    }

    /// Polls the screen until `ok` holds; fails with the last screen.
    pub fn wait_for(&self, name: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
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

    pub fn wait_text(&self, name: &str, text: &str) -> String {
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

/// Whether tmux runs here. Without it, the test that needs it is skipped,
/// loudly on the real stderr; under CI (`CI` set) that is a failure.
pub fn tmux_or_skip(what: &str) -> bool {
    if tmux_available() {
        return true;
    }
    let text = format!("SKIPPED: {what} did not run: tmux not found");
    assert!(std::env::var_os("CI").is_none(), "{text}");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n{text}\n");
    false
}

pub fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The shell's own lines, without the side panel to their right.
pub fn pane_lines(screen: &str) -> Vec<String> {
    screen
        .lines()
        .map(|l| l.split('│').next().unwrap_or("").trim_end().to_string())
        .collect()
}
