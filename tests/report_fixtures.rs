//! `rebench report` over hand-made `jsonl` exports (tests/fixtures/report),
//! against expectations worked out by hand from their score logs.
//!
//! The baseline set (budgets 8 h unless noted; scores are normalized):
//! - kernel (visible, best):   human ann  0 @0, .2 @30m, .5 @1h30m, invalid @2h30m, .9 @5h33m20s
//!   human bob  0 @0, .4 @10m, 1.2 @4h
//!   agent a1   0 @0, .6 @15m, .7 @2h (usage $10 + $5)
//!   agent a2   0 @0, .3 @1h (usage $3)
//!   agent a4   2 h budget: 0 @0, .8 @50m (usage $2)
//! - scaling (hidden, last): human cy 0 @0, .8 @1h, .5 @2h46m40s -> final .5
//!   agent a3   0 @0, .2 @16m40s, .6 @33m20s (scores only in its events)
//! - u1: never started (no run).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::path::{Path, PathBuf};

use clap::Parser;
use rebench::report::model::{BestOfKRow, OVERALL, Report, SummaryRow, TimelineRow};
use rebench::report::{
    Format, Kind, ReportArgs, ReportOptions, RunFilter, load_export_files, render,
    report_from_records,
};
use rebench::session::{EndReason, PauseReason};

const H: f64 = 3600.0;

fn fixture_files(set: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(set);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

fn options() -> ReportOptions {
    ReportOptions {
        seed: 7,
        resamples: 2000,
        budgets_s: vec![2.0 * H, 8.0 * H, 32.0 * H],
        human_rate_usd_per_hour: 0.0,
        human_run_length_s: rebench::report::best_of_k::HUMAN_RUN_CAP_S,
        estimator: rebench::report::Estimator::WithReplacement,
    }
}

fn report_of(set: &str, filter: &RunFilter, options: &ReportOptions) -> Report {
    let records = load_export_files(&fixture_files(set)).unwrap();
    report_from_records(&records, filter, options).unwrap()
}

fn baseline() -> Report {
    report_of("baseline", &RunFilter::default(), &options())
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn summary<'a>(report: &'a Report, kind: Kind, env: &str) -> &'a SummaryRow {
    report
        .summary
        .iter()
        .find(|r| r.kind == kind && r.environment == env)
        .unwrap_or_else(|| panic!("no summary row {kind:?} {env}"))
}

fn at<'a>(report: &'a Report, kind: Kind, env: &str, time_s: f64) -> &'a TimelineRow {
    report
        .timeline
        .iter()
        .find(|r| r.kind == kind && r.environment == env && r.time_s == time_s)
        .unwrap_or_else(|| panic!("no timeline row {kind:?} {env} {time_s}"))
}

fn budget(report: &Report, kind: Kind, budget_s: f64) -> &BestOfKRow {
    report
        .best_of_k
        .iter()
        .find(|r| r.kind == kind && r.budget_s == budget_s)
        .unwrap()
}

/// Value, k and run length of the best split.
fn best(row: &BestOfKRow) -> (f64, u32, f64) {
    let best = row.best.as_ref().expect("a supported split");
    (best.estimate.unwrap().value, best.k, best.run_length_s)
}

#[test]
fn fixture_events_are_real_event_log_entries() {
    // Guards the hand-made fixtures against drifting from the real formats.
    for file in fixture_files("baseline") {
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            match value["record"].as_str() {
                Some("session") => {
                    serde_json::from_value::<rebench::protocol::SessionView>(
                        value["session"].clone(),
                    )
                    .unwrap();
                }
                Some("event") => {
                    serde_json::from_value::<rebench::session::Event>(value["event"].clone())
                        .unwrap();
                }
                _ => {}
            }
        }
    }
}

