//! A campaign as the store keeps it: its plan (every run it will make) and
//! whether it was stopped. Which session serves which run is not stored
//! here but on the session (`SessionMeta::campaign`), so the two can never
//! disagree: a run's state follows from its session.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::EndReason;

/// One planned run: an agent on an environment with a length, the n-th time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPlan {
    /// `agent/environment/length/attempt`, unique in its campaign.
    pub id: String,
    pub agent: String,
    pub environment: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    pub length_s: u64,
    pub attempt: u32,
}

/// What `campaign run` registers and the store keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignPlan {
    /// `[a-z0-9-]+`
    pub name: String,
    /// sha256 of what decides the runs (agents, environments, lengths,
    /// attempts, limits): a changed file cannot continue a campaign.
    pub spec_hash: String,
    /// The campaign file as read (it holds no keys: those are named, not given).
    pub source: String,
    pub file: String,
    pub concurrency: u32,
    pub runs: Vec<RunPlan>,
}

/// A stored campaign.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignRecord {
    pub plan: CampaignPlan,
    pub created_at: DateTime<Utc>,
    /// Set by `campaign stop`: no run starts after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<DateTime<Utc>>,
}

/// Where a run is (`status --json`'s `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// No session yet.
    Queued,
    /// Its session exists and has not ended (running, paused or not begun).
    Running,
    /// Its session ended by itself: submitted, out of time, tokens or money.
    Done,
    /// Its session was abandoned (a scaffold that failed, a stopped
    /// campaign) or ended by a proctor.
    Failed,
}

impl RunState {
    pub fn of_session(end_reason: Option<EndReason>) -> RunState {
        match end_reason {
            None => RunState::Running,
            Some(EndReason::Abandoned | EndReason::EndedByProctor) => RunState::Failed,
            Some(
                EndReason::Submitted
                | EndReason::BudgetExhausted
                | EndReason::TokenLimit
                | EndReason::CostLimit,
            ) => RunState::Done,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Done => "done",
            RunState::Failed => "failed",
        }
    }
}

/// Whether a campaign name is `[a-z0-9-]+` (at most 64 characters).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_fails_only_when_it_was_cut_short() {
        assert_eq!(RunState::of_session(None), RunState::Running);
        assert_eq!(
            RunState::of_session(Some(EndReason::TokenLimit)),
            RunState::Done
        );
        assert_eq!(
            RunState::of_session(Some(EndReason::Abandoned)),
            RunState::Failed
        );
    }

    #[test]
    fn names_are_lowercase_words_with_dashes() {
        assert!(valid_name("demo-2"));
        assert!(!valid_name("Demo"));
        assert!(!valid_name(""));
        assert!(!valid_name("a/b"));
    }
}
