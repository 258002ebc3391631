//! Tidy CSV: one number per row under one fixed header, so every section of
//! the report fits one file and new metrics never move columns.

use super::model::*;
use super::stats::Estimate;

/// The CSV header; stable (docs/report.md).
pub const CSV_HEADER: [&str; 12] = [
    "section",
    "kind",
    "group",
    "environment",
    "metric",
    "time_s",
    "k",
    "run_length_s",
    "runs",
    "value",
    "ci_low",
    "ci_high",
];

/// One CSV line before quoting; `None` cells are empty.
#[derive(Default)]
struct Line {
    section: &'static str,
    kind: String,
    group: String,
    environment: String,
    metric: &'static str,
    time_s: Option<f64>,
    k: Option<u32>,
    run_length_s: Option<f64>,
    runs: Option<usize>,
    value: Option<f64>,
    ci_low: Option<f64>,
    ci_high: Option<f64>,
}

impl Line {
    fn with_estimate(mut self, e: &Estimate) -> Line {
        self.value = Some(e.value);
        self.ci_low = Some(e.ci_low);
        self.ci_high = Some(e.ci_high);
        self
    }

    fn cells(&self) -> Vec<String> {
        let number = |v: Option<f64>| {
            v.filter(|v| v.is_finite())
                .map_or(String::new(), |v| v.to_string())
        };
        vec![
            self.section.to_string(),
            self.kind.clone(),
            self.group.clone(),
            self.environment.clone(),
            self.metric.to_string(),
            number(self.time_s),
            self.k.map_or(String::new(), |k| k.to_string()),
            number(self.run_length_s),
            self.runs.map_or(String::new(), |r| r.to_string()),
            number(self.value),
            number(self.ci_low),
            number(self.ci_high),
        ]
    }
}

pub fn render_csv(report: &Report) -> String {
    let mut lines = Vec::new();
    summary_lines(report, &mut lines);
    timeline_lines(report, &mut lines);
    best_of_k_lines(report, &mut lines);
    comparison_lines(report, &mut lines);
    cost_lines(report, &mut lines);
    let mut out = CSV_HEADER.join(",");
    out.push('\n');
    for line in lines {
        let cells: Vec<String> = line.cells().iter().map(|c| quote(c)).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

fn quote(cell: &str) -> String {
    if cell.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_string()
    }
}

fn summary_lines(report: &Report, out: &mut Vec<Line>) {
    for row in &report.summary {
        let base = || Line {
            section: "summary",
            kind: row.kind.as_str().into(),
            group: row.group.clone(),
            environment: row.environment.clone(),
            runs: Some(row.runs),
            ..Line::default()
        };
        let plain = |metric, value: Option<f64>| Line {
            metric,
            value,
            ..base()
        };
        out.push(plain("participants", Some(row.participants as f64)));
        out.push(plain(
            "runs_without_valid_score",
            Some(row.runs_without_valid_score as f64),
        ));
        out.push(
            Line {
                metric: "mean",
                ..base()
            }
            .with_estimate(&row.mean),
        );
        out.push(
            Line {
                metric: "median",
                ..base()
            }
            .with_estimate(&row.median),
        );
        out.push(plain("share_above_0", Some(row.share_above_0)));
        out.push(plain("share_at_least_1", Some(row.share_at_least_1)));
        out.push(plain("best", row.best));
        out.push(plain("scoring_attempts", Some(row.scoring_attempts as f64)));
        out.push(plain("active_hours", Some(row.active_hours)));
        out.push(plain("scores_per_hour", row.scores_per_hour));
    }
}

fn timeline_lines(report: &Report, out: &mut Vec<Line>) {
    for row in &report.timeline {
        out.push(
            Line {
                section: "timeline",
                kind: row.kind.as_str().into(),
                group: row.group.clone(),
                environment: row.environment.clone(),
                metric: "score_at_time",
                time_s: Some(row.time_s),
                runs: Some(row.runs),
                ..Line::default()
            }
            .with_estimate(&row.mean),
        );
    }
}

fn split_line(
    section: &'static str,
    (kind, group): (&str, &str),
    metric: &'static str,
    budget_s: f64,
    split: &SplitEstimate,
) -> Option<Line> {
    let estimate = split.estimate.as_ref()?;
    Some(
        Line {
            section,
            kind: kind.into(),
            group: group.into(),
            environment: OVERALL.into(),
            metric,
            time_s: Some(budget_s),
            k: Some(split.k),
            run_length_s: Some(split.run_length_s),
            runs: Some(split.runs),
            ..Line::default()
        }
        .with_estimate(estimate),
    )
}

fn best_of_k_lines(report: &Report, out: &mut Vec<Line>) {
    for row in &report.best_of_k {
        let kind = (row.kind.as_str(), row.group.as_str());
        if let Some(line) = row
            .best
            .as_ref()
            .and_then(|b| split_line("best_of_k", kind, "score_at_budget", row.budget_s, b))
        {
            out.push(line);
        }
        for split in &row.splits {
            if let Some(line) = split_line("best_of_k", kind, "split_score", row.budget_s, split) {
                out.push(line);
            }
        }
    }
}

fn comparison_lines(report: &Report, out: &mut Vec<Line>) {
    for row in &report.comparison {
        let sides = [
            (("human", "human"), &row.human),
            (("agent", row.group.as_str()), &row.agent),
        ];
        for (kind, side) in sides {
            if let Some(line) = side
                .as_ref()
                .and_then(|s| split_line("comparison", kind, "score_at_budget", row.budget_s, s))
            {
                out.push(line);
            }
        }
        if let Some(ratio) = &row.ratio {
            out.push(Line {
                section: "comparison",
                kind: "agent/human".into(),
                group: row.group.clone(),
                environment: OVERALL.into(),
                metric: "ratio",
                time_s: Some(row.budget_s),
                value: Some(ratio.value),
                ci_low: ratio.ci_low,
                ci_high: ratio.ci_high,
                ..Line::default()
            });
        }
    }
}

fn cost_lines(report: &Report, out: &mut Vec<Line>) {
    for row in &report.cost {
        let line = |metric, value: Option<f64>| Line {
            section: "cost",
            kind: row.kind.as_str().into(),
            group: row.group.clone(),
            environment: row.environment.clone(),
            metric,
            runs: Some(row.runs),
            value,
            ..Line::default()
        };
        out.push(line("total_usd", row.total_usd));
        out.push(line("per_run_usd", row.per_run_usd));
        out.push(line("per_score_point_usd", row.per_score_point_usd));
        out.push(line("score_points", Some(row.score_points)));
        out.push(line("usage_events", Some(row.usage_events as f64)));
        out.push(line("tokens_in", Some(row.tokens_in as f64)));
        out.push(line("tokens_out", Some(row.tokens_out as f64)));
    }
}
