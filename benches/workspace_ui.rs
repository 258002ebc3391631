//! The workspace UI as an expert meets it, beside tmux and a bare PTY, each
//! in a 200×50 terminal driven through a real PTY (this benchmark is the
//! terminal): the time from a keystroke to its echo coming back, the time
//! a command's short output (`seq 1 1000`) takes to show, and the time
//! `seq 1 2000000` takes to finish on screen. Targets interleave round by
//! round so that the machine's drift hits them alike; ratios are taken
//! within a round. Run with `cargo bench --bench workspace_ui`; settings
//! `UI_ROUNDS` (default 5), `UI_KEYS` (keys per target and round, default
//! 60), `UI_BURST` (the short `seq` count, default 1000), `UI_FLOOD` (the
//! long one, default 2000000). It prints, and asserts nothing.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::io::{Read, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use common::{min_median, ms, quantile};
use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use rebench::session::Kind;

const COLS: u16 = 200;
const ROWS: u16 = 50;
/// Echoed letters: none of them ends or sits inside an escape sequence.
const KEYS: &[u8] = b"zxvwyjk";
const WAIT: Duration = Duration::from_secs(60);
/// Letters in a command's end marker.
const MARKER_LEN: usize = 12;

/// A program in a PTY of its own, its output read on a thread.
struct Term {
    name: &'static str,
    _master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    output: Receiver<Vec<u8>>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    /// The end of what was read, so a needle split across reads is found.
    tail: Vec<u8>,
    /// Commands run so far: each gets a marker of its own, because a UI
    /// redraws old lines (and their markers) as the screen scrolls.
    runs: usize,
}

impl Term {
    fn spawn(name: &'static str, argv: &[&str]) -> Term {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut command = CommandBuilder::new(argv[0]);
        command.args(&argv[1..]);
        command.env("TERM", "xterm-256color");
        command.env("PS1", "$ ");
        let child = pair.slave.spawn_command(command).unwrap();
        let mut reader = pair.master.try_clone_reader().unwrap();
        let (tx, output) = channel();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Term {
            name,
            writer: pair.master.take_writer().unwrap(),
            _master: pair.master,
            output,
            child,
            tail: Vec::new(),
            runs: 0,
        }
    }

    fn type_bytes(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.flush().unwrap();
    }

