//! From runs to a [`Report`]: groups runs by kind and environment, lays out
//! the quantities to bootstrap, runs the bootstrap and assembles the rows.

use std::collections::{BTreeMap, BTreeSet};

use super::best_of_k::{Split, candidate_splits};
use super::bootstrap::{BootstrapOutcome, Column, Sampled, Statistic, Stratum, run_bootstrap};
use super::model::*;
use super::runs::Run;
use super::stats::{CONFIDENCE, Estimate, labelled_rng, percentile};
use super::timeline::{ScoreTimeline, time_grid};
use crate::session::Kind;

/// Everything that shapes the numbers, besides the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportOptions {
    pub seed: u64,
    pub resamples: usize,
    pub budgets_s: Vec<f64>,
    pub human_rate_usd_per_hour: f64,
    /// The standard length of a human run: larger human budgets are
    /// best-of-k over runs of this length.
    pub human_run_length_s: f64,
    pub estimator: Estimator,
}

/// How best-of-k is estimated from n runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Estimator {
    // Plain comments: described values would switch `report --help` to
    // clap's long form (`--estimator` says what each is).
    // RE-Bench's: the expected best of k runs drawn with replacement
    // (biased low for small n: a run can be drawn twice).
    #[default]
    WithReplacement,
    // The mean best over every k-subset of the n runs (needs n >= k).
    Unbiased,
}

impl Estimator {
    pub fn as_str(&self) -> &'static str {
        match self {
            Estimator::WithReplacement => "with_replacement",
            Estimator::Unbiased => "unbiased",
        }
    }
}

/// "Matched the reference" allows for rounding in the normalization.
const REFERENCE_TOLERANCE: f64 = 1e-9;
// Columns every stratum has, first.
const FINAL_COLUMN: usize = 0;

pub fn build_report(runs: &[Run], options: &ReportOptions) -> Report {
    let longest_budget_s = runs.iter().map(|r| r.budget_s).fold(0.0, f64::max);
    let mut report = Report {
        schema: SCHEMA,
        seed: options.seed,
        resamples: options.resamples,
        confidence: CONFIDENCE,
        budgets_s: options.budgets_s.clone(),
        human_rate_usd_per_hour: options.human_rate_usd_per_hour,
        time_points_s: time_grid(longest_budget_s),
        runs: runs.len(),
        message: runs.is_empty().then(|| NO_RUNS.to_string()),
        notes: Vec::new(),
        summary: Vec::new(),
        timeline: Vec::new(),
        best_of_k: Vec::new(),
        comparison: Vec::new(),
        best_agent: Vec::new(),
        cost: Vec::new(),
        estimator: options.estimator.as_str(),
        hardware: runs
            .iter()
            .filter_map(|run| {
                Some(HardwareRow {
                    session: run.id.clone(),
                    group: run.group().to_string(),
                    participant: run.participant.clone(),
                    environment: run.environment.clone(),
                    hardware: run.hardware.clone()?,
                })
            })
            .collect(),
    };
    // Humans first, then each agent by name (Kind orders humans first).
    let mut by_group: BTreeMap<(Kind, &str), Vec<&Run>> = BTreeMap::new();
    for run in runs {
        by_group
            .entry((run.kind, run.group()))
            .or_default()
            .push(run);
    }
    let groups: Vec<GroupAnalysis> = by_group
        .into_iter()
        .map(|((kind, group), of_group)| {
            GroupAnalysis::new(kind, group, of_group, &report.time_points_s, options)
        })
        .collect();
    for group in &groups {
        group.summary_rows(&mut report.summary);
        group.timeline_rows(&report.time_points_s, &mut report.timeline);
        for budget_s in &options.budgets_s {
            report.best_of_k.push(group.best_of_k_row(*budget_s));
        }
        group.cost_rows(options.human_rate_usd_per_hour, &mut report.cost);
    }
    if let Some(humans) = groups.iter().find(|g| g.kind == Kind::Human) {
        for budget_s in &options.budgets_s {
            let rows: Vec<ComparisonRow> = groups
                .iter()
                .filter(|g| g.kind == Kind::Agent)
                .map(|agents| comparison_row(humans, agents, *budget_s))
                .collect();
            if let Some(best) = best_agent(&rows) {
                report.best_agent.push(best);
            }
            report.comparison.extend(rows);
        }
    }
    report.notes = notes(runs, &groups);
    if !runs.is_empty() && report.cost.iter().all(|c| c.total_usd.is_none()) {
        report.notes.push(
            "no cost shown: agents reported no usage events and --human-rate is 0".to_string(),
        );
    }
    report
}

