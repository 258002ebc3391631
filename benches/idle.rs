//! Idle cost: many running sessions, each with a shell open, nobody typing,
//! against tmux with windows as idle, measured side by side over the same
//! seconds: CPU (share of one core), context switches per second and bytes
//! written per hour, from /proc. Run with `cargo bench --bench idle`
//! (`IDLE_SESSIONS`, default 50; `IDLE_SECS`, default 30). Prints numbers;
//! no assertions.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use rebench::protocol::{Request, ShellInfo};
use rebench::session::Kind;

/// What /proc says of a process and its threads.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    cpu_ticks: u64,
    switches: u64,
    written: u64,
}

fn usage(pid: u32) -> Usage {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the whole line (11 and 12 here).
    let cpu_ticks = field(11) + field(12);
    let mut switches = 0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
            for line in status.lines() {
                if line.contains("ctxt_switches") {
                    switches += line
                        .split_whitespace()
                        .last()
                        .and_then(|n| n.parse::<u64>().ok())
                        .unwrap_or(0);
                }
            }
        }
    }
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    let written = io
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    Usage {
        cpu_ticks,
        switches,
        written,
    }
}

fn report(name: &str, before: Usage, after: Usage, secs: f64) {
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let cpu = (after.cpu_ticks - before.cpu_ticks) as f64 / ticks_per_s / secs * 100.0;
    let switches = (after.switches - before.switches) as f64 / secs;
    let written = (after.written - before.written) as f64 / secs * 3600.0 / 1e6;
    println!(
        "  {name:<34} {cpu:>6.2}% of a core  {switches:>8.1} switches/s  {written:>8.1} MB/h written"
    );
}

fn tmux_server(windows: usize) -> Option<(String, u32)> {
    let socket = format!("rebench-idle-{}", std::process::id());
    let ok = Command::new("tmux")
        .args(["-L", &socket, "new-session", "-d", "-x", "120", "-y", "40"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return None;
    }
    for _ in 1..windows {
        let _ = Command::new("tmux")
            .args(["-L", &socket, "new-window", "-d"])
            .status();
    }
    let out = Command::new("tmux")
        .args(["-L", &socket, "display-message", "-p", "#{pid}"])
        .output()
        .ok()?;
    let pid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some((socket, pid))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sessions = common::env_number("IDLE_SESSIONS", 50);
    let secs = common::env_number("IDLE_SECS", 30);
    let mut bench = common::BenchServer::start("idle", &[]).await?;
    let started = Instant::now();
    for _ in 0..sessions {
        let session = bench.running_session(Kind::Human).await?;
        let _: ShellInfo = bench
            .admin
            .call(Request::ShellOpen {
                session: session.id.clone(),
                cols: 120,
                rows: 40,
            })
            .await?;
    }
    println!(
        "{sessions} running sessions with a shell each, made in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let tmux = tmux_server(20);
    if tmux.is_none() {
        println!("  (tmux is not installed: no anchor in this run)");
    }
    // Let start-up writes settle.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let server = bench.pid();
    let (server_before, tmux_before) = (usage(server), tmux.as_ref().map(|t| usage(t.1)));
    let measured = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let secs = measured.elapsed().as_secs_f64();
    println!("idle for {secs:.0} s:");
    report(
        &format!("rebench server, {sessions} sessions"),
        server_before,
        usage(server),
        secs,
    );
    if let (Some((socket, pid)), Some(before)) = (&tmux, tmux_before) {
        report("tmux server, 20 windows", before, usage(*pid), secs);
        let _ = Command::new("tmux")
            .args(["-L", socket, "kill-server"])
            .status();
    }
    bench.stop().await;
    Ok(())
}
