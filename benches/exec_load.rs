//! Agent throughput: N sessions, each with its own connection running
//! `true` by exec in a loop, against N loops spawning `sh -c true`
//! directly and N loops spawning `bash -c true` (what exec runs), phase
//! after phase (sh, bash, rebench, sh, …) so that drift hits all. Run with `cargo bench --bench exec_load`
//! (`EXEC_SESSIONS`, default 50; `EXEC_SECS` per phase, default 10;
//! `ROUNDS`, default 2). Prints execs per second and p50/p99 latency, and
//! the ratios; no assertions.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::time::{Duration, Instant};

use rebench::client::Client;
use rebench::protocol::{ExecReply, Request};
use rebench::session::Kind;

struct Phase {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

fn summarize(mut latencies: Vec<Duration>, secs: f64) -> Phase {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    Phase {
        per_second: latencies.len() as f64 / secs,
        p50: at(0.5),
        p99: at(0.99),
    }
}

async fn direct_phase(shell: &'static str, loops: usize, secs: u64) -> Phase {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let tasks: Vec<_> = (0..loops)
        .map(|_| {
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let started = Instant::now();
                    let status = tokio::process::Command::new(shell)
                        .args(["-c", "true"])
                        .status()
                        .await
                        .unwrap();
                    assert!(status.success());
                    latencies.push(started.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    summarize(all, secs as f64)
}

async fn rebench_phase(clients: &mut Vec<(Client, String)>, secs: u64) -> Phase {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let tasks: Vec<_> = clients
        .drain(..)
        .map(|(mut client, session)| {
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let started = Instant::now();
                    let reply: ExecReply = client
                        .call(Request::Exec {
                            session: session.clone(),
                            command: "true".into(),
                            timeout_s: None,
                            cwd: None,
                        })
                        .await
                        .unwrap();
                    assert_eq!(reply.exit_code, Some(0));
                    latencies.push(started.elapsed());
                }
                (latencies, client, session)
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        let (latencies, client, session) = task.await.unwrap();
        all.extend(latencies);
        clients.push((client, session));
    }
    summarize(all, secs as f64)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sessions = common::env_number("EXEC_SESSIONS", 50) as usize;
    let secs = common::env_number("EXEC_SECS", 10);
    let rounds = common::env_number("ROUNDS", 2);
    let mut bench = common::BenchServer::start("execload", &[]).await?;
    let socket = bench.data_dir().join("rebench.sock");
    let mut clients = Vec::new();
    for _ in 0..sessions {
        let session = bench.running_session(Kind::Agent).await?.id;
        clients.push((Client::connect(&socket, None, "bench").await?, session));
    }
    println!("{sessions} loops of `true`, {secs} s per phase:");
    let (mut throughput, mut tail) = (Vec::new(), Vec::new());
    let (mut bash_throughput, mut bash_tail) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let direct = direct_phase("sh", sessions, secs).await;
        let bash = direct_phase("bash", sessions, secs).await;
        let through = rebench_phase(&mut clients, secs).await;
        for (name, phase) in [
            ("sh -c, directly", &direct),
            ("bash -c, directly", &bash),
            ("rebench exec", &through),
        ] {
            println!(
                "  round {round} {name:<18} {:>7.0} execs/s  p50 {:>6.1} ms  p99 {:>6.1} ms",
                phase.per_second,
                phase.p50.as_secs_f64() * 1e3,
                phase.p99.as_secs_f64() * 1e3
            );
        }
        throughput.push(through.per_second / direct.per_second);
        tail.push(through.p99.as_secs_f64() / direct.p99.as_secs_f64());
        bash_throughput.push(through.per_second / bash.per_second);
        bash_tail.push(through.p99.as_secs_f64() / bash.p99.as_secs_f64());
    }
    for (anchor, throughput, tail) in [
        ("sh -c", throughput, tail),
        ("bash -c", bash_throughput, bash_tail),
    ] {
        let (throughput_min, throughput_median) = common::min_median(throughput);
        let (tail_min, tail_median) = common::min_median(tail);
        println!(
            "  rebench / {anchor:<7}: throughput min {throughput_min:.2}x median {throughput_median:.2}x;  p99 min {tail_min:.2}x median {tail_median:.2}x"
        );
    }
    bench.stop().await;
    Ok(())
}
