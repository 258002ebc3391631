//! `rebench report`: the expert baseline and the agent comparison, RE-Bench
//! style, over the server's store or over `jsonl` export files.
//!
//! Pipeline: `runs` (load and filter) -> `analysis` (group, `bootstrap`,
//! `timeline`, `best_of_k`, `stats`) -> `model::Report` -> `format`/`csv`
//! (stdout) and `plot` (SVG). Definitions and field names: docs/report.md.

pub mod analysis;
pub mod best_of_k;
pub mod bootstrap;
pub mod csv;
pub mod format;
pub mod model;
pub mod plot;
pub mod runs;
pub mod stats;
pub mod timeline;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};

use crate::environment::duration::parse_duration;
use crate::paths::DataPaths;

pub use crate::session::Kind;
pub use analysis::{Estimator, ReportOptions, build_report};
pub use format::{Format, render};
pub use model::Report;
pub use runs::{Run, RunFilter, SessionRecord, load_export_files, parse_export, record_alerts};

/// The default `--seed`: any fixed value makes reports reproducible.
pub const DEFAULT_SEED: u64 = 2411_15114;

/// `rebench report` options.
#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// Only these environments (repeatable, or comma-separated).
    #[arg(long = "env", value_name = "ID", value_delimiter = ',')]
    pub env: Vec<String>,
    /// Only humans or only agents (default: both, reported separately).
    #[arg(long, value_enum)]
    pub kind: Option<Kind>,
    /// Only these agents, by name (repeatable, or comma-separated); the
    /// humans stay, for the comparison.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub agent: Vec<String>,
    /// Only these participants (repeatable).
    #[arg(long, value_name = "NAME")]
    pub participant: Vec<String>,
    /// Only runs started at or after DATE (YYYY-MM-DD in UTC, or RFC 3339).
    #[arg(long, value_name = "DATE", value_parser = parse_since)]
    pub since: Option<DateTime<Utc>>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also draw score over time and score@budget into an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Seed of the bootstrap's random streams.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Bootstrap resamples per interval.
    #[arg(long, default_value_t = 10_000, value_parser = parse_resamples)]
    pub resamples: usize,
    /// Total time budgets for score@budget (best of k runs of budget/k).
    #[arg(
        long,
        value_name = "DURATIONS",
        value_delimiter = ',',
        default_value = "2h,8h,32h",
        value_parser = parse_budget
    )]
    pub budgets: Vec<Duration>,
    /// Cost of an hour of human work, for the cost table (0: human cost not shown).
    #[arg(long, value_name = "USD_PER_HOUR", default_value_t = 0.0, value_parser = parse_rate)]
    pub human_rate: f64,
    /// Read `jsonl` session exports instead of the server's store.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub from: Vec<PathBuf>,
    /// Only runs that ended so (comma-separated): submitted,
    /// budget_exhausted, abandoned, ended_by_proctor, token_limit,
    /// cost_limit, running.
    #[arg(long, value_name = "REASONS", value_delimiter = ',', value_parser = parse_end)]
    pub only: Vec<String>,
    /// Leave out runs a proctor ended (disqualified, say).
    #[arg(long)]
    pub exclude_ended_by_proctor: bool,
    /// Leave out runs whose record shows these alerts (comma-separated):
    /// protected_file (a score refused for a changed protected file),
    /// crash_recovery (paused by a server crash).
    #[arg(long, value_name = "ALERTS", value_delimiter = ',', value_parser = parse_alert)]
    pub exclude_alert: Vec<String>,
    /// Pool runs of different versions of an environment (by default only
    /// the version with the most runs is compared, and a note says so).
    #[arg(long)]
    pub any_version: bool,
    /// The standard length of a human run: human budgets above it are the
    /// best of k runs of exactly this length.
    #[arg(long, value_name = "DURATION", default_value = "8h", value_parser = parse_budget)]
    pub human_run_length: Duration,
    /// How best-of-k is estimated: with-replacement (RE-Bench's; biased
    /// low with few runs) or unbiased (mean over k-subsets; needs k runs).
    #[arg(long, value_enum, default_value = "with-replacement")]
    pub estimator: Estimator,
}

impl ReportArgs {
    pub fn filter(&self) -> RunFilter {
        RunFilter {
            environments: self.env.clone(),
            kind: self.kind,
            agents: self.agent.clone(),
            participants: self.participant.clone(),
            since: self.since,
            end_reasons: self.only.clone(),
            exclude_ended_by_proctor: self.exclude_ended_by_proctor,
            exclude_alerts: self.exclude_alert.clone(),
            any_version: self.any_version,
        }
    }

    pub fn options(&self) -> ReportOptions {
        ReportOptions {
            seed: self.seed,
            resamples: self.resamples,
            budgets_s: self.budgets.iter().map(Duration::as_secs_f64).collect(),
            human_rate_usd_per_hour: self.human_rate,
            human_run_length_s: self.human_run_length.as_secs_f64(),
            estimator: self.estimator,
        }
    }
}

