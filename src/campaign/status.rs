//! `campaign status`: a campaign's runs as a table with a progress bar.

use std::time::Duration;

use crate::environment::duration::format_duration;
use crate::protocol::{CampaignView, RunView};
use crate::session::campaign::RunState;

const BAR_WIDTH: usize = 30;

/// The final (or best so far) normalized score of a run, or `-`.
pub fn final_text(run: &RunView) -> String {
    match run.final_score {
        Some(f) => format!("{:.3}", f.normalized),
        None => "-".into(),
    }
}

/// Time until every run is done, were the runner to go on at its
/// concurrency: what the running runs have left plus the queued lengths.
pub fn eta(view: &CampaignView) -> Option<Duration> {
    if view.stopped_at.is_some() || !view.runner {
        return None;
    }
    let left: f64 = view
        .runs
        .iter()
        .map(|r| match r.state {
            RunState::Running => (r.length_s as f64 - r.active_s).max(0.0),
            RunState::Queued => r.length_s as f64,
            RunState::Done | RunState::Failed => 0.0,
        })
        .sum();
    let lanes = view.concurrency.max(1) as f64;
    Some(Duration::from_secs_f64(left / lanes))
}

pub fn table(view: &CampaignView) -> String {
    let total = view.runs.len().max(1);
    let finished = view.counts.done + view.counts.failed;
    let filled = finished * BAR_WIDTH / total;
    let mut out = format!(
        "campaign {}  ({})  runner: {}{}\n",
        view.name,
        view.file,
        if view.runner { "running" } else { "none" },
        match view.stopped_at {
            Some(at) => format!("  stopped {}", at.format("%Y-%m-%d %H:%M:%S UTC")),
            None => String::new(),
        }
    );
    out.push_str(&format!(
        "[{}{}] {finished}/{} finished: {} done, {} failed, {} running, {} queued  tokens {}/{}  cost ${:.2}",
        "#".repeat(filled),
        ".".repeat(BAR_WIDTH - filled),
        view.runs.len(),
        view.counts.done,
        view.counts.failed,
        view.counts.running,
        view.counts.queued,
        view.tokens_in,
        view.tokens_out,
        view.cost
    ));
    if let Some(eta) = eta(view).filter(|_| finished < view.runs.len()) {
        out.push_str(&format!("  ETA {}", format_duration(eta)));
    }
    out.push('\n');
    let width = view
        .runs
        .iter()
        .map(|r| r.id.len())
        .max()
        .unwrap_or(3)
        .max(3);
    out.push_str(&format!(
        "{:<width$}  {:<8} {:<14} {:>7} {:>17} {:>9}  NOTE\n",
        "RUN", "STATE", "SESSION", "SCORE", "TOKENS IN/OUT", "COST"
    ));
    for run in &view.runs {
        let note = match (run.state, &run.failure, run.pause_reason, run.end_reason) {
            (RunState::Failed, Some(why), _, _) => why.clone(),
            (RunState::Running, _, Some(reason), _) => format!("paused: {}", reason.label()),
            (RunState::Done, _, _, Some(reason)) => reason.label(),
            _ => String::new(),
        };
        out.push_str(&format!(
            "{:<width$}  {:<8} {:<14} {:>7} {:>17} {:>9}  {}\n",
            run.id,
            run.state.as_str(),
            run.session.as_deref().unwrap_or("-"),
            final_text(run),
            format!("{}/{}", run.tokens_in, run.tokens_out),
            format!("${:.3}", run.cost),
            crate::command_line::printable(&note)
        ));
    }
    out
}