#[test]
fn runs_are_started_sessions_and_final_scores_follow_the_aggregate() {
    let report = baseline();
    assert_eq!(report.runs, 7, "the unstarted session is no run");
    let kernel = summary(&report, Kind::Human, "kernel");
    assert_eq!((kernel.runs, kernel.participants), (2, 2));
    assert!(close(kernel.mean.value, 1.05) && close(kernel.median.value, 1.05));
    assert!(close(kernel.share_above_0, 1.0) && close(kernel.share_at_least_1, 0.5));
    assert_eq!(kernel.best, Some(1.2));
    // ann asked 4 times (one invalid), bob twice; the starting scores are not theirs.
    assert_eq!(kernel.scoring_attempts, 6);
    assert!(close(kernel.active_hours, 16.0));
    assert!(close(kernel.scores_per_hour.unwrap(), 6.0 / 16.0));
    // Scaling Law: the last valid answer counts (.5), not the best (.8).
    assert_eq!(summary(&report, Kind::Human, "scaling").best, Some(0.5));
    let humans = summary(&report, Kind::Human, OVERALL);
    assert_eq!((humans.runs, humans.participants), (3, 3));
    assert!(close(humans.mean.value, 2.6 / 3.0) && close(humans.median.value, 0.9));
    let agents = summary(&report, Kind::Agent, "kernel");
    assert_eq!((agents.runs, agents.participants), (3, 2));
    assert!(close(agents.mean.value, 0.6) && close(agents.median.value, 0.7));
    // a3's view has no scores: its final comes from the scored events.
    assert_eq!(summary(&report, Kind::Agent, "scaling").best, Some(0.6));
}

#[test]
fn score_over_time_is_the_mean_of_exact_step_functions() {
    let report = baseline();
    assert_eq!(
        report.time_points_s,
        vec![900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0]
    );
    let human = |env, t| at(&report, Kind::Human, env, t).mean.value;
    // ann .0/.2/.2/.5/.5/.9 and bob .4/.4/.4/.4/1.2/1.2 at 15m..8h.
    let expected = [0.2, 0.3, 0.3, 0.45, 0.85, 1.05];
    for (t, want) in report.time_points_s.iter().zip(expected) {
        assert!(close(human("kernel", *t), want), "kernel at {t}");
    }
    // Overall: environments weigh equally (kernel .3, scaling .8 at 1 h).
    assert!(close(human(OVERALL, H), 0.55));
    assert_eq!(at(&report, Kind::Human, OVERALL, H).environments, 2);
    // a4 (2 h budget) counts up to 2 h and not after.
    let agent = |t| at(&report, Kind::Agent, "kernel", t);
    assert_eq!(agent(2.0 * H).runs, 3);
    assert!(close(agent(2.0 * H).mean.value, 0.6));
    assert_eq!(agent(4.0 * H).runs, 2);
    assert!(close(agent(4.0 * H).mean.value, 0.5));
    let scaling = |t| at(&report, Kind::Agent, "scaling", t).mean.value;
    assert!(close(scaling(900.0), 0.0) && close(scaling(1800.0), 0.2) && close(scaling(H), 0.6));
}

#[test]
fn best_of_k_matches_hand_derived_expectations() {
    let report = baseline();
    // Humans at 2 h: one run scored at 2 h; kernel (.5+.4)/2, scaling (hidden) .8.
    let (value, k, length) = best(budget(&report, Kind::Human, 2.0 * H));
    assert!(
        close(value, 0.625) && (k, length) == (1, 2.0 * H),
        "{value}"
    );
    let (value, k, length) = best(budget(&report, Kind::Human, 8.0 * H));
    assert!(close(value, (1.05 + 0.5) / 2.0) && (k, length) == (1, 8.0 * H));
    // Humans at 32 h: best of 4 eight-hour runs. kernel: 1.2 (15/16) + .9 (1/16);
    // scaling is hidden, so a random run: .5.
    let (value, k, length) = best(budget(&report, Kind::Human, 32.0 * H));
    assert!(close(value, (18.9 / 16.0 + 0.5) / 2.0), "{value}");
    assert_eq!((k, length), (4, 8.0 * H));
    assert!(
        budget(&report, Kind::Human, 32.0 * H)
            .splits
            .iter()
            .all(|s| s.run_length_s <= 8.0 * H),
        "humans never get 32-hour runs"
    );
    // Agents use runs whose time limit was the split's run length (an agent
    // told it has 8 h works differently from one told 2 h). At 2 h only a4
    // had 2 h, and scaling has no 2-hour agent run: no split is supported.
    let row = budget(&report, Kind::Agent, 2.0 * H);
    assert!(row.best.is_none(), "{row:?}");
    assert_eq!(row.splits[0].missing_environments, vec!["scaling"]);
    // At 8 h: 1 x 8 h (kernel a1, a2: (.7+.3)/2; scaling a3 .6); 4 x 2 h
    // lacks scaling.
    let row = budget(&report, Kind::Agent, 8.0 * H);
    let (value, k, length) = best(row);
    assert!(close(value, (0.5 + 0.6) / 2.0), "{value}");
    assert_eq!((k, length), (1, 8.0 * H));
    let four = row.splits.iter().find(|s| s.k == 4).unwrap();
    assert!(four.estimate.is_none());
    assert_eq!(four.missing_environments, vec!["scaling"]);
    // At 32 h: 4 x 8 h. kernel best of 4 of {.7, .3} = .7 (15/16) + .3 (1/16);
    // scaling .6. 16 x 2 h lacks scaling, 1 x 32 h has no runs.
    let row = budget(&report, Kind::Agent, 32.0 * H);
    let (value, k, length) = best(row);
    assert!(close(value, (10.8 / 16.0 + 0.6) / 2.0), "{value}");
    assert_eq!((k, length), (4, 8.0 * H));
    let whole = row.splits.iter().find(|s| s.k == 1).unwrap();
    assert!(whole.estimate.is_none());
    assert_eq!(whole.missing_environments, vec!["kernel", "scaling"]);
}