fn notes(runs: &[Run], kinds: &[GroupAnalysis]) -> Vec<String> {
    let mut notes = Vec::new();
    let without = runs.iter().filter(|r| r.final_score.is_none()).count();
    if without == runs.len() && !runs.is_empty() {
        notes.push(format!(
            "no valid scores: none of the {without} runs has a valid score-log entry; they count as 0"
        ));
    } else if without > 0 {
        notes.push(format!(
            "{without} run(s) without a valid score count as 0 in means and shares"
        ));
    }
    let hidden: BTreeSet<&str> = kinds
        .iter()
        .flat_map(|k| k.envs.iter().filter(|e| e.hidden))
        .map(|e| e.environment.as_str())
        .collect();
    if !hidden.is_empty() {
        let list: Vec<&str> = hidden.into_iter().collect();
        notes.push(format!(
            "hidden scores in {}: best-of-k uses a random run there",
            list.join(", ")
        ));
    }
    let extended: Vec<&Run> = runs.iter().filter(|r| r.extended_s > 0.0).collect();
    if !extended.is_empty() {
        let total: f64 = extended.iter().map(|r| r.extended_s).sum();
        notes.push(format!(
            "{} run(s) extended, {} in all: compared at their original budgets",
            extended.len(),
            crate::environment::duration::format_duration(std::time::Duration::from_secs_f64(
                total
            ))
        ));
    }
    let raw: BTreeSet<&str> = runs
        .iter()
        .filter(|r| r.unnormalized)
        .map(|r| r.environment.as_str())
        .collect();
    if !raw.is_empty() {
        let list: Vec<&str> = raw.into_iter().collect();
        notes.push(format!(
            "UNNORMALIZED: {} report raw scores in their own units (no starting and reference given); \
             their figures, and the means over environments that include them, are not on the 0-1 scale",
            list.join(", ")
        ));
    }
    let running = runs.iter().filter(|r| !r.ended).count();
    if running > 0 {
        notes.push(format!(
            "{running} run(s) still in progress: counted with their score so far; over time only up to their active time"
        ));
    }
    notes
}

/// The runs of one environment for one kind of participant.
struct EnvPart<'a> {
    environment: String,
    hidden: bool,
    runs: Vec<&'a Run>,
    /// `(column, statistic)` of the mean at each time point (None: no run covers it).
    timeline_slots: Vec<Option<(usize, usize)>>,
    /// Per split run length (see `GroupAnalysis::lengths`): for each of
    /// that length's k's, its `(column, statistic)` (None: too few runs).
    length_slots: Vec<Option<Vec<Option<Slot>>>>,
}

/// Where a statistic lands: `(column, statistic)`.
type Slot = (usize, usize);

/// The runs of one group: the humans, or one agent.
struct GroupAnalysis<'a> {
    kind: Kind,
    group: String,
    human_run_length_s: f64,
    envs: Vec<EnvPart<'a>>,
    /// Distinct split run lengths and the k's used with each.
    lengths: Vec<(f64, Vec<u32>)>,
    outcome: BootstrapOutcome,
}

impl<'a> GroupAnalysis<'a> {
    fn new(
        kind: Kind,
        group: &str,
        runs: Vec<&'a Run>,
        time_points_s: &[f64],
        options: &ReportOptions,
    ) -> Self {
        let mut by_env: BTreeMap<&str, Vec<&'a Run>> = BTreeMap::new();
        for run in runs.iter().copied() {
            by_env
                .entry(run.environment.as_str())
                .or_default()
                .push(run);
        }
        let lengths = split_lengths(kind, &runs, options);
        let mut envs = Vec::new();
        let mut strata = Vec::new();
        for (environment, env_runs) in by_env {
            let layout = Layout {
                time_points_s,
                lengths: &lengths,
                exact_lengths: kind == Kind::Agent,
                estimator: options.estimator,
            };
            let (part, columns) = lay_out_columns(environment, env_runs, &layout);
            let label = format!("{group}/{environment}");
            strata.push(Stratum {
                columns,
                rng: labelled_rng(options.seed, &label),
            });
            envs.push(part);
        }
        let outcome = run_bootstrap(strata, options.resamples, Some(FINAL_COLUMN));
        GroupAnalysis {
            kind,
            group: group.to_string(),
            human_run_length_s: options.human_run_length_s,
            envs,
            lengths,
            outcome,
        }
    }

