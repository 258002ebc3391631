//! Exec round-trip overhead: a command run through the runner (client →
//! socket → server → bash -c → reply, event logged and flushed) against the same
//! command spawned directly. Run with `cargo bench --bench exec_roundtrip`.
//! Reports medians; no assertion (speed targets live here, not in tests).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::time::{Duration, Instant};

use rebench::protocol::{ExecReply, Request};
use rebench::session::Kind;

const RUNS: usize = 200;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut bench = common::BenchServer::start("bench", &[]).await?;
    let session = bench.running_session(Kind::Agent).await?;
    let client = &mut bench.admin;

    let mut through_runner = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let reply: ExecReply = client
            .call(Request::Exec {
                session: session.id.clone(),
                command: "true".into(),
                timeout_s: None,
                cwd: None,
            })
            .await?;
        through_runner.push(started.elapsed());
        assert_eq!(reply.exit_code, Some(0));
    }
    let mut direct = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let status = tokio::process::Command::new("bash")
            .args(["-c", "true"])
            .status()
            .await?;
        direct.push(started.elapsed());
        assert!(status.success());
    }
    let (runner, plain) = (median(through_runner), median(direct));
    println!("exec `true`, median of {RUNS}:");
    println!(
        "  through the runner  {:>8.2} ms",
        runner.as_secs_f64() * 1e3
    );
    println!(
        "  spawned directly    {:>8.2} ms",
        plain.as_secs_f64() * 1e3
    );
    println!(
        "  overhead            {:>8.2} ms per exec",
        (runner.as_secs_f64() - plain.as_secs_f64()) * 1e3
    );

    bench.stop().await;
    Ok(())
}