#[test]
fn agents_are_compared_with_humans_by_a_ratio_with_an_interval() {
    let report = baseline();
    let at = |budget_s: f64| {
        report
            .comparison
            .iter()
            .find(|c| c.budget_s == budget_s)
            .unwrap()
    };
    // The fixtures' agents name no agent: they are compared as one group.
    assert_eq!(at(8.0 * H).group, "agent");
    assert_eq!(at(8.0 * H).environments, vec!["kernel", "scaling"]);
    let ratio = at(8.0 * H).ratio.unwrap();
    // Agents 1 x 8 h: .55; humans 1 x 8 h: (1.05 + .5) / 2.
    assert!(close(ratio.value, 0.55 / 0.775), "{}", ratio.value);
    let (low, high) = (ratio.ci_low.unwrap(), ratio.ci_high.unwrap());
    assert!(low <= ratio.value && ratio.value <= high, "{low} {high}");
    // At 2 h the agents have no supported split: no ratio, and no best agent.
    assert!(at(2.0 * H).agent.is_none() && at(2.0 * H).ratio.is_none());
    assert!(report.best_agent.iter().all(|b| b.budget_s != 2.0 * H));
    let best = report
        .best_agent
        .iter()
        .find(|b| b.budget_s == 8.0 * H)
        .unwrap();
    assert_eq!(best.group, "agent");
}

#[test]
fn intervals_contain_the_estimates_and_are_reproducible_with_a_seed() {
    let first = baseline();
    for row in &first.summary {
        for e in [row.mean, row.median] {
            assert!(
                e.ci_low <= e.value + 1e-12 && e.value <= e.ci_high + 1e-12,
                "{row:?}"
            );
        }
    }
    for row in &first.timeline {
        assert!(
            row.mean.ci_low <= row.mean.value + 1e-12 && row.mean.value <= row.mean.ci_high + 1e-12
        );
    }
    let json = |r: &Report| render(r, Format::Json);
    assert_eq!(json(&first), json(&baseline()), "same seed, same report");
    let other = report_of(
        "baseline",
        &RunFilter::default(),
        &ReportOptions {
            seed: 8,
            ..options()
        },
    );
    assert_ne!(json(&first), json(&other), "the seed drives the intervals");
    // Point estimates never depend on the seed.
    let means = |r: &Report| r.summary.iter().map(|s| s.mean.value).collect::<Vec<_>>();
    assert_eq!(means(&first), means(&other));
    // One environment's numbers do not move when another is filtered out.
    let kernel_only = report_of(
        "baseline",
        &RunFilter {
            environments: vec!["kernel".into()],
            ..RunFilter::default()
        },
        &options(),
    );
    assert_eq!(
        summary(&first, Kind::Human, "kernel"),
        summary(&kernel_only, Kind::Human, "kernel")
    );
}

