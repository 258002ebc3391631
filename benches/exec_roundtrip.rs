//! Exec round trip: `true` run through the runner (socket → server →
//! sandbox → bash -c → reply, event logged and flushed), through the CLI
//! (`rebench exec ID -- true`: a process start, the handshake, the same
//! call), and spawned directly (`sh -c true`), interleaved call by call so
//! that drift hits all three alike. Run with `cargo bench --bench
//! exec_roundtrip` (`RUNS`, default 200). Prints medians, p99s and the
//! ratios to direct spawning (min and median over rounds); no assertions.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::time::Instant;

use common::{ms, quantile};
use rebench::protocol::{ExecReply, Request};
use rebench::session::Kind;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runs = common::env_number("RUNS", 200) as usize;
    // `REBENCH_BACKEND=local|bwrap|docker` picks the sessions' sandbox.
    let backend = std::env::var("REBENCH_BACKEND").ok();
    let env: Vec<(&str, &str)> = backend
        .iter()
        .map(|b| ("REBENCH_BACKEND", b.as_str()))
        .collect();
    let mut bench = common::BenchServer::start("bench", &env).await?;
    let session = bench.running_session(Kind::Agent).await?;
    let data_dir = bench.data_dir();
    let client = &mut bench.admin;

    let (mut runner, mut cli, mut direct) = (Vec::new(), Vec::new(), Vec::new());
    let (mut runner_ratio, mut cli_ratio) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let started = Instant::now();
        let status = std::process::Command::new("sh")
            .args(["-c", "true"])
            .status()?;
        let plain = started.elapsed();
        assert!(status.success());

        let started = Instant::now();
        let reply: ExecReply = client
            .call(Request::Exec {
                session: session.id.clone(),
                command: "true".into(),
                timeout_s: None,
                cwd: None,
            })
            .await?;
        let through_runner = started.elapsed();
        assert_eq!(reply.exit_code, Some(0));

        let started = Instant::now();
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_rebench"))
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["exec", &session.id, "--", "true"])
            .status()?;
        let through_cli = started.elapsed();
        assert!(status.success());

        runner_ratio.push(through_runner.as_secs_f64() / plain.as_secs_f64());
        cli_ratio.push(through_cli.as_secs_f64() / plain.as_secs_f64());
        direct.push(plain);
        runner.push(through_runner);
        cli.push(through_cli);
    }
    println!(
        "exec `true` in a {} session, {runs} rounds (one of each per round):",
        session.sandbox
    );
    for (name, xs) in [
        ("spawned directly (sh -c)", &direct),
        ("through the runner (socket)", &runner),
        ("rebench exec (the CLI)", &cli),
    ] {
        println!(
            "  {name:<30} p50 {:>6.2} ms  p99 {:>6.2} ms",
            ms(quantile(xs, 0.5)),
            ms(quantile(xs, 0.99))
        );
    }
    let (runner_min, runner_median) = common::min_median(runner_ratio);
    let (cli_min, cli_median) = common::min_median(cli_ratio);
    println!(
        "  runner / direct: min {runner_min:.2}x  median {runner_median:.2}x;  CLI / direct: min {cli_min:.2}x  median {cli_median:.2}x"
    );
    bench.stop().await;
    Ok(())
}
