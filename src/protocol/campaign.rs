//! What the server says about a campaign: its runs joined with their sessions.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{FinalScore, SessionView};
use crate::session::campaign::{CampaignRecord, RunPlan, RunState};
use crate::session::{EndReason, PauseReason, Phase};

/// One run of a campaign (`campaign status --json`'s `runs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    pub id: String,
    pub session: Option<String>,
    /// The agent's name.
    pub agent: String,
    pub environment: String,
    #[serde(default)]
    pub profile: Option<String>,
    /// As in the campaign file: `30m`, `2h`.
    pub length: String,
    pub length_s: u64,
    pub attempt: u32,
    pub state: RunState,
    /// Its session's phase (`paused` with `pause_reason` while an outage lasts).
    #[serde(default)]
    pub phase: Option<Phase>,
    #[serde(default)]
    pub pause_reason: Option<PauseReason>,
    #[serde(default)]
    pub end_reason: Option<EndReason>,
    /// Why it failed (the end note of an abandoned session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(rename = "final")]
    pub final_score: Option<FinalScore>,
    /// The session's active (budget-counted) time so far.
    #[serde(default)]
    pub active_s: f64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// USD.
    pub cost: f64,
}

impl RunView {
    pub fn new(plan: &RunPlan, session: Option<&SessionView>) -> RunView {
        let state = match session {
            None => RunState::Queued,
            Some(view) => RunState::of_session(view.end_reason),
        };
        RunView {
            id: plan.id.clone(),
            session: session.map(|s| s.id.clone()),
            agent: plan.agent.clone(),
            environment: plan.environment.clone(),
            profile: plan.profile.clone(),
            length: crate::environment::duration::format_duration(std::time::Duration::from_secs(
                plan.length_s,
            )),
            length_s: plan.length_s,
            attempt: plan.attempt,
            state,
            phase: session.map(|s| s.state),
            pause_reason: session.and_then(|s| s.pause_reason),
            end_reason: session.and_then(|s| s.end_reason),
            failure: session.filter(|_| state == RunState::Failed).map(|s| {
                s.end_note
                    .clone()
                    .unwrap_or_else(|| s.end_reason.map(|r| r.label()).unwrap_or_default())
            }),
            final_score: session.and_then(|s| s.final_score),
            active_s: session.map_or(0.0, |s| s.active_s),
            tokens_in: session.map_or(0, |s| s.usage.tokens_in),
            tokens_out: session.map_or(0, |s| s.usage.tokens_out),
            cost: session.map_or(0.0, |s| s.usage.cost_usd),
        }
    }
}

/// How many runs are in each state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunCounts {
    pub queued: usize,
    pub running: usize,
    pub done: usize,
    pub failed: usize,
}

/// A campaign and its runs (reply to `campaign_open`, `campaign_show`,
/// `campaign_stop`; `campaign_list` gives a list of them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignView {
    pub name: String,
    pub file: String,
    pub created_at: DateTime<Utc>,
    pub stopped_at: Option<DateTime<Utc>>,
    pub concurrency: u32,
    /// Whether a `campaign run` process is connected and running it.
    pub runner: bool,
    pub counts: RunCounts,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cost: f64,
    pub runs: Vec<RunView>,
}

impl CampaignView {
    /// `sessions` are the campaign's sessions (any order; others are ignored).
    pub fn new(record: &CampaignRecord, sessions: &[SessionView], runner: bool) -> CampaignView {
        let name = &record.plan.name;
        // Each run's session, looked up once rather than searched per run.
        let by_run: std::collections::HashMap<&str, &SessionView> = sessions
            .iter()
            .filter_map(|s| {
                let c = s.campaign.as_ref().filter(|c| &c.campaign == name)?;
                Some((c.run.as_str(), s))
            })
            .collect();
        let runs: Vec<RunView> = record
            .plan
            .runs
            .iter()
            .map(|plan| RunView::new(plan, by_run.get(plan.id.as_str()).copied()))
            .collect();
        let mut counts = RunCounts::default();
        for run in &runs {
            *match run.state {
                RunState::Queued => &mut counts.queued,
                RunState::Running => &mut counts.running,
                RunState::Done => &mut counts.done,
                RunState::Failed => &mut counts.failed,
            } += 1;
        }
        CampaignView {
            name: name.clone(),
            file: record.plan.file.clone(),
            created_at: record.created_at,
            stopped_at: record.stopped_at,
            concurrency: record.plan.concurrency,
            runner,
            counts,
            tokens_in: runs.iter().map(|r| r.tokens_in).sum(),
            tokens_out: runs.iter().map(|r| r.tokens_out).sum(),
            cost: runs.iter().map(|r| r.cost).sum(),
            runs,
        }
    }
}