/// Runs `rebench report`; prints to stdout; returns the exit code.
pub async fn run(args: ReportArgs, paths: &DataPaths) -> anyhow::Result<i32> {
    let filter = args.filter();
    let (known, records) = if args.from.is_empty() {
        let (known, records) = runs::load_from_server(paths, &filter).await?;
        (known, records)
    } else {
        let records = load_export_files(&args.from)?;
        let known = records.iter().map(|r| r.view.environment.clone()).collect();
        (known, records)
    };
    check_environments(&filter.environments, &known, paths)?;
    let report = report_from_records(&records, &filter, &args.options())?;
    print!("{}", render(&report, args.format));
    if let (Some(message), Format::Csv) = (&report.message, args.format) {
        // CSV has no place for it; the other formats carry it.
        eprintln!("rebench: {message}");
    }
    if let Some(path) = &args.plot {
        plot::write_svg(&report, path)?;
        eprintln!("rebench: wrote the plot to {}", path.display());
    }
    Ok(0)
}

/// The report over session records (from the server or export files), filtered.
/// A session id seen twice (overlapping exports) counts once, as first read.
pub fn report_from_records(
    records: &[SessionRecord],
    filter: &RunFilter,
    options: &ReportOptions,
) -> anyhow::Result<Report> {
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    let mut runs = Vec::new();
    let mut excluded: std::collections::BTreeMap<String, usize> = Default::default();
    let mut excluded_alerts: std::collections::BTreeMap<&str, usize> = Default::default();
    for record in records {
        if !seen.insert(record.view.id.as_str()) {
            duplicates += 1;
            continue;
        }
        if !filter.matches(&record.view) {
            continue;
        }
        if !filter.ends_as_asked(&record.view) {
            *excluded.entry(runs::end_label(&record.view)).or_default() += 1;
            continue;
        }
        if let Some(alert) = filter.excluded_alert(record) {
            *excluded_alerts.entry(alert).or_default() += 1;
            continue;
        }
        if let Some(run) = Run::from_record(record)? {
            runs.push(run);
        }
    }
    let version_note = one_version_each(&mut runs, filter.any_version);
    let mut report = build_report(&runs, options);
    report.notes.extend(version_note);
    if runs.is_empty() {
        let started = records
            .iter()
            .filter(|r| r.view.started_at.is_some())
            .count();
        report.message = Some(match seen.len() {
            0 => format!("{}: there are no sessions", model::NO_RUNS),
            sessions => format!(
                "{}: {sessions} session(s), {started} started, none matching the filters",
                model::NO_RUNS
            ),
        });
    }
    if duplicates > 0 {
        report.notes.push(format!(
            "{duplicates} duplicate session record(s) ignored (same session id read twice)"
        ));
    }
    let left_out: usize = excluded.values().sum();
    if left_out > 0 || !filter.end_reasons.is_empty() || filter.exclude_ended_by_proctor {
        report
            .notes
            .push(excluded_note("EXCLUDED by how they ended", &excluded));
    }
    if !filter.exclude_alerts.is_empty() {
        let label = format!("EXCLUDED by alert ({})", filter.exclude_alerts.join(", "));
        report.notes.push(excluded_note(&label, &excluded_alerts));
    }
    Ok(report)
}

/// "LABEL: 3 run(s) (why: 2, other: 1)", the counts by why.
fn excluded_note<K: std::fmt::Display>(
    label: &str,
    by: &std::collections::BTreeMap<K, usize>,
) -> String {
    let total: usize = by.values().sum();
    let parts: Vec<String> = by.iter().map(|(why, n)| format!("{why}: {n}")).collect();
    if parts.is_empty() {
        format!("{label}: {total} run(s)")
    } else {
        format!("{label}: {total} run(s) ({})", parts.join(", "))
    }
}

/// Keeps, per environment, the runs of the version most of its runs have
/// (ties: the one run most recently), unless `pool`; notes what was left
/// out, or pooled.
fn one_version_each(runs: &mut Vec<Run>, pool: bool) -> Vec<String> {
    use std::collections::BTreeMap;
    // environment -> version -> (runs, latest start)
    let mut versions: BTreeMap<String, BTreeMap<String, (usize, DateTime<Utc>)>> = BTreeMap::new();
    for run in runs.iter().filter(|r| !r.version.is_empty()) {
        let entry = versions
            .entry(run.environment.clone())
            .or_default()
            .entry(run.version.clone())
            .or_insert((0, run.started_at));
        entry.0 += 1;
        entry.1 = entry.1.max(run.started_at);
    }
    let mut notes = Vec::new();
    let mut keep: BTreeMap<String, String> = BTreeMap::new();
    for (env, seen) in &versions {
        if seen.len() < 2 {
            continue;
        }
        if pool {
            notes.push(format!(
                "{env}: runs of {} versions of the environment pooled (--any-version)",
                seen.len()
            ));
            continue;
        }
        let (chosen, _) = seen
            .iter()
            .max_by(|a, b| (a.1.0, a.1.1).cmp(&(b.1.0, b.1.1)))
            .map(|(v, n)| (v.clone(), *n))
            .unwrap_or_default();
        let left: usize = seen
            .iter()
            .filter(|(v, _)| **v != chosen)
            .map(|(_, n)| n.0)
            .sum();
        notes.push(format!(
            "VERSIONS: {env} has runs of {} versions; {left} run(s) of other versions left out \
             (compared: version {}; --any-version pools them)",
            seen.len(),
            &chosen[..chosen.len().min(12)]
        ));
        keep.insert(env.clone(), chosen);
    }
    runs.retain(|r| {
        keep.get(&r.environment)
            .is_none_or(|v| r.version.is_empty() || *v == r.version)
    });
    notes
}

