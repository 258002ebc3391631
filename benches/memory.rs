//! Server memory under floods: resident size of the server after 100 MB of
//! output into one attached 200×50 shell, then after each of five more,
//! beside a tmux server given the same floods in a 200×50 pane, round by
//! round. Run with `cargo bench --bench memory` (`FLOOD_MB`, default 100;
//! `REPEATS`, default 5). Prints numbers; no assertions.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use rebench::protocol::{AttachMode, AttachReply, Request, ShellInfo};
use rebench::session::Kind;

/// Resident set size of a process, in MB.
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A training-log-like flood of about `mb` MB, then a marker line.
fn flood(mb: u64, marker: &str) -> String {
    let lines = mb * 1_000_000 / 64;
    format!(
        "awk 'BEGIN {{ srand(3); for (i = 1; i <= {lines}; i++) printf \"step %9d  loss %.4f  lr 3.0e-04  tokens/s %6d  gn %.3f\\n\", i, 2 + rand(), 50000 + int(rand() * 2000), rand() }}'; echo {marker}-$((40+2))"
    )
}

struct Tmux {
    socket: String,
    pid: u32,
}

impl Tmux {
    fn start() -> Option<Tmux> {
        let socket = format!("rebench-memory-{}", std::process::id());
        let ok = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "200",
                "-y",
                "50",
            ])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
        let out = Command::new("tmux")
            .args(["-L", &socket, "display-message", "-p", "#{pid}"])
            .output()
            .ok()?;
        let pid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
        Some(Tmux { socket, pid })
    }

    fn run(&self, command: &str, marker: &str) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", command, "Enter"])
            .status();
        let deadline = Instant::now() + Duration::from_secs(600);
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            let out = Command::new("tmux")
                .args(["-L", &self.socket, "capture-pane", "-p"])
                .output();
            if out
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&format!("{marker}-42")))
            {
                return;
            }
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mb = common::env_number("FLOOD_MB", 100);
    let repeats = common::env_number("REPEATS", 5);
    let mut bench = common::BenchServer::start("memory", &[]).await?;
    let session = bench.running_session(Kind::Human).await?.id;
    let server = bench.pid();
    let admin = &mut bench.admin;
    let info: ShellInfo = admin
        .call(Request::ShellOpen {
            session: session.clone(),
            cols: 200,
            rows: 50,
        })
        .await?;
    let _: AttachReply = admin
        .call(Request::ShellAttach {
            session: session.clone(),
            shell: info.shell,
            mode: AttachMode::Driver,
        })
        .await?;
    let tmux = Tmux::start();
    if tmux.is_none() {
        println!("(tmux is not installed: no anchor in this run)");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!("resident size, MB (floods of {mb} MB into one 200x50 shell):");
    println!("  {:<10} {:>10} {:>10}", "", "rebench", "tmux");
    let tmux_rss = |t: &Option<Tmux>| {
        t.as_ref()
            .map_or("-".to_string(), |t| format!("{:.1}", rss_mb(t.pid)))
    };
    println!(
        "  {:<10} {:>10.1} {:>10}",
        "start",
        rss_mb(server),
        tmux_rss(&tmux)
    );
    for round in 0..=repeats {
        let marker = format!("flooded{round}");
        let command = flood(mb, &marker);
        let run = common::run_in_shell(
            admin,
            &session,
            info.shell,
            &command,
            &format!("{marker}-42"),
        )
        .await?;
        if run.fell_behind > 0 {
            println!(
                "  (the bench's client fell behind {} times and attached again)",
                run.fell_behind
            );
        }
        if let Some(t) = &tmux {
            t.run(&command, &marker);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let label = if round == 0 {
            format!("{mb} MB")
        } else {
            format!("+{round}")
        };
        println!(
            "  {:<10} {:>10.1} {:>10}",
            label,
            rss_mb(server),
            tmux_rss(&tmux)
        );
    }
    bench.stop().await;
    Ok(())
}