#[test]
fn cost_comes_from_usage_events_and_the_human_rate() {
    let report = baseline();
    let cost = |r: &Report, kind, env: &str| {
        r.cost
            .iter()
            .find(|c| c.kind == kind && c.environment == env)
            .unwrap()
            .clone()
    };
    let kernel = cost(&report, Kind::Agent, "kernel");
    assert!(close(kernel.total_usd.unwrap(), 20.0));
    assert!(close(kernel.per_run_usd.unwrap(), 20.0 / 3.0));
    assert!(close(kernel.per_score_point_usd.unwrap(), 20.0 / 1.8));
    assert_eq!(
        (kernel.usage_events, kernel.tokens_in, kernel.tokens_out),
        (4, 1900, 340)
    );
    assert_eq!(cost(&report, Kind::Agent, "scaling").total_usd, None);
    assert_eq!(cost(&report, Kind::Human, "kernel").total_usd, None);
    let paid = report_of(
        "baseline",
        &RunFilter::default(),
        &ReportOptions {
            human_rate_usd_per_hour: 100.0,
            ..options()
        },
    );
    let humans = cost(&paid, Kind::Human, "kernel");
    assert!(close(humans.total_usd.unwrap(), 1600.0));
    assert!(close(humans.per_score_point_usd.unwrap(), 1600.0 / 2.1));
}

#[test]
fn filters_select_runs() {
    let with = |filter: RunFilter| report_of("baseline", &filter, &options()).runs;
    let kind = |k| RunFilter {
        kind: Some(k),
        ..RunFilter::default()
    };
    assert_eq!(with(kind(Kind::Human)), 3);
    assert_eq!(with(kind(Kind::Agent)), 4);
    assert_eq!(
        with(RunFilter {
            participants: vec!["ann".into(), "agent-y".into()],
            ..RunFilter::default()
        }),
        3
    );
    let since = chrono::DateTime::parse_from_rfc3339("2025-03-04T00:00:00Z")
        .unwrap()
        .to_utc();
    assert_eq!(
        with(RunFilter {
            since: Some(since),
            ..RunFilter::default()
        }),
        4
    );
    let humans_only = report_of("baseline", &kind(Kind::Human), &options());
    assert!(humans_only.comparison.is_empty());
    assert!(humans_only.summary.iter().all(|r| r.kind == Kind::Human));
}

#[test]
fn csv_and_json_field_names_are_stable() {
    let report = baseline();
    let csv = render(&report, Format::Csv);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "section,kind,group,environment,metric,time_s,k,run_length_s,runs,value,ci_low,ci_high"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 12));
    let has = |section: &str, metric: &str| rows.iter().any(|r| r[0] == section && r[4] == metric);
    for metric in [
        "participants",
        "runs_without_valid_score",
        "mean",
        "median",
        "share_above_0",
        "share_at_least_1",
        "best",
        "scoring_attempts",
        "active_hours",
        "scores_per_hour",
    ] {
        assert!(has("summary", metric), "{metric}");
    }
    assert!(has("timeline", "score_at_time"));
    assert!(has("best_of_k", "score_at_budget") && has("best_of_k", "split_score"));
    assert!(has("comparison", "score_at_budget") && has("comparison", "ratio"));
    for metric in [
        "total_usd",
        "per_run_usd",
        "per_score_point_usd",
        "score_points",
        "tokens_in",
    ] {
        assert!(has("cost", metric), "{metric}");
    }
    let human_kernel_mean = rows
        .iter()
        .find(|r| r[0] == "summary" && r[1] == "human" && r[3] == "kernel" && r[4] == "mean")
        .unwrap();
    assert_eq!(human_kernel_mean[2], "human");
    assert_eq!(human_kernel_mean[8], "2");
    assert!(close(human_kernel_mean[9].parse().unwrap(), 1.05));

    let json: serde_json::Value = serde_json::from_str(&render(&report, Format::Json)).unwrap();
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(&json),
        [
            "best_agent",
            "best_of_k",
            "budgets_s",
            "comparison",
            "confidence",
            "cost",
            "estimator",
            "human_rate_usd_per_hour",
            "message",
            "notes",
            "resamples",
            "runs",
            "schema",
            "seed",
            "summary",
            "time_points_s",
            "timeline"
        ]
    );
    assert_eq!(json["schema"], "rebench-report/2");
    assert_eq!(json["estimator"], "with_replacement");
    assert_eq!(
        keys(&json["summary"][0]),
        [
            "active_hours",
            "best",
            "environment",
            "group",
            "kind",
            "mean",
            "median",
            "participants",
            "runs",
            "runs_without_valid_score",
            "scores_per_hour",
            "scoring_attempts",
            "share_above_0",
            "share_at_least_1"
        ]
    );
    assert_eq!(
        keys(&json["summary"][0]["mean"]),
        ["ci_high", "ci_low", "value"]
    );
    assert_eq!(
        keys(&json["timeline"][0]),
        [
            "environment",
            "environments",
            "group",
            "kind",
            "mean",
            "runs",
            "time_s"
        ]
    );
    assert_eq!(
        keys(&json["best_of_k"][0]),
        [
            "best",
            "budget_s",
            "environments",
            "group",
            "kind",
            "random_run_environments",
            "splits"
        ]
    );
    assert_eq!(
        keys(&json["best_of_k"][0]["best"]),
        [
            "estimate",
            "k",
            "missing_environments",
            "run_length_s",
            "runs"
        ]
    );
    assert_eq!(
        keys(&json["comparison"][0]),
        [
            "agent",
            "budget_s",
            "environments",
            "group",
            "human",
            "ratio"
        ]
    );
    assert_eq!(
        keys(
            &json["comparison"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| !c["ratio"].is_null())
                .unwrap()["ratio"]
        ),
        ["ci_high", "ci_low", "value"]
    );
    assert_eq!(
        keys(&json["cost"][0]),
        [
            "environment",
            "group",
            "kind",
            "per_run_usd",
            "per_score_point_usd",
            "runs",
            "score_points",
            "source",
            "tokens_in",
            "tokens_out",
            "total_usd",
            "usage_events"
        ]
    );
}