    fn sampled(&self, env: usize, column: usize, statistic: usize) -> &Sampled {
        &self.outcome.strata[env][column][statistic]
    }

    fn summary_rows(&self, out: &mut Vec<SummaryRow>) {
        for (index, env) in self.envs.iter().enumerate() {
            let mean = estimate(self.sampled(index, FINAL_COLUMN, 0));
            let median = estimate(self.sampled(index, FINAL_COLUMN, 1));
            out.push(summary_row(
                self.kind,
                &self.group,
                &env.environment,
                &env.runs,
                mean,
                median,
            ));
        }
        if let Some((mean, median)) = &self.outcome.pooled {
            let all: Vec<&Run> = self.envs.iter().flat_map(|e| e.runs.clone()).collect();
            out.push(summary_row(
                self.kind,
                &self.group,
                OVERALL,
                &all,
                estimate(mean),
                estimate(median),
            ));
        }
    }

    fn timeline_rows(&self, time_points_s: &[f64], out: &mut Vec<TimelineRow>) {
        for (t_index, time_s) in time_points_s.iter().enumerate() {
            let mut parts = Vec::new();
            let mut runs = 0;
            for (index, env) in self.envs.iter().enumerate() {
                let Some((column, statistic)) = env.timeline_slots[t_index] else {
                    continue;
                };
                let sampled = self.sampled(index, column, statistic);
                let covering = env.runs.iter().filter(|r| r.covers(*time_s)).count();
                runs += covering;
                parts.push(sampled);
                out.push(TimelineRow {
                    kind: self.kind,
                    group: self.group.clone(),
                    environment: env.environment.clone(),
                    time_s: *time_s,
                    runs: covering,
                    environments: 1,
                    mean: estimate(sampled),
                });
            }
            if let Some(average) = average_of(&parts) {
                out.push(TimelineRow {
                    kind: self.kind,
                    group: self.group.clone(),
                    environment: OVERALL.to_string(),
                    time_s: *time_s,
                    runs,
                    environments: parts.len(),
                    mean: estimate(&average),
                });
            }
        }
    }

    /// score@k of one split averaged over `envs` (indices), with its samples.
    fn split_estimate(&self, split: Split, envs: &[usize]) -> (SplitEstimate, Option<Sampled>) {
        let length = self
            .lengths
            .iter()
            .position(|(l, _)| *l == split.run_length_s);
        let mut parts = Vec::new();
        let mut missing = Vec::new();
        let mut runs = 0;
        for &index in envs {
            let env = &self.envs[index];
            let slot = length.and_then(|l| {
                let slots = env.length_slots[l].as_ref()?;
                let k_index = self.lengths[l].1.iter().position(|k| *k == split.k)?;
                *slots.get(k_index)?
            });
            match slot {
                Some((column, statistic)) => {
                    parts.push(self.sampled(index, column, statistic));
                    runs += env
                        .runs
                        .iter()
                        .filter(|r| eligible(r, split.run_length_s, self.kind == Kind::Agent))
                        .count();
                }
                None => missing.push(env.environment.clone()),
            }
        }
        let average = if missing.is_empty() {
            average_of(&parts)
        } else {
            None
        };
        let row = SplitEstimate {
            k: split.k,
            run_length_s: split.run_length_s,
            runs,
            missing_environments: missing,
            estimate: average.as_ref().map(estimate),
        };
        (row, average)
    }

    /// The best supported split of `budget_s` over `envs`, and every split tried.
    fn best_split(
        &self,
        budget_s: f64,
        envs: &[usize],
    ) -> (Option<(SplitEstimate, Sampled)>, Vec<SplitEstimate>) {
        let mut best: Option<(SplitEstimate, Sampled)> = None;
        let mut all = Vec::new();
        for split in self.splits_for(budget_s) {
            let (row, samples) = self.split_estimate(split, envs);
            if let (Some(estimate), Some(samples)) = (row.estimate, samples) {
                // Ties go to the later split: fewer, longer runs.
                let better = best.as_ref().is_none_or(|(_, b)| estimate.value >= b.point);
                if better {
                    best = Some((row.clone(), samples));
                }
            }
            all.push(row);
        }
        (best, all)
    }