    /// Reads until `needle` shows; what came before is dropped.
    fn wait_for(&mut self, needle: &[u8]) {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(at) = find(&self.tail, needle) {
                self.tail.drain(..at + needle.len());
                return;
            }
            let keep = self.tail.len().saturating_sub(needle.len());
            self.tail.drain(..keep);
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(chunk) => self.tail.extend_from_slice(&chunk),
                Err(RecvTimeoutError::Timeout) => panic!(
                    "{}: no {:?} within {WAIT:?}; last output {:?}",
                    self.name,
                    String::from_utf8_lossy(needle),
                    String::from_utf8_lossy(&self.tail)
                ),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("{}: the program left", self.name)
                }
            }
        }
    }

    /// Lets output stop for `quiet`, dropping it.
    fn settle(&mut self, quiet: Duration) {
        while self.output.recv_timeout(quiet).is_ok() {}
        self.tail.clear();
    }

    /// Runs `command` at the prompt; returns once its marker line shows.
    /// The marker is printed with `printf` escapes, so the typed line
    /// itself never holds it. A UI that redraws only the cells that
    /// changed writes none of a marker's letters that stand where the same
    /// letter stood before, so each run's marker is one letter repeated,
    /// and the letter differs from the last run's.
    fn run(&mut self, command: &str) -> Duration {
        self.settle(Duration::from_millis(300));
        self.runs += 1;
        let letter = b'A' + (self.runs % 26) as u8;
        let escapes = format!("\\x{letter:02x}").repeat(MARKER_LEN);
        let line = format!("{command}; printf '{escapes}\\n'\r");
        let start = Instant::now();
        self.type_bytes(line.as_bytes());
        self.wait_for(&[letter; MARKER_LEN]);
        start.elapsed()
    }

    fn key_echo(&mut self, byte: u8) -> Duration {
        let start = Instant::now();
        self.type_bytes(&[byte]);
        self.wait_for(&[byte]);
        start.elapsed()
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// Output times (seconds, one list per target: bare PTY, tmux, workspace)
/// printed in `unit` (seconds times `scale`), with the ratios round by round.
fn print_output_times(what: &str, names: &[&str], times: &[Vec<f64>], scale: f64, unit: &str) {
    println!("{what} until its end shows on screen, {unit}:");
    for (name, xs) in names.iter().zip(times) {
        let (min, med) = min_median(xs.clone());
        println!(
            "  {name:>18}: min {:.2}, median {:.2}",
            min * scale,
            med * scale
        );
    }
    let ratio = |of: usize, against: usize| {
        min_median(
            times[of]
                .iter()
                .zip(&times[against])
                .map(|(a, b)| a / b)
                .collect(),
        )
    };
    for (of, against) in [(1, 0), (2, 0), (2, 1)] {
        let (min, med) = ratio(of, against);
        println!(
            "  {:>18} / {}: min {min:.2}x, median {med:.2}x",
            names[of], names[against]
        );
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rounds = common::env_number("UI_ROUNDS", 5) as usize;
    let keys = common::env_number("UI_KEYS", 60) as usize;
    let burst = common::env_number("UI_BURST", 1000);
    let flood = common::env_number("UI_FLOOD", 2_000_000);

    let mut bench = common::BenchServer::start("ui", &[("REBENCH_BACKEND", "local")]).await?;
    let id = bench.running_session(Kind::Human).await?.id;
    let data_dir = bench.data_dir().display().to_string();
    let tmux_socket = format!("rebench-ui-bench-{}", std::process::id());
    let config = tempfile::tempdir()?;

    let bash = ["bash", "--norc", "--noprofile"];
    let mut raw = Term::spawn("bare PTY", &bash);
    let mut tmux = Term::spawn(
        "tmux",
        &[
            "tmux",
            "-L",
            &tmux_socket,
            "-f",
            "/dev/null",
            "new-session",
            "bash",
            "--norc",
            "--noprofile",
        ],
    );
    let mut workspace = {
        // A config folder of its own: no saved layout or key settings.
        let xdg = format!("XDG_CONFIG_HOME={}", config.path().display());
        Term::spawn(
            "rebench workspace",
            &[
                "env",
                &xdg,
                env!("CARGO_BIN_EXE_rebench"),
                "--data-dir",
                &data_dir,
                "attach",
                &id,
            ],
        )
    };
    let mut terms = [&mut raw, &mut tmux, &mut workspace];
    for term in terms.iter_mut() {
        term.run("true");
    }

    // Output first, at the prompt: short, then floods.
    let mut burst_s = vec![Vec::new(); terms.len()];
    for _ in 0..rounds {
        for (i, term) in terms.iter_mut().enumerate() {
            burst_s[i].push(term.run(&format!("seq 1 {burst}")).as_secs_f64());
        }
    }
    let mut flood_s = vec![Vec::new(); terms.len()];
    for _ in 0..rounds.min(3) {
        for (i, term) in terms.iter_mut().enumerate() {
            flood_s[i].push(term.run(&format!("seq 1 {flood}")).as_secs_f64());
        }
    }

    // Then keys, echoed by the terminal driver to a `cat`.
    for term in terms.iter_mut() {
        term.type_bytes(b"cat\r");
        term.settle(Duration::from_millis(500));
    }
    let mut echo: Vec<Vec<Vec<Duration>>> = vec![Vec::new(); terms.len()];
    for round in 0..rounds {
        for (i, term) in terms.iter_mut().enumerate() {
            let mut times = Vec::with_capacity(keys);
            for k in 0..keys {
                times.push(term.key_echo(KEYS[(round + k) % KEYS.len()]));
                // A typist's pace, not a flood of keys.
                std::thread::sleep(Duration::from_millis(15 + (k % 5) as u64 * 7));
                if k % 50 == 49 {
                    term.type_bytes(b"\r");
                    term.settle(Duration::from_millis(100));
                }
            }
            echo[i].push(times);
        }
    }

    println!("terminal {COLS}x{ROWS}, {rounds} rounds, local backend");
    let names: Vec<&str> = terms.iter().map(|t| t.name).collect();
    print_output_times(&format!("seq 1 {burst}"), &names, &burst_s, 1e3, "ms");
    print_output_times(&format!("seq 1 {flood}"), &names, &flood_s, 1.0, "s");
    println!("key echo, ms ({keys} keys a round):");
    for (i, term) in terms.iter().enumerate() {
        let all: Vec<Duration> = echo[i].iter().flatten().copied().collect();
        println!(
            "  {:>18}: p50 {:.2}, p99 {:.2}",
            term.name,
            ms(quantile(&all, 0.5)),
            ms(quantile(&all, 0.99))
        );
    }
    for p in [0.5, 0.99] {
        let ratios = echo[2]
            .iter()
            .zip(&echo[1])
            .map(|(w, t)| ms(quantile(w, p)) / ms(quantile(t, p)))
            .collect();
        let (min, med) = min_median(ratios);
        println!(
            "  workspace / tmux, p{}: min {min:.2}x, median {med:.2}x",
            (p * 100.0) as u32
        );
    }

    drop(workspace);
    drop(tmux);
    drop(raw);
    let _ = std::process::Command::new("tmux")
        .args(["-L", &tmux_socket, "kill-server"])
        .status();
    bench.stop().await;
    Ok(())
}