#[test]
fn an_empty_store_says_no_runs_match() {
    let report = report_from_records(&[], &RunFilter::default(), &options()).unwrap();
    for format in [Format::Table, Format::Markdown] {
        let text = render(&report, format);
        assert!(text.contains("no runs match"), "{text}");
        assert!(!text.contains("NaN"), "{text}");
    }
    let json: serde_json::Value = serde_json::from_str(&render(&report, Format::Json)).unwrap();
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .starts_with("no runs match")
    );
    assert_eq!(json["runs"], 0);
    assert_eq!(json["summary"].as_array().unwrap().len(), 0);
    assert_eq!(
        render(&report, Format::Csv).lines().count(),
        1,
        "header only"
    );
    // Sessions exist but none matches.
    let unmatched = report_of(
        "baseline",
        &RunFilter {
            environments: vec!["no-such-env".into()],
            ..RunFilter::default()
        },
        &options(),
    );
    let message = unmatched.message.unwrap();
    assert!(
        message.starts_with("no runs match") && message.contains("8 session"),
        "{message}"
    );
}

#[test]
fn only_invalid_scores_count_as_zero_without_nan() {
    let report = report_of("invalid", &RunFilter::default(), &options());
    assert_eq!(report.runs, 2);
    assert!(report.message.is_none());
    for row in &report.summary {
        assert_eq!(row.runs_without_valid_score, row.runs);
        assert_eq!(
            (row.mean.value, row.mean.ci_low, row.mean.ci_high),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(row.best, None);
        assert_eq!(row.share_above_0, 0.0);
    }
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.starts_with("no valid scores")),
        "{:?}",
        report.notes
    );
    for format in [Format::Table, Format::Markdown, Format::Csv, Format::Json] {
        let text = render(&report, format);
        assert!(
            !text.contains("NaN") && !text.contains("inf"),
            "{format:?}: {text}"
        );
    }
    // Both kinds score 0: no ratio.
    assert!(report.comparison.iter().all(|c| c.ratio.is_none()));
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    report: ReportArgs,
}

#[tokio::test]
async fn run_reads_export_files_and_writes_a_plot() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("report.svg");
    let mut argv = vec![
        "report".to_string(),
        "--resamples".into(),
        "500".into(),
        "--plot".into(),
        plot.display().to_string(),
        "--from".into(),
    ];
    argv.extend(
        fixture_files("baseline")
            .iter()
            .map(|f| f.display().to_string()),
    );
    let args = Cli::try_parse_from(argv).unwrap().report;
    // --from never touches the data dir (no server is started).
    let paths = rebench::paths::DataPaths::new(dir.path().join("no-data"));
    let code = rebench::report::run(args, &paths).await.unwrap();
    assert_eq!(code, 0);
    assert!(!dir.path().join("no-data").exists());
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("</svg>"));
    for text in [
        "Score over active time",
        "score@budget",
        "humans",
        "agents",
        "32h",
        // Every point of score over time says how many runs it stands on.
        "\nn=",
        "where n falls",
    ] {
        assert!(svg.contains(text), "the plot lacks {text:?}");
    }
    assert!(!svg.contains("NaN"));
}