    fn splits_for(&self, budget_s: f64) -> Vec<Split> {
        let budgets: Vec<f64> = self
            .envs
            .iter()
            .flat_map(|e| e.runs.iter())
            .map(|r| r.budget_s)
            .collect();
        candidate_splits(
            budget_s,
            &budgets,
            run_cap(self.kind, self.human_run_length_s),
        )
    }

    fn best_of_k_row(&self, budget_s: f64) -> BestOfKRow {
        let envs: Vec<usize> = (0..self.envs.len()).collect();
        let (best, splits) = self.best_split(budget_s, &envs);
        BestOfKRow {
            kind: self.kind,
            group: self.group.clone(),
            budget_s,
            environments: self.envs.iter().map(|e| e.environment.clone()).collect(),
            random_run_environments: self
                .envs
                .iter()
                .filter(|e| e.hidden)
                .map(|e| e.environment.clone())
                .collect(),
            best: best.map(|(row, _)| row),
            splits,
        }
    }

    fn env_index(&self, environment: &str) -> Option<usize> {
        self.envs.iter().position(|e| e.environment == environment)
    }

    fn cost_rows(&self, human_rate: f64, out: &mut Vec<CostRow>) {
        for env in &self.envs {
            out.push(cost_row(
                self.kind,
                &self.group,
                &env.environment,
                &env.runs,
                human_rate,
            ));
        }
        let all: Vec<&Run> = self.envs.iter().flat_map(|e| e.runs.clone()).collect();
        out.push(cost_row(self.kind, &self.group, OVERALL, &all, human_rate));
    }
}

fn run_cap(kind: Kind, human_run_length_s: f64) -> Option<f64> {
    (kind == Kind::Human).then_some(human_run_length_s)
}

/// Distinct run lengths over every budget's candidate splits, with their k's.
fn split_lengths(kind: Kind, runs: &[&Run], options: &ReportOptions) -> Vec<(f64, Vec<u32>)> {
    let run_budgets: Vec<f64> = runs.iter().map(|r| r.budget_s).collect();
    let mut lengths: Vec<(f64, Vec<u32>)> = Vec::new();
    for budget_s in &options.budgets_s {
        let cap = run_cap(kind, options.human_run_length_s);
        for split in candidate_splits(*budget_s, &run_budgets, cap) {
            match lengths.iter_mut().find(|(l, _)| *l == split.run_length_s) {
                Some((_, ks)) if ks.contains(&split.k) => {}
                Some((_, ks)) => ks.push(split.k),
                None => lengths.push((split.run_length_s, vec![split.k])),
            }
        }
    }
    lengths
}

/// The columns of one stratum. A quantity already laid out (same runs, same
/// values: e.g. the score at 2 h and the 2-hour split) is bootstrapped once.
#[derive(Default)]
struct ColumnSet {
    columns: Vec<Column>,
}

impl ColumnSet {
    /// Adds `statistic` of a quantity; returns where it lands: `(column, statistic)`.
    fn add(
        &mut self,
        members: Vec<usize>,
        values: Vec<f64>,
        statistic: Statistic,
    ) -> (usize, usize) {
        // The best of one run is a random run: the mean.
        let statistic = match statistic {
            Statistic::BestOfK(1) | Statistic::BestOfKUnbiased(1) => Statistic::Mean,
            other => other,
        };
        let existing = self
            .columns
            .iter()
            .position(|c| c.members == members && c.values == values);
        let column = existing.unwrap_or_else(|| {
            self.columns.push(Column {
                members,
                values,
                statistics: Vec::new(),
            });
            self.columns.len() - 1
        });
        let statistics = &mut self.columns[column].statistics;
        let index = statistics
            .iter()
            .position(|s| *s == statistic)
            .unwrap_or_else(|| {
                statistics.push(statistic);
                statistics.len() - 1
            });
        (column, index)
    }
}

/// What shapes a stratum's columns besides its runs.
struct Layout<'t> {
    time_points_s: &'t [f64],
    lengths: &'t [(f64, Vec<u32>)],
    /// Agents: a split of run length L uses runs whose budget was L (an
    /// agent told it has 8 h works differently from one told 30 min).
    /// Humans: runs of budget >= L, seen at L (RE-Bench's rule).
    exact_lengths: bool,
    estimator: Estimator,
}

