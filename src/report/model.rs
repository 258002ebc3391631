//! What a report contains. These types are the `--format json` document
//! (field names are stable and documented in docs/report.md); the other
//! formats render the same values.

use serde::Serialize;

use super::stats::Estimate;
use crate::session::Kind;

/// Version tag of the JSON document; bumped when a field changes meaning or goes away.
pub const SCHEMA: &str = "rebench-report/2";
/// The `environment` of rows about all environments together.
pub const OVERALL: &str = "overall";
pub const NO_RUNS: &str = "no runs match";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub seed: u64,
    pub resamples: usize,
    pub confidence: f64,
    /// Total budgets for score@budget, seconds.
    pub budgets_s: Vec<f64>,
    pub human_rate_usd_per_hour: f64,
    /// How best-of-k is estimated: `with_replacement` (RE-Bench's) or
    /// `unbiased` (the mean over k-subsets without replacement).
    pub estimator: &'static str,
    /// Active times score-over-time is evaluated at, seconds.
    pub time_points_s: Vec<f64>,
    /// Started sessions that matched the filters.
    pub runs: usize,
    /// Set when there is nothing to report ("no runs match").
    pub message: Option<String>,
    /// Data-dependent caveats (runs counted as 0, environments using a random run...).
    pub notes: Vec<String>,
    pub summary: Vec<SummaryRow>,
    pub timeline: Vec<TimelineRow>,
    pub best_of_k: Vec<BestOfKRow>,
    pub comparison: Vec<ComparisonRow>,
    /// Per budget, the agent with the highest score@budget in the comparison.
    pub best_agent: Vec<BestAgentRow>,
    pub cost: Vec<CostRow>,
    /// The devices each run held (runs made before grants named devices
    /// have none: left out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hardware: Vec<HardwareRow>,
}

/// One run's devices, as its grant named them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HardwareRow {
    pub session: String,
    pub group: String,
    pub participant: String,
    pub environment: String,
    /// `GPU 1 (…), cores 2-3, 16 GB memory on local`.
    pub hardware: String,
}

/// Final scores of one kind of participant in one environment (or overall).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    pub kind: Kind,
    /// `human`, an agent's name, or `agent` (agent runs that name none).
    pub group: String,
    pub environment: String,
    pub runs: usize,
    pub participants: usize,
    /// Runs whose score log has no valid entry; they count as 0.
    pub runs_without_valid_score: usize,
    pub mean: Estimate,
    pub median: Estimate,
    pub share_above_0: f64,
    pub share_at_least_1: f64,
    /// Best final score; null when no run has a valid score.
    pub best: Option<f64>,
    /// Scoring-function runs the participants asked for (the starting score excluded).
    pub scoring_attempts: usize,
    pub active_hours: f64,
    /// scoring_attempts / active_hours; null with no active time.
    pub scores_per_hour: Option<f64>,
}

/// Mean score reached by active time `time_s`, over the runs of budget >= `time_s`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineRow {
    pub kind: Kind,
    /// `human`, an agent's name, or `agent` (agent runs that name none).
    pub group: String,
    pub environment: String,
    pub time_s: f64,
    pub runs: usize,
    /// Environments averaged (1 for an environment's own row).
    pub environments: usize,
    pub mean: Estimate,
}

/// score@k for one split of a total budget: k runs of `run_length_s`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SplitEstimate {
    pub k: u32,
    pub run_length_s: f64,
    /// Runs of budget >= run_length_s over the environments averaged.
    pub runs: usize,
    /// Environments with no run long enough: the split is not supported there.
    pub missing_environments: Vec<String>,
    /// Null when the split is not supported.
    pub estimate: Option<Estimate>,
}

/// score@budget of one kind of participant: the best supported split.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BestOfKRow {
    pub kind: Kind,
    /// `human`, an agent's name, or `agent` (agent runs that name none).
    pub group: String,
    pub budget_s: f64,
    pub environments: Vec<String>,
    /// Environments with hidden scores: a random run instead of the best of k.
    pub random_run_environments: Vec<String>,
    /// Null when no split is supported by every environment.
    pub best: Option<SplitEstimate>,
    pub splits: Vec<SplitEstimate>,
}

/// One agent against the humans at one total budget, over the environments both have.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonRow {
    pub budget_s: f64,
    /// The agent compared (its group).
    pub group: String,
    pub environments: Vec<String>,
    pub human: Option<SplitEstimate>,
    pub agent: Option<SplitEstimate>,
    /// agent / human score@budget; null when either is missing or the human one is 0.
    pub ratio: Option<RatioEstimate>,
}

/// The best agent at one total budget: the comparison row with the
/// highest agent score@budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BestAgentRow {
    pub budget_s: f64,
    pub group: String,
    pub environments: Vec<String>,
    pub agent: SplitEstimate,
    pub ratio: Option<RatioEstimate>,
}

/// A ratio with a bootstrap interval; a null bound is unbounded (resamples where
/// the human score was 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RatioEstimate {
    pub value: f64,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
}

/// What runs cost: agents from their `usage` events, humans at --human-rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostRow {
    pub kind: Kind,
    /// `human`, an agent's name, or `agent` (agent runs that name none).
    pub group: String,
    pub environment: String,
    pub runs: usize,
    /// "usage_events" (agents) or "hourly_rate" (humans).
    pub source: &'static str,
    /// Null when unknown: no usage events, or --human-rate 0.
    pub total_usd: Option<f64>,
    pub per_run_usd: Option<f64>,
    /// Sum of final normalized scores (invalid runs count 0).
    pub score_points: f64,
    /// total_usd / score_points; null when either is missing or the points are 0.
    pub per_score_point_usd: Option<f64>,
    pub usage_events: usize,
    pub tokens_in: u64,
    pub tokens_out: u64,
}