/// Issue 19: runs a proctor ended can be left out (and the report says how
/// many were), an extended run is compared at its original budget, and
/// short human test sessions never make up a 32-hour human budget.
#[test]
fn end_filters_extensions_and_the_human_run_length() {
    let mut records = load_export_files(&fixture_files("baseline")).unwrap();
    for record in &mut records {
        let view = &mut record.view;
        match view.id.as_str() {
            // Disqualified by the proctor.
            "h2" => view.end_reason = Some(EndReason::EndedByProctor),
            // Given 45 more minutes: still an 8-hour run for the comparison.
            "h1" => {
                view.budget_s += 2700.0;
                view.extensions.push(rebench::protocol::ExtensionView {
                    at: view.started_at.unwrap(),
                    by_s: 2700.0,
                    reason: "power cut".into(),
                    by: "proctor".into(),
                });
            }
            _ => {}
        }
    }
    let all = report_from_records(&records, &RunFilter::default(), &options()).unwrap();
    assert_eq!(all.runs, 7);
    assert!(
        all.notes
            .iter()
            .any(|n| n == "1 run(s) extended, 45m in all: compared at their original budgets"),
        "{:?}",
        all.notes
    );
    let lengths: Vec<f64> = all
        .best_of_k
        .iter()
        .flat_map(|row| row.splits.iter().map(|s| s.run_length_s))
        .collect();
    assert!(
        lengths
            .iter()
            .all(|l| *l == 2.0 * H || *l == 8.0 * H || *l == 32.0 * H),
        "an extended budget made a column: {lengths:?}"
    );

    let without = report_from_records(
        &records,
        &RunFilter {
            exclude_ended_by_proctor: true,
            ..RunFilter::default()
        },
        &options(),
    )
    .unwrap();
    assert_eq!(without.runs, 6);
    assert!(
        without
            .notes
            .contains(&"EXCLUDED by how they ended: 1 run(s) (ended_by_proctor: 1)".to_string()),
        "{:?}",
        without.notes
    );
    let submitted = report_from_records(
        &records,
        &RunFilter {
            end_reasons: vec!["submitted".into()],
            ..RunFilter::default()
        },
        &options(),
    )
    .unwrap();
    assert!(
        submitted
            .notes
            .iter()
            .any(|n| n.starts_with("EXCLUDED by how they ended:")
                && n.contains("ended_by_proctor: 1")),
        "{:?}",
        submitted.notes
    );

    // Half-hour human test sessions: a 32-hour human budget is the best of
    // four 8-hour runs or nothing, never 64 half-hour ones.
    for record in &mut records {
        if record.view.kind == Kind::Human {
            record.view.budget_s = 1800.0;
        }
    }
    let short = report_from_records(&records, &RunFilter::default(), &options()).unwrap();
    let human_32h = short
        .best_of_k
        .iter()
        .find(|r| r.kind == Kind::Human && r.budget_s == 32.0 * H)
        .unwrap();
    assert!(
        human_32h
            .splits
            .iter()
            .all(|s| s.run_length_s == 8.0 * H && s.k == 4),
        "{:?}",
        human_32h.splits
    );
}

/// Issue 19: runs of another version of an environment (its manifest
/// changed) are not compared with the rest unless asked, and the report
/// says so either way.
#[test]
fn runs_of_other_versions_are_left_out_unless_pooled() {
    let mut records = load_export_files(&fixture_files("baseline")).unwrap();
    for record in &mut records {
        record.view.manifest_hash = if record.view.id == "a2" {
            "bbbbbbbbbbbbbbbbbbbbbbbb".into()
        } else {
            "aaaaaaaaaaaaaaaaaaaaaaaa".into()
        };
    }
    let strict = report_from_records(&records, &RunFilter::default(), &options()).unwrap();
    assert_eq!(strict.runs, 6, "a2 ran another version of kernel");
    assert!(
        strict.notes.iter().any(|n| n
            .starts_with("VERSIONS: kernel has runs of 2 versions; 1 run(s)")
            && n.contains("aaaaaaaaaaaa")),
        "{:?}",
        strict.notes
    );
    let pooled = report_from_records(
        &records,
        &RunFilter {
            any_version: true,
            ..RunFilter::default()
        },
        &options(),
    )
    .unwrap();
    assert_eq!(pooled.runs, 7);
    assert!(
        pooled
            .notes
            .iter()
            .any(|n| n.contains("pooled (--any-version)"))
    );
}