/// Whether a run counts for a split of run length `length_s`.
fn eligible(run: &Run, length_s: f64, exact: bool) -> bool {
    if exact {
        (run.budget_s - length_s).abs() < 0.5 && (run.ended || run.active_s + 1e-6 >= length_s)
    } else {
        run.covers(length_s)
    }
}

fn lay_out_columns<'a>(
    environment: &str,
    runs: Vec<&'a Run>,
    layout: &Layout,
) -> (EnvPart<'a>, Vec<Column>) {
    let hidden = runs.iter().any(|r| !r.visible);
    let timelines: Vec<ScoreTimeline> = runs
        .iter()
        .map(|r| ScoreTimeline::from_scores(&r.scores, r.aggregate))
        .collect();
    let mut set = ColumnSet::default();
    let all: Vec<usize> = (0..runs.len()).collect();
    let finals: Vec<f64> = runs.iter().map(|r| r.final_or_zero()).collect();
    // FINAL_COLUMN: mean, then median.
    set.add(all.clone(), finals.clone(), Statistic::Mean);
    set.add(all, finals, Statistic::Median);
    // The score at active time t of every run `counts` says is in.
    let at_time = |t: f64, counts: &dyn Fn(&Run) -> bool| -> Option<(Vec<usize>, Vec<f64>)> {
        let members: Vec<usize> = (0..runs.len()).filter(|i| counts(runs[*i])).collect();
        let values = members.iter().map(|i| timelines[*i].value_at(t)).collect();
        (!members.is_empty()).then_some((members, values))
    };
    let timeline_slots = layout
        .time_points_s
        .iter()
        .map(|t| {
            let (members, values) = at_time(*t, &|r| r.covers(*t))?;
            Some(set.add(members, values, Statistic::Mean))
        })
        .collect();
    let length_slots = layout
        .lengths
        .iter()
        .map(|(length, ks)| {
            let (members, values) =
                at_time(*length, &|r| eligible(r, *length, layout.exact_lengths))?;
            let slots = ks
                .iter()
                .map(|k| {
                    // Hidden scores: nobody can pick the best of k, so a random run.
                    let statistic = match (hidden, layout.estimator) {
                        (true, _) => Statistic::Mean,
                        (false, Estimator::WithReplacement) => Statistic::BestOfK(*k),
                        (false, Estimator::Unbiased) => {
                            if members.len() < *k as usize {
                                return None;
                            }
                            Statistic::BestOfKUnbiased(*k)
                        }
                    };
                    Some(set.add(members.clone(), values.clone(), statistic))
                })
                .collect();
            Some(slots)
        })
        .collect();
    let part = EnvPart {
        environment: environment.to_string(),
        hidden,
        runs,
        timeline_slots,
        length_slots,
    };
    (part, set.columns)
}

fn estimate(sampled: &Sampled) -> Estimate {
    Estimate::from_samples(sampled.point, &sampled.resamples)
}

/// The equal-weight average of environments, resample by resample.
fn average_of(parts: &[&Sampled]) -> Option<Sampled> {
    let first = parts.first()?;
    let count = parts.len() as f64;
    let point = parts.iter().map(|p| p.point).sum::<f64>() / count;
    let resamples = (0..first.resamples.len())
        .map(|b| parts.iter().map(|p| p.resamples[b]).sum::<f64>() / count)
        .collect();
    Some(Sampled { point, resamples })
}

fn summary_row(
    kind: Kind,
    group: &str,
    environment: &str,
    runs: &[&Run],
    mean: Estimate,
    median: Estimate,
) -> SummaryRow {
    let count = runs.len();
    let share = |pred: &dyn Fn(f64) -> bool| {
        runs.iter().filter(|r| pred(r.final_or_zero())).count() as f64 / count.max(1) as f64
    };
    let participants: BTreeSet<&str> = runs.iter().map(|r| r.participant.as_str()).collect();
    let scoring_attempts = runs.iter().map(|r| r.scoring_attempts()).sum();
    let active_hours = runs.iter().map(|r| r.active_s).sum::<f64>() / 3600.0;
    SummaryRow {
        kind,
        group: group.to_string(),
        environment: environment.to_string(),
        runs: count,
        participants: participants.len(),
        runs_without_valid_score: runs.iter().filter(|r| r.final_score.is_none()).count(),
        mean,
        median,
        share_above_0: share(&|s| s > 0.0),
        share_at_least_1: share(&|s| s >= 1.0 - REFERENCE_TOLERANCE),
        best: runs.iter().filter_map(|r| r.final_score).reduce(f64::max),
        scoring_attempts,
        active_hours,
        scores_per_hour: (active_hours > 0.0).then(|| scoring_attempts as f64 / active_hours),
    }
}

