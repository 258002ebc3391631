//! Rendering a report: an aligned text table, Markdown, JSON (the [`Report`]
//! itself) or tidy CSV (see `csv`). Table and Markdown share one layout of
//! sections, so they always show the same numbers.

use std::time::Duration;

use crate::environment::duration::format_duration;

use super::csv::render_csv;
use super::model::*;
use super::stats::Estimate;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
    Markdown,
}

pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Json => {
            // Serializing plain data cannot fail; fall back to a JSON error object anyway.
            let mut text = serde_json::to_string_pretty(report)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
            text.push('\n');
            text
        }
        Format::Csv => render_csv(report),
        Format::Table => render_text(report, false),
        Format::Markdown => render_text(report, true),
    }
}

/// A titled table of already formatted cells.
struct Section {
    title: String,
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn render_text(report: &Report, markdown: bool) -> String {
    let mut out = String::new();
    let heading = format!(
        "rebench report: {} run{} (seed {}, {} resamples, {:.0}% intervals)",
        report.runs,
        if report.runs == 1 { "" } else { "s" },
        report.seed,
        report.resamples,
        report.confidence * 100.0
    );
    if markdown {
        out.push_str(&format!("## {heading}\n\n"));
    } else {
        out.push_str(&format!("{heading}\n\n"));
    }
    if let Some(message) = &report.message {
        out.push_str(&format!("{message}\n"));
        return out;
    }
    for section in sections(report) {
        if section.rows.is_empty() {
            continue;
        }
        if markdown {
            out.push_str(&format!("### {}\n\n", section.title));
            out.push_str(&markdown_table(&section));
        } else {
            out.push_str(&format!("{}\n", section.title));
            out.push_str(&aligned_table(&section));
        }
        out.push('\n');
    }
    let bullet = if markdown { "- " } else { "* " };
    for note in &report.notes {
        out.push_str(&format!("{bullet}{note}\n"));
    }
    out.push_str(&format!(
        "{bullet}final score: best valid entry (last for `last`-aggregated environments); runs without one count 0\n\
         {bullet}score@t: mean over runs of budget >= t of the best score by active time t; overall = mean over environments\n\
         {bullet}score@budget: best split of the budget into k runs (k x run length), expected best of k, averaged over environments; \
         agents use runs whose time limit was that run length, humans runs at least that long seen at it\n"
    ));
    out
}

fn sections(report: &Report) -> Vec<Section> {
    vec![
        summary_section(report),
        timeline_section(report),
        best_of_k_section(report),
        comparison_section(report),
        best_agent_section(report),
        cost_section(report),
        hardware_section(report),
    ]
}

/// Which devices each run had (its grant): runs compared on one box did
/// not share a GPU, and timed ones not a core.
fn hardware_section(report: &Report) -> Section {
    let rows = report
        .hardware
        .iter()
        .map(|r| {
            vec![
                r.session.clone(),
                r.group.clone(),
                r.participant.clone(),
                r.environment.clone(),
                r.hardware.clone(),
            ]
        })
        .collect();
    Section {
        title: "Hardware each run held".into(),
        headers: ["session", "group", "participant", "environment", "hardware"]
            .iter()
            .map(|h| h.to_string())
            .collect(),
        rows,
    }
}

fn summary_section(report: &Report) -> Section {
    let headers = [
        "group",
        "environment",
        "runs",
        "people",
        "no score",
        "mean [CI]",
        "median [CI]",
        ">0",
        ">=1",
        "best",
        "scores/h",
    ];
    let rows = report
        .summary
        .iter()
        .map(|r| {
            vec![
                r.group.clone(),
                r.environment.clone(),
                r.runs.to_string(),
                r.participants.to_string(),
                r.runs_without_valid_score.to_string(),
                with_interval(&r.mean),
                with_interval(&r.median),
                percent(r.share_above_0),
                percent(r.share_at_least_1),
                optional(r.best, score),
                optional(r.scores_per_hour, |v| format!("{v:.1}")),
            ]
        })
        .collect();
    Section {
        title: "Final normalized scores".into(),
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

/// One row per group and environment, one column per time point.
fn timeline_section(report: &Report) -> Section {
    let mut headers = vec!["group".to_string(), "environment".to_string()];
    headers.extend(report.time_points_s.iter().map(|t| duration(*t)));
    let mut keys: Vec<(crate::session::Kind, &str, bool, &str)> = Vec::new();
    for row in &report.timeline {
        let key = (
            row.kind,
            row.group.as_str(),
            row.environment == OVERALL,
            row.environment.as_str(),
        );
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    // Environments first, the overall row last, per group.
    keys.sort();
    let rows = keys
        .into_iter()
        .map(|(_, group, _, environment)| {
            let mut cells = vec![group.to_string(), environment.to_string()];
            cells.extend(report.time_points_s.iter().map(|t| {
                report
                    .timeline
                    .iter()
                    .find(|r| r.group == group && r.environment == environment && r.time_s == *t)
                    // Each point says how many runs it stands on: a curve
                    // whose set of runs shrinks shows it.
                    .map_or_else(
                        || "-".to_string(),
                        |r| format!("{} n={}", with_interval(&r.mean), r.runs),
                    )
            }));
            cells
        })
        .collect();
    Section {
        title: "Score over active time (mean [CI], n runs; runs of budget >= t)".into(),
        headers,
        rows,
    }
}

fn split_label(split: &SplitEstimate) -> String {
    format!("{} x {}", split.k, duration(split.run_length_s))
}

fn best_of_k_section(report: &Report) -> Section {
    let headers = [
        "group",
        "budget",
        "best split",
        "score@budget [CI]",
        "runs",
        "splits tried",
    ];
    let rows = report
        .best_of_k
        .iter()
        .map(|row| {
            let tried: Vec<String> = row
                .splits
                .iter()
                .map(|s| match &s.estimate {
                    Some(e) => format!("{}: {}", split_label(s), score(e.value)),
                    None => format!(
                        "{}: too few runs {} {} in {}",
                        split_label(s),
                        if row.kind == crate::session::Kind::Agent {
                            "with a time limit of"
                        } else {
                            "with a budget of at least"
                        },
                        duration(s.run_length_s),
                        s.missing_environments.join(", ")
                    ),
                })
                .collect();
            let (label, value, runs) = match &row.best {
                Some(best) => (
                    split_label(best),
                    best.estimate.as_ref().map_or("-".into(), with_interval),
                    best.runs.to_string(),
                ),
                None => (
                    "-".into(),
                    "no split has runs long enough in every environment".into(),
                    "-".into(),
                ),
            };
            vec![
                row.group.clone(),
                duration(row.budget_s),
                label,
                value,
                runs,
                tried.join("; "),
            ]
        })
        .collect();
    Section {
        title: "score@budget (best of k runs of budget/k)".into(),
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

fn comparison_section(report: &Report) -> Section {
    let headers = [
        "budget",
        "agent",
        "human",
        "agent score",
        "agent/human [CI]",
        "environments",
    ];
    let side = |split: &Option<SplitEstimate>| match split {
        Some(s) => format!(
            "{} ({})",
            s.estimate.as_ref().map_or("-".into(), |e| score(e.value)),
            split_label(s)
        ),
        None => "-".into(),
    };
    let rows = report
        .comparison
        .iter()
        .map(|row| {
            let ratio = ratio_text(&row.ratio);
            vec![
                duration(row.budget_s),
                row.group.clone(),
                side(&row.human),
                side(&row.agent),
                ratio,
                row.environments.join(", "),
            ]
        })
        .collect();
    Section {
        title: "Agents vs humans (common environments)".into(),
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

fn ratio_text(ratio: &Option<super::model::RatioEstimate>) -> String {
    match ratio {
        Some(r) => format!(
            "{:.2}x [{}, {}]",
            r.value,
            optional(r.ci_low, |v| format!("{v:.2}")),
            optional(r.ci_high, |v| format!("{v:.2}"))
        ),
        None => "n/a".into(),
    }
}

fn best_agent_section(report: &Report) -> Section {
    let headers = [
        "budget",
        "best agent",
        "score@budget [CI]",
        "agent/human [CI]",
    ];
    let rows = report
        .best_agent
        .iter()
        .map(|row| {
            vec![
                duration(row.budget_s),
                row.group.clone(),
                format!(
                    "{} ({})",
                    row.agent
                        .estimate
                        .as_ref()
                        .map_or("-".into(), with_interval),
                    split_label(&row.agent)
                ),
                ratio_text(&row.ratio),
            ]
        })
        .collect();
    Section {
        title: "Best agent per budget (over the environments it shares with the humans)".into(),
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

fn cost_section(report: &Report) -> Section {
    let headers = [
        "group",
        "environment",
        "runs",
        "total",
        "per run",
        "per score point",
        "tokens in/out",
    ];
    let known = report.cost.iter().filter(|r| r.total_usd.is_some());
    let rows = known
        .map(|r| {
            vec![
                r.group.clone(),
                r.environment.clone(),
                r.runs.to_string(),
                optional(r.total_usd, dollars),
                optional(r.per_run_usd, dollars),
                optional(r.per_score_point_usd, dollars),
                if r.usage_events == 0 {
                    "-".to_string()
                } else {
                    format!("{}/{}", r.tokens_in, r.tokens_out)
                },
            ]
        })
        .collect();
    Section {
        title: "Cost (agents: usage events; humans: --human-rate)".into(),
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

fn aligned_table(section: &Section) -> String {
    let columns = section.headers.len();
    let mut widths: Vec<usize> = section.headers.iter().map(|h| h.chars().count()).collect();
    for row in &section.rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .take(columns)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        format!("  {}\n", padded.join("  ").trim_end())
    };
    let mut out = line(&section.headers);
    for row in &section.rows {
        out.push_str(&line(row));
    }
    out
}

fn markdown_table(section: &Section) -> String {
    let escape = |cell: &String| cell.replace('|', "\\|");
    let mut out = format!(
        "| {} |\n|{}|\n",
        section
            .headers
            .iter()
            .map(escape)
            .collect::<Vec<_>>()
            .join(" | "),
        section
            .headers
            .iter()
            .map(|_| "---")
            .collect::<Vec<_>>()
            .join("|")
    );
    for row in &section.rows {
        out.push_str(&format!(
            "| {} |\n",
            row.iter().map(escape).collect::<Vec<_>>().join(" | ")
        ));
    }
    out
}

pub(crate) fn duration(seconds: f64) -> String {
    if seconds.is_finite() && seconds >= 1.0 {
        format_duration(Duration::from_secs_f64(seconds.round()))
    } else {
        format!("{seconds:.1}s")
    }
}

fn score(value: f64) -> String {
    format!("{value:.3}")
}

fn with_interval(e: &Estimate) -> String {
    format!(
        "{} [{}, {}]",
        score(e.value),
        score(e.ci_low),
        score(e.ci_high)
    )
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

fn dollars(usd: f64) -> String {
    format!("${usd:.2}")
}

fn optional(value: Option<f64>, show: impl Fn(f64) -> String) -> String {
    value.map_or_else(|| "-".to_string(), show)
}