/// Issue 19: every point of score over time says how many runs it stands
/// on, so a mean that moves because runs dropped out shows it.
#[test]
fn score_over_time_shows_its_run_counts() {
    let report = baseline();
    let text = render(&report, Format::Table);
    let agents_kernel = text
        .lines()
        .find(|l| l.trim_start().starts_with("agent") && l.contains("kernel") && l.contains(" n="))
        .expect("the agents' kernel row of score over time");
    // a4's budget is 2 h: three runs up to 2 h, two after.
    assert!(
        agents_kernel.contains("n=3") && agents_kernel.contains("n=2"),
        "{agents_kernel}"
    );
}

/// Issue 19: runs whose record shows an alert (a score refused for a
/// changed protected file, a crash-recovery pause) can be left out by
/// kind, and every output says how many were.
#[test]
fn alert_filters_leave_runs_out_and_say_how_many() {
    let mut records = load_export_files(&fixture_files("baseline")).unwrap();
    for record in &mut records {
        let view = &mut record.view;
        match view.id.as_str() {
            "h1" => {
                let scores = view.scores.as_mut().unwrap();
                let mut refused = scores.last().unwrap().clone();
                refused.seq += 1;
                refused.valid = Some(false);
                refused.normalized = None;
                refused.message = "protected file changed: score.py".into();
                scores.push(refused);
            }
            "h2" => view.pauses.push(rebench::protocol::PauseView {
                reason: PauseReason::CrashRecovery,
                by: "system".into(),
                note: None,
                start: view.started_at.unwrap(),
                end: view.ended_at,
            }),
            _ => {}
        }
    }
    let shown: Vec<Vec<&str>> = records
        .iter()
        .filter(|r| ["h1", "h2", "h3"].contains(&r.view.id.as_str()))
        .map(rebench::report::record_alerts)
        .collect();
    assert!(shown.contains(&vec!["protected_file"]), "{shown:?}");
    assert!(shown.contains(&vec!["crash_recovery"]), "{shown:?}");

    let all = report_from_records(&records, &RunFilter::default(), &options()).unwrap();
    assert_eq!(all.runs, 7);
    assert!(!all.notes.iter().any(|n| n.starts_with("EXCLUDED by alert")));

    let filter = |alerts: &[&str]| RunFilter {
        exclude_alerts: alerts.iter().map(|a| a.to_string()).collect(),
        ..RunFilter::default()
    };
    let no_tamper =
        report_from_records(&records, &filter(&["protected_file"]), &options()).unwrap();
    assert_eq!(no_tamper.runs, 6);
    assert!(
        no_tamper.notes.contains(
            &"EXCLUDED by alert (protected_file): 1 run(s) (protected_file: 1)".to_string()
        ),
        "{:?}",
        no_tamper.notes
    );
    let neither = report_from_records(
        &records,
        &filter(&["protected_file", "crash_recovery"]),
        &options(),
    )
    .unwrap();
    assert_eq!(neither.runs, 5);
    // The note is in every output format, with a zero when nothing matched.
    let clean = report_from_records(
        &load_export_files(&fixture_files("baseline")).unwrap(),
        &filter(&["crash_recovery"]),
        &options(),
    )
    .unwrap();
    assert_eq!(clean.runs, 7);
    assert!(
        clean
            .notes
            .contains(&"EXCLUDED by alert (crash_recovery): 0 run(s)".to_string()),
        "{:?}",
        clean.notes
    );
    for format in [Format::Table, Format::Markdown, Format::Json] {
        let text = rebench::report::render(&neither, format);
        assert!(text.contains("EXCLUDED by alert"), "{format:?}: {text}");
    }
    // An unknown kind is refused on the command line, naming the known ones.
    let err = Cli::try_parse_from(["report", "--exclude-alert", "idle"])
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("protected_file, crash_recovery"), "{err}");
}