fn cost_row(kind: Kind, group: &str, environment: &str, runs: &[&Run], human_rate: f64) -> CostRow {
    let usage_events: usize = runs.iter().map(|r| r.usage.events).sum();
    let active_hours = runs.iter().map(|r| r.active_s).sum::<f64>() / 3600.0;
    let (source, total_usd) = match kind {
        Kind::Agent => (
            "usage_events",
            (usage_events > 0).then(|| runs.iter().map(|r| r.usage.cost_usd).sum::<f64>()),
        ),
        Kind::Human => (
            "hourly_rate",
            (human_rate > 0.0).then_some(human_rate * active_hours),
        ),
    };
    let score_points: f64 = runs.iter().map(|r| r.final_or_zero()).sum();
    CostRow {
        kind,
        group: group.to_string(),
        environment: environment.to_string(),
        runs: runs.len(),
        source,
        total_usd,
        per_run_usd: total_usd.map(|t| t / runs.len().max(1) as f64),
        score_points,
        per_score_point_usd: total_usd
            .filter(|_| score_points > 0.0)
            .map(|t| t / score_points),
        usage_events,
        tokens_in: runs.iter().map(|r| r.usage.tokens_in).sum(),
        tokens_out: runs.iter().map(|r| r.usage.tokens_out).sum(),
    }
}

fn comparison_row(humans: &GroupAnalysis, agents: &GroupAnalysis, budget_s: f64) -> ComparisonRow {
    let common: Vec<String> = humans
        .envs
        .iter()
        .map(|e| e.environment.clone())
        .filter(|e| agents.env_index(e).is_some())
        .collect();
    let indices = |kind: &GroupAnalysis| -> Vec<usize> {
        common.iter().filter_map(|e| kind.env_index(e)).collect()
    };
    let (human, _) = if common.is_empty() {
        (None, Vec::new())
    } else {
        humans.best_split(budget_s, &indices(humans))
    };
    let (agent, _) = if common.is_empty() {
        (None, Vec::new())
    } else {
        agents.best_split(budget_s, &indices(agents))
    };
    let ratio = match (&human, &agent) {
        (Some((_, h)), Some((_, a))) if h.point > 0.0 => Some(ratio_estimate(a, h)),
        _ => None,
    };
    ComparisonRow {
        budget_s,
        group: agents.group.clone(),
        environments: common,
        human: human.map(|(row, _)| row),
        agent: agent.map(|(row, _)| row),
        ratio,
    }
}

/// The comparison row whose agent scores highest at its budget (ties: the
/// first by name).
fn best_agent(rows: &[ComparisonRow]) -> Option<BestAgentRow> {
    let mut best: Option<(&ComparisonRow, &SplitEstimate, f64)> = None;
    for row in rows {
        let Some(agent) = &row.agent else { continue };
        let Some(value) = agent.estimate.map(|e| e.value) else {
            continue;
        };
        if best.is_none_or(|(_, _, b)| value > b) {
            best = Some((row, agent, value));
        }
    }
    best.map(|(row, agent, _)| BestAgentRow {
        budget_s: row.budget_s,
        group: row.group.clone(),
        environments: row.environments.clone(),
        agent: agent.clone(),
        ratio: row.ratio,
    })
}