/// `--env` names that no session has and no folder on the search path
/// defines are an error, naming what is known.
fn check_environments(
    asked: &[String],
    known: &std::collections::BTreeSet<String>,
    paths: &DataPaths,
) -> anyhow::Result<()> {
    let mut all = known.clone();
    let search = crate::environment::discovery::search_path(&paths.root);
    for (_, env) in crate::environment::discovery::list(&search) {
        if let Ok(env) = env {
            all.insert(env.id().to_string());
        }
    }
    let unknown: Vec<&String> = asked.iter().filter(|a| !all.contains(*a)).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "--env: unknown environment(s) {} (known: {})",
        unknown
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        all.into_iter().collect::<Vec<_>>().join(", ")
    )
}

fn parse_alert(text: &str) -> Result<String, String> {
    let text = text.trim().replace('-', "_");
    if runs::RECORD_ALERTS.contains(&text.as_str()) {
        Ok(text)
    } else {
        Err(format!(
            "unknown alert {text:?} (expected {})",
            runs::RECORD_ALERTS.join(", ")
        ))
    }
}

fn parse_end(text: &str) -> Result<String, String> {
    const ENDS: &[&str] = &[
        "submitted",
        "budget_exhausted",
        "abandoned",
        "ended_by_proctor",
        "token_limit",
        "cost_limit",
        "running",
    ];
    let text = text.trim().replace('-', "_");
    if ENDS.contains(&text.as_str()) {
        Ok(text)
    } else {
        Err(format!(
            "unknown end {text:?} (expected {})",
            ENDS.join(", ")
        ))
    }
}

fn parse_since(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(date.and_time(chrono::NaiveTime::MIN).and_utc());
    }
    DateTime::parse_from_rfc3339(text)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|_| {
            format!("invalid date {text:?} (expected YYYY-MM-DD or e.g. 2025-01-31T09:00:00Z)")
        })
}

fn parse_resamples(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=10_000_000).contains(&n) => Ok(n),
        _ => Err(format!(
            "invalid resample count {text:?} (expected 1 to 10000000)"
        )),
    }
}

fn parse_budget(text: &str) -> Result<Duration, String> {
    let budget = parse_duration(text)?;
    if budget.is_zero() {
        return Err(format!("a budget must be longer than 0 (got {text:?})"));
    }
    Ok(budget)
}

fn parse_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate >= 0.0 => Ok(rate),
        _ => Err(format!(
            "invalid hourly rate {text:?} (expected a number of dollars, e.g. 120)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ReportArgs,
    }

    fn parse(line: &[&str]) -> Result<ReportArgs, clap::Error> {
        let argv = std::iter::once("report").chain(line.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.args)
    }

    #[test]
    fn defaults_match_the_benchmark() {
        let args = parse(&[]).unwrap();
        let options = args.options();
        assert_eq!(options.budgets_s, vec![7200.0, 28800.0, 115200.0]);
        assert_eq!(options.resamples, 10_000);
        assert_eq!(options.seed, DEFAULT_SEED);
        assert_eq!(options.human_rate_usd_per_hour, 0.0);
        assert_eq!(args.format, Format::Table);
        assert_eq!(args.filter(), RunFilter::default());
    }

    #[test]
    fn flags_parse_and_bad_values_are_refused() {
        let args = parse(&[
            "--env",
            "a,b",
            "--env",
            "c",
            "--kind",
            "agent",
            "--participant",
            "ann",
            "--since",
            "2025-02-01",
            "--format",
            "csv",
            "--budgets",
            "30m,1h30m",
            "--human-rate",
            "120",
            "--from",
            "x.jsonl",
            "y.jsonl",
        ])
        .unwrap();
        assert_eq!(args.env, vec!["a", "b", "c"]);
        assert_eq!(args.kind, Some(Kind::Agent));
        assert_eq!(args.from.len(), 2);
        assert_eq!(args.options().budgets_s, vec![1800.0, 5400.0]);
        assert_eq!(
            args.since.unwrap().to_rfc3339(),
            "2025-02-01T00:00:00+00:00"
        );
        for bad in [
            &["--budgets", "0s"][..],
            &["--budgets", "2 hours"],
            &["--resamples", "0"],
            &["--human-rate", "-5"],
            &["--since", "yesterday"],
            &["--kind", "robot"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
