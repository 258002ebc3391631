//! Seek latency in a long recording: a generated 8-hour, ~100 MB shell
//! recording, keyframed as the player does, then seeks to random moments.
//! Run with `cargo bench --bench replay_seek`. Target: under 50 ms per seek.
//! Prints measurements; no assertions (speed targets live here, not in tests).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rebench::recording::keyframes::{KeyframePolicy, Keyframes, TrackScreen};
use rebench::recording::timeline::{TermEvent, TermKind, Track};

const HOURS: u64 = 8;
const TARGET_BYTES: usize = 100 * 1024 * 1024;
const SEEKS: usize = 300;

/// Shell-like output: coloured log lines, prompts, progress bars redrawn
/// in place, full-screen redraws and the odd alternate-screen editor.
fn generate(rng: &mut impl Rng) -> Track {
    let mut track = Track::new(Some(0), "shell 0", 120, 40);
    let duration_ms = HOURS * 3_600_000;
    let mut bytes = 0;
    let mut chunks = Vec::new();
    while bytes < TARGET_BYTES {
        let chunk: Vec<u8> = match rng.random_range(0..100) {
            0..=59 => {
                let mut c = Vec::new();
                for _ in 0..rng.random_range(1..6) {
                    let n = rng.random_range(10..110);
                    let colour = rng.random_range(31..38);
                    c.extend_from_slice(
                        format!("\x1b[{colour}m{:>6}\x1b[0m ", bytes % 999_999).as_bytes(),
                    );
                    c.extend(
                        (0..n).map(|i| b"abcdefghij klmnopqrstuvwxyz 0123456789"[(i * 7 + n) % 38]),
                    );
                    c.extend_from_slice(b"\r\n");
                }
                c
            }
            60..=79 => format!(
                "\r\x1b[Kepoch {} [{}{}] {:.3}",
                rng.random_range(0..100),
                "#".repeat(rng.random_range(0..40)),
                " ".repeat(10),
                rng.random::<f64>()
            )
            .into_bytes(),
            80..=89 => "\x1b[1;32mtess@box\x1b[0m:\x1b[1;34m~/solution\x1b[0m$ "
                .as_bytes()
                .to_vec(),
            90..=96 => {
                let mut c = b"\x1b[H\x1b[2J".to_vec();
                for row in 1..=40 {
                    c.extend_from_slice(
                        format!(
                            "\x1b[{row};1H\x1b[7m{row:>3}\x1b[0m ünïcödé → {}",
                            "=".repeat(row * 2)
                        )
                        .as_bytes(),
                    );
                }
                c
            }
            _ => {
                let mut c = b"\x1b[?1049h\x1b[H".to_vec();
                c.extend_from_slice(&b"~\r\n".repeat(38));
                c.extend_from_slice(b"\x1b[40;1H-- INSERT --\x1b[?1049l");
                c
            }
        };
        bytes += chunk.len();
        chunks.push(chunk);
    }
    let step = duration_ms as f64 / chunks.len() as f64;
    track.events = chunks
        .into_iter()
        .enumerate()
        .map(|(i, data)| TermEvent {
            t: (i as f64 * step) as u64,
            kind: TermKind::Output(data),
        })
        .collect();
    track
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let start = Instant::now();
    let track = generate(&mut rng);
    println!(
        "generated {} events, {:.1} MB over {} h in {:.2?}",
        track.events.len(),
        track.output_bytes() as f64 / 1e6,
        HOURS,
        start.elapsed()
    );

    let policy = KeyframePolicy::default();
    let start = Instant::now();
    let keys = Keyframes::build(&track, policy);
    println!(
        "keyframes: {} (every {} KiB or {} events) built in {:.2?}",
        keys.len(),
        policy.every_bytes / 1024,
        policy.every_events,
        start.elapsed()
    );

    let mut screen = TrackScreen::new(&track);
    let end = track.end();
    let mut times = Vec::with_capacity(SEEKS);
    for _ in 0..SEEKS {
        let t = rng.random_range(0..=end);
        let start = Instant::now();
        screen.seek_time(&track, &keys, t);
        times.push(start.elapsed());
    }
    times.sort();
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    println!(
        "{SEEKS} random seeks: min {:.2?}  median {:.2?}  mean {:.2?}  p90 {:.2?}  p99 {:.2?}  max {:.2?}",
        times[0],
        percentile(&times, 0.5),
        mean,
        percentile(&times, 0.9),
        percentile(&times, 0.99),
        times[times.len() - 1]
    );
    let over = times
        .iter()
        .filter(|d| **d > Duration::from_millis(50))
        .count();
    println!("seeks over the 50 ms target: {over} of {SEEKS}");
}