/// agent / human with a percentile interval over paired resamples (the two
/// kinds are resampled independently, so pairing by index is a valid draw).
fn ratio_estimate(agent: &Sampled, human: &Sampled) -> RatioEstimate {
    let mut ratios: Vec<f64> = agent
        .resamples
        .iter()
        .zip(&human.resamples)
        .filter_map(|(a, h)| match (*a, *h) {
            (_, h) if h > 0.0 => Some(a / h),
            // 0/0 says nothing; x/0 is unbounded (kept at the top of the order).
            (a, _) if a > 0.0 => Some(f64::MAX),
            _ => None,
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    RatioEstimate {
        value: agent.point / human.point,
        ci_low: bounded_percentile(&ratios, tail),
        ci_high: bounded_percentile(&ratios, 1.0 - tail),
    }
}

/// A percentile of ascending values where `f64::MAX` stands for unbounded:
/// `None` when the percentile reaches into the unbounded ones.
fn bounded_percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let position = q * last as f64;
    let (below, above) = (position.floor() as usize, position.ceil() as usize);
    let touches_unbounded =
        sorted[below] == f64::MAX || (above > below && sorted[above] == f64::MAX);
    if touches_unbounded {
        None
    } else {
        percentile(sorted, q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::normalize::Aggregate;
    use crate::report::runs::{ScorePoint, UsageTotals};

    const H: f64 = 3600.0;

    fn run(environment: &str, kind: Kind, budget_s: f64, log: &[(f64, f64)]) -> Run {
        let scores: Vec<ScorePoint> = log
            .iter()
            .map(|(at, n)| ScorePoint {
                active_s: *at,
                normalized: Some(*n),
                starting: *at == 0.0,
            })
            .collect();
        Run {
            id: format!("{environment}-{}", log.len()),
            environment: environment.into(),
            participant: "p".into(),
            kind,
            agent: None,
            started_at: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default(),
            ended: true,
            budget_s,
            active_s: budget_s,
            visible: true,
            aggregate: Aggregate::Best,
            final_score: crate::report::runs::aggregate_normalized(Aggregate::Best, &scores),
            scores,
            usage: UsageTotals::default(),
            unnormalized: false,
            extended_s: 0.0,
            version: String::new(),
            hardware: None,
        }
    }

    fn options(budgets_s: Vec<f64>) -> ReportOptions {
        ReportOptions {
            seed: 1,
            resamples: 300,
            budgets_s,
            human_rate_usd_per_hour: 0.0,
            human_run_length_s: crate::report::best_of_k::HUMAN_RUN_CAP_S,
            estimator: Estimator::WithReplacement,
        }
    }

    #[test]
    fn equal_runs_make_every_best_of_k_that_score_exactly() {
        let runs: Vec<Run> = (0..5)
            .map(|_| run("e", Kind::Agent, 2.0 * H, &[(0.0, 0.0), (600.0, 0.4)]))
            .collect();
        let report = build_report(&runs, &options(vec![2.0 * H, 8.0 * H]));
        for row in &report.best_of_k {
            let best = row.best.as_ref().unwrap();
            let e = best.estimate.unwrap();
            assert_eq!((e.value, e.ci_low, e.ci_high), (0.4, 0.4, 0.4), "{row:?}");
        }
        // 8 h = 4 runs of 2 h (the only length the data has).
        let eight = report
            .best_of_k
            .iter()
            .find(|r| r.budget_s == 8.0 * H)
            .unwrap();
        assert_eq!(eight.best.as_ref().unwrap().k, 4);
    }

    #[test]
    fn runs_in_progress_count_only_up_to_their_active_time() {
        let mut live = run("e", Kind::Human, 8.0 * H, &[(0.0, 0.0), (600.0, 0.9)]);
        live.ended = false;
        live.active_s = 1.5 * H;
        let done = run("e", Kind::Human, 8.0 * H, &[(0.0, 0.0), (3000.0, 0.3)]);
        let report = build_report(&[live, done], &options(vec![2.0 * H]));
        let at = |t: f64| {
            report
                .timeline
                .iter()
                .find(|r| r.environment == "e" && r.time_s == t)
                .unwrap()
        };
        assert_eq!(at(H).runs, 2);
        assert!((at(H).mean.value - 0.6).abs() < 1e-12);
        assert_eq!(at(2.0 * H).runs, 1);
        assert!((at(2.0 * H).mean.value - 0.3).abs() < 1e-12);
        assert!(report.notes.iter().any(|n| n.contains("in progress")));
    }

    #[test]
    fn hidden_environments_use_a_random_run_not_the_best_of_k() {
        let mut runs: Vec<Run> = [0.0, 1.0]
            .iter()
            .map(|s| run("hidden", Kind::Human, 8.0 * H, &[(0.0, 0.0), (60.0, *s)]))
            .collect();
        for r in &mut runs {
            r.visible = false;
        }
        let report = build_report(&runs, &options(vec![32.0 * H]));
        let row = &report.best_of_k[0];
        assert_eq!(row.random_run_environments, vec!["hidden"]);
        let best = row.best.as_ref().unwrap();
        // Best of 4 would be 1 - (1/2)^4; a random run is the mean.
        assert_eq!((best.k, best.estimate.unwrap().value), (4, 0.5));
    }

    fn agent_run(name: &str, budget_s: f64, score: f64) -> Run {
        let mut r = run("e", Kind::Agent, budget_s, &[(0.0, 0.0), (60.0, score)]);
        r.agent = Some(name.into());
        r
    }

    #[test]
    fn each_named_agent_is_its_own_group_and_the_best_one_is_named() {
        let mut runs = vec![run("e", Kind::Human, 2.0 * H, &[(0.0, 0.0), (60.0, 0.5)])];
        runs.extend((0..3).map(|_| agent_run("strong", 2.0 * H, 0.8)));
        runs.extend((0..3).map(|_| agent_run("weak", 2.0 * H, 0.2)));
        let report = build_report(&runs, &options(vec![2.0 * H]));
        let groups: Vec<&str> = report
            .summary
            .iter()
            .filter(|r| r.environment == "e")
            .map(|r| r.group.as_str())
            .collect();
        assert_eq!(groups, ["human", "strong", "weak"]);
        assert_eq!(report.comparison.len(), 2);
        let ratio = |group: &str| {
            report
                .comparison
                .iter()
                .find(|c| c.group == group)
                .and_then(|c| c.ratio)
                .unwrap()
                .value
        };
        assert!((ratio("strong") - 1.6).abs() < 1e-12);
        assert!((ratio("weak") - 0.4).abs() < 1e-12);
        assert_eq!(report.best_agent.len(), 1);
        assert_eq!(report.best_agent[0].group, "strong");
    }

    #[test]
    fn agents_are_compared_at_the_length_they_were_given() {
        // An 8-hour agent run is not a 2-hour one: at 2 h only the 2-hour runs count.
        let runs = vec![agent_run("a", 2.0 * H, 0.2), agent_run("a", 8.0 * H, 0.9)];
        let report = build_report(&runs, &options(vec![2.0 * H]));
        let best = report.best_of_k[0].best.as_ref().unwrap();
        assert_eq!((best.k, best.runs), (1, 1));
        assert!((best.estimate.unwrap().value - 0.2).abs() < 1e-12);
        // Humans keep RE-Bench's rule: an 8-hour run is seen at 2 h.
        let humans = vec![
            run("e", Kind::Human, 2.0 * H, &[(0.0, 0.0), (60.0, 0.2)]),
            run("e", Kind::Human, 8.0 * H, &[(0.0, 0.0), (60.0, 0.9)]),
        ];
        let report = build_report(&humans, &options(vec![2.0 * H]));
        assert_eq!(report.best_of_k[0].best.as_ref().unwrap().runs, 2);
    }

    #[test]
    fn the_unbiased_estimator_draws_without_replacement_and_needs_k_runs() {
        let runs = vec![agent_run("a", 2.0 * H, 0.0), agent_run("a", 2.0 * H, 1.0)];
        let mut opts = options(vec![4.0 * H, 6.0 * H]);
        let with = build_report(&runs, &opts);
        // Best of 2 with replacement from {0, 1}: 1 - (1/2)^2.
        let at = |r: &Report, budget_s: f64| {
            r.best_of_k
                .iter()
                .find(|b| b.budget_s == budget_s)
                .unwrap()
                .best
                .clone()
        };
        assert!((at(&with, 4.0 * H).unwrap().estimate.unwrap().value - 0.75).abs() < 1e-12);
        opts.estimator = Estimator::Unbiased;
        let without = build_report(&runs, &opts);
        assert_eq!(without.estimator, "unbiased");
        // The only 2-subset holds both runs: its best is 1.
        let two = at(&without, 4.0 * H).unwrap();
        assert_eq!(two.k, 2);
        assert!((two.estimate.unwrap().value - 1.0).abs() < 1e-12);
        // Three runs of 2 h from two: not supported without replacement.
        let row = without
            .best_of_k
            .iter()
            .find(|b| b.budget_s == 6.0 * H)
            .unwrap();
        let three = row.splits.iter().find(|s| s.k == 3).unwrap();
        assert!(three.estimate.is_none());
    }
}
