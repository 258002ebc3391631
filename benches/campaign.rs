//! Campaign overhead and scheduler throughput, through the real server,
//! binary and built-in scaffold against a stand-in model server on
//! 127.0.0.1 whose agent submits at once (so what is measured is rebench):
//! 1. per run, alone (concurrency 1): create -> clock started (the session
//!    made and its starting solution scored) and clock started -> the first
//!    model request (credentials, log, instructions, the prompt);
//! 2. 200 queued runs at concurrency 8: wall time and runs per second.
//!
//! `cargo bench --bench campaign`.

#![allow(clippy::unwrap_used)] // a benchmark may unwrap: a panic is a failure with its message

mod common;
#[allow(dead_code)] // the benchmark uses part of the tests' stand-in
#[path = "../tests/common/model_server.rs"]
mod model_server;

use std::path::Path;
use std::time::Instant;

use rebench::protocol::{Request, SessionView};
use rebench::session::{Event, EventKind};

const ALONE: u32 = 20;
const QUEUED: u32 = 200;
const LANES: u32 = 8;

fn campaign_file(
    dir: &Path,
    name: &str,
    url: &str,
    attempts: u32,
    concurrency: u32,
) -> std::path::PathBuf {
    let env = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/envs/fixed");
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "[campaign]\nname = \"{name}\"\nconcurrency = {concurrency}\n\n\
         [[agents]]\nname = \"quick\"\napi = \"openai\"\nbase_url = \"{url}\"\nmodel = \"quick\"\n\n\
         [[environments]]\nid = \"{}\"\n\n[runs]\nlengths = [\"10m\"]\nattempts = {attempts}\n",
        env.display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn run_campaign(data: &Path, file: &Path) -> f64 {
    let started = Instant::now();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_rebench"))
        .arg("--data-dir")
        .arg(data)
        .args(["campaign", "run"])
        .arg(file)
        .arg("--json")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the campaign failed: {status:?}");
    started.elapsed().as_secs_f64()
}

fn quantiles(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    format!(
        "min {:.1} / median {:.1} / p90 {:.1} ms",
        at(0.0),
        at(0.5),
        at(0.9)
    )
}

async fn phases(server: &mut common::BenchServer, campaign: &str) -> (Vec<f64>, Vec<f64>) {
    let sessions: Vec<SessionView> = server.admin.call(Request::ListSessions).await.unwrap();
    let (mut making, mut to_model) = (Vec::new(), Vec::new());
    for s in sessions
        .iter()
        .filter(|s| s.campaign.as_ref().is_some_and(|c| c.campaign == campaign))
    {
        let events: Vec<Event> = server
            .admin
            .call(Request::Events {
                session: s.id.clone(),
            })
            .await
            .unwrap();
        let created = events[0].at;
        let started = events
            .iter()
            .find(|e| matches!(e.kind, EventKind::Started { .. }))
            .unwrap()
            .at;
        let (call_at, latency_ms) = events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::ModelCall(c) => Some((e.at, c.latency_ms)),
                _ => None,
            })
            .unwrap();
        let ms = |d: chrono::TimeDelta| d.num_microseconds().unwrap_or(0) as f64 / 1000.0;
        making.push(ms(started - created));
        to_model.push(ms(call_at - started) - latency_ms as f64);
    }
    (making, to_model)
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut server = common::BenchServer::start("campaign", &[]).await?;
        let models = model_server::ModelServer::start(vec![(
            "quick",
            vec![("submit", serde_json::json!({}))],
        )]);
        let dir = tempfile::tempdir()?;
        let data = server.data_dir();

        let file = campaign_file(dir.path(), "alone", &models.base_url(), ALONE, 1);
        let wall = run_campaign(&data, &file);
        let (making, to_model) = phases(&mut server, "alone").await;
        println!("campaign overhead per run, {ALONE} runs one at a time ({wall:.1} s in all):");
        println!(
            "  create -> clock started (session made, starting score): {}",
            quantiles(making)
        );
        println!(
            "  clock started -> first model request:                   {}",
            quantiles(to_model)
        );

        let file = campaign_file(dir.path(), "queued", &models.base_url(), QUEUED, LANES);
        let wall = run_campaign(&data, &file);
        println!(
            "scheduler: {QUEUED} queued runs, {LANES} at a time: {wall:.1} s, {:.1} runs/s \
             (each: session made, starting score, one model call, final score)",
            QUEUED as f64 / wall
        );
        server.stop().await;
        anyhow::Ok(())
    })
}
