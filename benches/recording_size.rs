//! Recording cost on a shell flood: bytes the store grows by per byte of
//! shell output, and how much longer the flood takes through a recorded
//! session shell than run directly. Run with `cargo bench --bench recording_size`.
//! Prints numbers; no assertions.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rebench::protocol::{
    AttachMode, AttachReply, Push, Request, ShellInfo, b64_decode, b64_encode,
};
use rebench::session::Kind;

/// Output of the flood: ~20 MB of a training-log-like text (numbers change on
/// every line, as in a real log).
const FLOOD: &str = "awk 'BEGIN { srand(7); for (i = 1; i <= 250000; i++) printf \"step %d  loss %.4f  lr 3.0e-04  tokens/s %d  grad_norm %.3f\\n\", i, 2 + rand(), 50000 + int(rand() * 2000), rand() }'";
const DONE: &str = "flood-done";

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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
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
    let before = dir_size(&data.join("db"));

    let command = format!("{FLOOD}; echo {DONE}-$((1+1))\r");
    let started = Instant::now();
    admin
        .send(Request::ShellInput {
            session: session.clone(),
            shell: info.shell,
            data: b64_encode(command.as_bytes()),
        })
        .await?;
    let mut output_bytes = 0u64;
    let mut tail = String::new();
    let needle = format!("{DONE}-2");
    loop {
        if let Push::ShellOutput { data, .. } = admin.next_push().await? {
            let bytes = b64_decode(&data).map_err(anyhow::Error::msg)?;
            output_bytes += bytes.len() as u64;
            tail.push_str(&String::from_utf8_lossy(&bytes));
            if tail.contains(&needle) {
                break;
            }
            let keep = tail.len().saturating_sub(64);
            tail = tail[keep..].to_string();
        }
    }
    let through_runner = started.elapsed();
    tokio::time::sleep(Duration::from_millis(1500)).await; // past the recording flush
    let after = dir_size(&data.join("db"));

    let started = Instant::now();
    let status = Command::new("bash")
        .args(["-c", &format!("{FLOOD} > /dev/null")])
        .status()?;
    let direct = started.elapsed();
    assert!(status.success());

    let grown = after.saturating_sub(before);
    println!(
        "shell flood of {:.1} MB of output:",
        output_bytes as f64 / 1e6
    );
    println!(
        "  store grew by       {:>8.1} MB ({:.2} bytes stored per byte of output)",
        grown as f64 / 1e6,
        grown as f64 / output_bytes.max(1) as f64
    );
    println!(
        "  through the runner  {:>8.2} s (PTY, vt100 screen, recording, streaming to one client)",
        through_runner.as_secs_f64()
    );
    println!(
        "  run directly        {:>8.2} s (output to /dev/null)",
        direct.as_secs_f64()
    );

    bench.stop().await;
    Ok(())
}
