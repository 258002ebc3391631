//! `rebench report` over 10,000 generated runs with 10,000 bootstrap
//! resamples (target: under 2 s in release), repeated `ROUNDS` times
//! (default 5): each round's time, then the min and median and how many
//! rounds met the target. Run with `cargo bench --bench report`. Prints
//! timings; no assertions.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::time::Instant;

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rebench::environment::normalize::Aggregate;
use rebench::report::runs::{ScorePoint, UsageTotals};
use rebench::report::{Format, Kind, ReportOptions, Run, build_report, render};

const RUNS: usize = 10_000;
const RESAMPLES: usize = 10_000;
const ENVIRONMENTS: [&str; 7] = [
    "optimize-llm-foundry",
    "optimize-kernel",
    "fix-embedding",
    "scaling-law",
    "restricted-mlm",
    "gpt2-chat-rl",
    "rust-codecontests",
];
const H: f64 = 3600.0;

/// A run with a plausible score log: a few to a few dozen entries, drifting upwards.
fn generated_run(index: usize, rng: &mut StdRng) -> Run {
    let environment = ENVIRONMENTS[index % ENVIRONMENTS.len()];
    let kind = if index.is_multiple_of(3) {
        Kind::Human
    } else {
        Kind::Agent
    };
    let budget_s = match kind {
        Kind::Human => 8.0 * H,
        Kind::Agent => [0.5 * H, 2.0 * H, 8.0 * H][(index / 3) % 3],
    };
    let entries = rng.random_range(2..40);
    let mut scores = vec![ScorePoint {
        active_s: 0.0,
        normalized: Some(0.0),
        starting: true,
    }];
    let mut level: f64 = 0.0;
    for _ in 0..entries {
        level = (level + rng.random_range(-0.1..0.25)).max(0.0);
        let valid = rng.random_bool(0.9);
        scores.push(ScorePoint {
            active_s: rng.random_range(0.0..budget_s),
            normalized: valid.then_some(level),
            starting: false,
        });
    }
    scores.sort_by(|a, b| a.active_s.total_cmp(&b.active_s));
    let aggregate = if environment == "scaling-law" {
        Aggregate::Last
    } else {
        Aggregate::Best
    };
    let final_score = rebench::report::runs::aggregate_normalized(aggregate, &scores);
    let started_at =
        DateTime::<Utc>::from_timestamp(1_740_000_000 + index as i64 * 60, 0).unwrap_or_default();
    Run {
        id: format!("run-{index}"),
        environment: environment.to_string(),
        participant: format!("p{}", index % 500),
        kind,
        // Agents in three named groups, as a campaign of three agents makes.
        agent: (kind == Kind::Agent).then(|| format!("agent-{}", index % 3)),
        started_at,
        ended: true,
        budget_s,
        active_s: budget_s,
        visible: environment != "scaling-law",
        aggregate,
        scores,
        final_score,
        usage: UsageTotals {
            events: usize::from(kind == Kind::Agent),
            cost_usd: if kind == Kind::Agent { 15.0 } else { 0.0 },
            tokens_in: 1_000_000,
            tokens_out: 100_000,
        },
        unnormalized: false,
        hardware: None,
        extended_s: 0.0,
        version: String::new(),
    }
}

/// The settings' value from the environment, else `default`.
fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The smallest and the median of `xs`.
fn min_median(mut xs: Vec<f64>) -> (f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[0], xs[xs.len() / 2])
}

fn main() {
    let rounds = env_number("ROUNDS", 5).max(1);
    let mut rng = StdRng::seed_from_u64(1);
    let runs: Vec<Run> = (0..RUNS).map(|i| generated_run(i, &mut rng)).collect();
    let options = ReportOptions {
        seed: rebench::report::DEFAULT_SEED,
        resamples: RESAMPLES,
        budgets_s: vec![2.0 * H, 8.0 * H, 32.0 * H],
        human_rate_usd_per_hour: 100.0,
        human_run_length_s: rebench::report::best_of_k::HUMAN_RUN_CAP_S,
        estimator: rebench::report::Estimator::WithReplacement,
    };
    println!("report over {RUNS} runs, {RESAMPLES} resamples, {rounds} rounds:");
    let (mut analyses, mut totals) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let started = Instant::now();
        let report = build_report(&runs, &options);
        let analysis = started.elapsed();
        let mut sizes = Vec::new();
        for format in [Format::Table, Format::Json, Format::Csv, Format::Markdown] {
            sizes.push((format!("{format:?}"), render(&report, format).len()));
        }
        match rebench::report::plot::render_svg(&report) {
            Ok(svg) => sizes.push(("SVG".into(), svg.len())),
            Err(e) => println!("  plot SVG failed: {e}"),
        }
        let total = started.elapsed();
        println!(
            "  round {round}: {:.3} s in all ({:.3} s analysis and bootstrap; {})",
            total.as_secs_f64(),
            analysis.as_secs_f64(),
            sizes
                .iter()
                .map(|(name, bytes)| format!("{name} {bytes} B"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        analyses.push(analysis.as_secs_f64());
        totals.push(total.as_secs_f64());
    }
    let met = totals.iter().filter(|&&t| t < 2.0).count();
    let (total_min, total_median) = min_median(totals);
    let (analysis_min, analysis_median) = min_median(analyses);
    println!(
        "  in all: min {total_min:.3} s, median {total_median:.3} s \
         (analysis min {analysis_min:.3} s, median {analysis_median:.3} s); \
         under the 2 s target in {met} of {rounds} rounds"
    );
}
