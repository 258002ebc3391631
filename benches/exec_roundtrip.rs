//! Exec round-trip overhead: a command run through the runner (client →
//! socket → server → bash -c → reply, event logged and flushed) against the same
//! command spawned directly. Run with `cargo bench --bench exec_roundtrip`.
//! Reports medians; no assertion (speed targets live here, not in tests).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rebench::client::Client;
use rebench::protocol::{CreateSession, ExecReply, Request, SessionView};
use rebench::session::Kind;

const RUNS: usize = 200;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let root = std::env::temp_dir().join(format!("rebench-bench-{}", std::process::id()));
    let data = root.join("data");
    let env_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/envs/fixed");
    let mut server = Command::new(env!("CARGO_BIN_EXE_rebench"))
        .arg("serve")
        .arg("--data-dir")
        .arg(&data)
        .stdout(Stdio::null())
        .spawn()?;
    let socket = data.join("rebench.sock");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut client = loop {
        match Client::connect(&socket, None, "bench").await {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => return Err(e.into()),
        }
    };
    let session: SessionView = client
        .call(Request::CreateSession(CreateSession {
            env_dir: env_dir.display().to_string(),
            participant: "bench".into(),
            kind: Kind::Agent,
            budget_s: Some(3600),
            profile: None,
            allow_missing_hardware: true,
            no_input_recording: false,
            sandbox: None,
            task: None,
        }))
        .await?;
    let _: SessionView = client
        .call(Request::Begin {
            session: session.id.clone(),
        })
        .await?;

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

    let _ = client.request(Request::Shutdown).await;
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}
