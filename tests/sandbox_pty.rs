//! PtyShell against a real interactive shell.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::io::Read;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rebench::sandbox::pty::{PtyShell, ShellExit, ShellSpec};

const WAIT: Duration = Duration::from_secs(10);

fn bash_available() -> bool {
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join("bash").is_file()))
        .unwrap_or(false)
}

fn shell_spec(cwd: &Path) -> ShellSpec {
    let (program, args) = if bash_available() {
        ("bash", vec!["--norc", "--noprofile", "-i"])
    } else {
        eprintln!("note: bash not found, testing with `sh -i`");
        ("sh", vec!["-i"])
    };
    ShellSpec {
        program: program.to_string(),
        args: args.into_iter().map(String::from).collect(),
        cwd: cwd.to_path_buf(),
        env: vec![
            ("TERM".into(), "xterm-256color".into()),
            ("REBENCH_PTY_VAR".into(), "pty-value".into()),
        ],
        env_clear: false,
        cols: 80,
        rows: 24,
    }
}

/// Collects the terminal output on a thread, as the server does.
struct Output {
    chunks: mpsc::Receiver<Vec<u8>>,
    seen: Vec<u8>,
    eof: bool,
}

impl Output {
    fn start(mut reader: Box<dyn Read + Send>) -> Output {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Linux reports a hung-up pty as EIO rather than EOF.
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                if tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Output {
            chunks: rx,
            seen: Vec::new(),
            eof: false,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }

    /// Reads until `needle` appears; returns whether it did before the deadline.
    fn wait_for(&mut self, needle: &str) -> bool {
        let deadline = Instant::now() + WAIT;
        while !self.text().contains(needle) {
            if !self.pump(deadline) {
                return false;
            }
        }
        true
    }

    fn wait_eof(&mut self) -> bool {
        let deadline = Instant::now() + WAIT;
        while !self.eof {
            if !self.pump(deadline) && !self.eof {
                return false;
            }
        }
        true
    }

    /// Takes one chunk; false on deadline or EOF.
    fn pump(&mut self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.chunks.recv_timeout(left) {
            Ok(chunk) => {
                self.seen.extend_from_slice(&chunk);
                true
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.eof = true;
                false
            }
            Err(mpsc::RecvTimeoutError::Timeout) => false,
        }
    }
}

fn wait_exit(shell: &mut PtyShell) -> Option<ShellExit> {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if let Some(exit) = shell.try_wait() {
            return Some(exit);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn runs_commands_in_cwd_with_env_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    let (mut shell, reader) = PtyShell::spawn(&shell_spec(&cwd)).unwrap();
    assert!(shell.pid().is_some());
    let mut output = Output::start(reader);

    shell
        .write_input(b"echo hello-$REBENCH_PTY_VAR; pwd\r")
        .unwrap();
    assert!(output.wait_for("hello-pty-value"), "got: {}", output.text());
    assert!(
        output.wait_for(&cwd.display().to_string()),
        "got: {}",
        output.text()
    );
    assert_eq!(shell.try_wait(), None);

    shell.write_input(b"exit\r").unwrap();
    assert!(output.wait_eof(), "no EOF; got: {}", output.text());
    assert_eq!(
        wait_exit(&mut shell),
        Some(ShellExit {
            code: Some(0),
            signal: None
        })
    );
}

#[test]
fn resize_is_seen_by_stty() {
    let dir = tempfile::tempdir().unwrap();
    let (mut shell, reader) = PtyShell::spawn(&shell_spec(dir.path())).unwrap();
    let mut output = Output::start(reader);
    // Resize a shell that is up, as an attach does: a CI run once saw the
    // shell, still starting when the size changed, report the first size.
    shell.write_input(b"echo up-$((40+2))\r").unwrap();
    assert!(output.wait_for("up-42"), "got: {}", output.text());

    shell.resize(123, 45).unwrap();
    shell.write_input(b"stty size\r").unwrap();
    assert!(output.wait_for("45 123"), "got: {}", output.text());
    shell.kill();
    assert!(wait_exit(&mut shell).is_some());
}

#[test]
fn kill_ends_the_shell_and_its_foreground_job() {
    let dir = tempfile::tempdir().unwrap();
    let (mut shell, reader) = PtyShell::spawn(&shell_spec(dir.path())).unwrap();
    let mut output = Output::start(reader);

    shell
        .write_input(b"echo ready-$((40+2)); sleep 100\r")
        .unwrap();
    assert!(output.wait_for("ready-42"), "got: {}", output.text());
    shell.kill();
    let exit = wait_exit(&mut shell).expect("shell did not die");
    assert_eq!(exit.signal, Some(libc::SIGKILL));
    // The foreground sleep held the terminal too; EOF means it is gone.
    assert!(output.wait_eof(), "terminal still held open");
    // Killing again after exit is a harmless no-op.
    shell.kill();
}

#[test]
fn spawning_a_missing_program_fails() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = shell_spec(dir.path());
    spec.program = "/nonexistent/rebench-shell".into();
    assert!(PtyShell::spawn(&spec).is_err());
}

#[test]
fn missing_cwd_fails_instead_of_starting_elsewhere() {
    let spec = shell_spec(Path::new("/nonexistent/rebench/cwd"));
    assert!(PtyShell::spawn(&spec).is_err());
}
