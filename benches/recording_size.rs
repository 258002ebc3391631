//! Recording cost: bytes the store (database and recording files) grows by
//! per byte of shell output, for a flood and for a log line every 0.1 s
//! (beside the asciicast v2 of the same output), and how much longer the
//! flood takes through a recorded session shell than drained from a bare
//! PTY, interleaved over rounds. Run with `cargo bench --bench recording_size`
//! (`LOG_SECS`, default 20; `ROUNDS`, default 3). Prints numbers; no assertions.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use rebench::protocol::{AttachMode, AttachReply, Request, ShellInfo};
use rebench::session::Kind;

/// Output of the flood: ~20 MB of a training-log-like text (numbers change on
/// every line, as in a real log).
const FLOOD: &str = "awk 'BEGIN { srand(7); for (i = 1; i <= 250000; i++) printf \"step %d  loss %.4f  lr 3.0e-04  tokens/s %d  grad_norm %.3f\\n\", i, 2 + rand(), 50000 + int(rand() * 2000), rand() }'";
const DONE: &str = "flood-done";
/// A log line every 0.1 s (the interval's worth of lines is `LOG_SECS` × 10).
const LOG_LINE: &str = "for i in $(seq 1 LINES); do echo \"$(date +%T.%N) step $i loss 0.$RANDOM lr 3e-4\"; sleep 0.1; done";

fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn store_size(data: &Path) -> u64 {
    dir_size(&data.join("db")) + dir_size(&data.join("recordings"))
}

/// The flood drained from a bare PTY of the same size: the anchor.
fn raw_pty_drain() -> Duration {
    use std::io::Read;
    let spec = rebench::sandbox::pty::ShellSpec {
        program: "bash".into(),
        args: vec!["-c".into(), FLOOD.into()],
        cwd: std::env::temp_dir(),
        env: Vec::new(),
        env_clear: false,
        cols: 120,
        rows: 40,
    };
    let started = Instant::now();
    let (_shell, mut reader) = rebench::sandbox::pty::PtyShell::spawn(&spec).unwrap();
    let mut buf = vec![0u8; 16 * 1024];
    while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
    started.elapsed()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rounds = common::env_number("ROUNDS", 3);
    let log_secs = common::env_number("LOG_SECS", 20);
    let mut bench = common::BenchServer::start("recbench", &[]).await?;
    let session = bench.running_session(Kind::Human).await?.id;
    let data = bench.data_dir();
    let admin = &mut bench.admin;
    let info: ShellInfo = admin
        .call(Request::ShellOpen {
            session: session.clone(),
            cols: 120,
            rows: 40,
        })
        .await?;
    let _: AttachReply = admin
        .call(Request::ShellAttach {
            session: session.clone(),
            shell: info.shell,
            mode: AttachMode::Driver,
        })
        .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // A log line every 0.1 s.
    let before = store_size(&data);
    let recordings_before = dir_size(&data.join("recordings"));
    let lines = log_secs * 10;
    let command = format!(
        "{}; echo log-done-$((1+1))",
        LOG_LINE.replace("LINES", &lines.to_string())
    );
    let run = common::run_in_shell(admin, &session, info.shell, &command, "log-done-2").await?;
    let (printed, asciicast) = (run.bytes, run.asciicast);
    tokio::time::sleep(Duration::from_millis(1500)).await; // past the recording flush
    let grown = store_size(&data).saturating_sub(before);
    let recorded = dir_size(&data.join("recordings")).saturating_sub(recordings_before);
    println!("a log line every 0.1 s for {log_secs} s ({printed} bytes printed):");
    println!(
        "  store grew by       {:>8.1} kB ({:.2} bytes stored per byte printed; the recording file {:.2})",
        grown as f64 / 1e3,
        grown as f64 / printed.max(1) as f64,
        recorded as f64 / printed.max(1) as f64
    );
    println!(
        "  asciicast v2 of it  {:>8.1} kB ({:.2} bytes per byte printed)",
        asciicast as f64 / 1e3,
        asciicast as f64 / printed.max(1) as f64
    );

    // Floods, interleaved with the bare PTY.
    let mut ratios = Vec::new();
    let mut printed = 0;
    let mut grown = 0;
    for round in 0..rounds {
        let before = store_size(&data);
        let needle = format!("{DONE}-{}", round + 2);
        let command = format!("{FLOOD}; echo {DONE}-$((1+{}))", round + 1);
        let run = common::run_in_shell(admin, &session, info.shell, &command, &needle).await?;
        let (through_runner, bytes) = (run.elapsed, run.bytes);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        grown += store_size(&data).saturating_sub(before);
        printed += bytes;
        let raw = raw_pty_drain();
        ratios.push(through_runner.as_secs_f64() / raw.as_secs_f64());
        println!(
            "  flood round {}: through the runner {:.2} s, bare PTY {:.2} s",
            round + 1,
            through_runner.as_secs_f64(),
            raw.as_secs_f64()
        );
    }
    let (ratio_min, ratio_median) = common::min_median(ratios);
    println!(
        "shell flood ({:.1} MB per round, {rounds} rounds):",
        printed as f64 / 1e6 / rounds as f64
    );
    println!(
        "  store grew by       {:>8.1} MB ({:.3} bytes stored per byte of output)",
        grown as f64 / 1e6,
        grown as f64 / printed.max(1) as f64
    );
    println!(
        "  runner / bare PTY   min {ratio_min:.2}x  median {ratio_median:.2}x (PTY, vt100 screen, recording, streaming to one client)"
    );

    bench.stop().await;
    Ok(())
}
