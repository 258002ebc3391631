//! Score over time: a run's score as a step function of active time, and the
//! grid of times the report evaluates it at.

use crate::environment::normalize::Aggregate;

use super::runs::ScorePoint;

/// A run's score by active time t: piecewise constant, 0 before its first valid entry.
/// With `best` aggregation it is the best valid score reached by t; with `last`
/// (Scaling Law: the last answer counts) it is the last valid score given by t.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreTimeline {
    /// `(from_active_s, value)`, strictly increasing times, each a change of value.
    steps: Vec<(f64, f64)>,
}

impl ScoreTimeline {
    pub fn from_scores(scores: &[ScorePoint], aggregate: Aggregate) -> ScoreTimeline {
        let mut valid: Vec<(f64, f64)> = scores
            .iter()
            .filter_map(|s| s.normalized.map(|n| (s.active_s.max(0.0), n)))
            .collect();
        // Stable: entries at the same active time keep log order (the last one is "last").
        valid.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut steps: Vec<(f64, f64)> = Vec::new();
        let mut current: f64 = 0.0;
        for (at, score) in valid {
            let next = match aggregate {
                Aggregate::Best => current.max(score),
                Aggregate::Last => score,
            };
            let first = steps.is_empty();
            match steps.last_mut() {
                // Several entries at one instant: only the outcome at that instant is a step.
                Some(last) if last.0 == at => last.1 = next,
                _ if next != current || first => steps.push((at, next)),
                _ => {}
            }
            current = next;
        }
        steps.dedup_by(|later, earlier| later.1 == earlier.1);
        ScoreTimeline { steps }
    }

    /// The change points `(from_active_s, value)`.
    pub fn steps(&self) -> &[(f64, f64)] {
        &self.steps
    }

    pub fn value_at(&self, t_s: f64) -> f64 {
        // Last step starting at or before t.
        let after = self.steps.partition_point(|(at, _)| *at <= t_s);
        match after {
            0 => 0.0,
            i => self.steps[i - 1].1,
        }
    }
}

/// RE-Bench's evaluation times: 15 min, 30 min, 1 h, 2 h, 4 h, 8 h, doubling on
/// as far as the longest budget, which is added when it falls between points.
pub fn time_grid(longest_budget_s: f64) -> Vec<f64> {
    const FIRST_S: f64 = 15.0 * 60.0;
    let mut grid = Vec::new();
    if !(longest_budget_s.is_finite() && longest_budget_s > 0.0) {
        return grid;
    }
    let mut t = FIRST_S;
    while t <= longest_budget_s + 1e-6 {
        grid.push(t);
        t *= 2.0;
    }
    if grid
        .last()
        .is_none_or(|last| (longest_budget_s - last).abs() > 1e-6)
    {
        grid.push(longest_budget_s);
    }
    grid
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(active_s: f64, normalized: Option<f64>) -> ScorePoint {
        ScorePoint {
            active_s,
            normalized,
            starting: false,
        }
    }

    #[test]
    fn best_aggregation_is_a_running_maximum_with_exact_steps() {
        let scores = [
            ScorePoint {
                active_s: 0.0,
                normalized: Some(0.0),
                starting: true,
            },
            entry(600.0, Some(0.3)),
            entry(1200.0, None),
            entry(1800.0, Some(0.2)),
            entry(3600.0, Some(0.8)),
        ];
        let timeline = ScoreTimeline::from_scores(&scores, Aggregate::Best);
        assert_eq!(timeline.steps(), &[(0.0, 0.0), (600.0, 0.3), (3600.0, 0.8)]);
        assert_eq!(timeline.value_at(599.9), 0.0);
        assert_eq!(timeline.value_at(600.0), 0.3);
        assert_eq!(timeline.value_at(2000.0), 0.3);
        assert_eq!(timeline.value_at(3600.0), 0.8);
        assert_eq!(timeline.value_at(1e9), 0.8);
    }

    #[test]
    fn last_aggregation_follows_the_latest_valid_answer() {
        let scores = [
            entry(100.0, Some(0.9)),
            entry(200.0, Some(0.4)),
            entry(300.0, None),
            entry(300.0, Some(0.5)),
            entry(300.0, Some(0.6)),
        ];
        let timeline = ScoreTimeline::from_scores(&scores, Aggregate::Last);
        assert_eq!(
            timeline.steps(),
            &[(100.0, 0.9), (200.0, 0.4), (300.0, 0.6)]
        );
        assert_eq!(timeline.value_at(250.0), 0.4);
    }

    #[test]
    fn no_valid_entry_is_zero_throughout() {
        let timeline = ScoreTimeline::from_scores(&[entry(10.0, None)], Aggregate::Best);
        assert!(timeline.steps().is_empty());
        assert_eq!(timeline.value_at(0.0), 0.0);
        assert_eq!(timeline.value_at(1e6), 0.0);
    }

    #[test]
    fn grid_doubles_from_15_minutes_up_to_the_longest_budget() {
        let hours = |h: f64| h * 3600.0;
        assert_eq!(
            time_grid(hours(8.0)),
            vec![900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0]
        );
        assert_eq!(
            time_grid(hours(10.0)),
            vec![900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 36000.0]
        );
        assert_eq!(time_grid(600.0), vec![600.0]);
        assert!(time_grid(0.0).is_empty());
    }
}
