//! score@k: the expected best of k runs drawn with replacement, and the ways
//! a total time budget can be split into k runs that the data supports.

use serde::Serialize;

/// Humans worked 8-hour sessions; larger human budgets are best-of-k over
/// 8-hour runs (the default of `--human-run-length`).
pub const HUMAN_RUN_CAP_S: f64 = 8.0 * 3600.0;

/// The exact expectation of the best of `k` draws with replacement from a
/// resample given as ascending values and their counts in that order: the
/// i-th value is the best with probability `(C_i/m)^k - (C_{i-1}/m)^k`,
/// where `C_i` counts draws up to it and `m` all of them. (Exact rather than
/// simulated, so point estimates do not depend on the seed.)
pub fn expected_best_of_k(
    sorted_values: &[f64],
    counts_in_order: impl Iterator<Item = u32>,
    total: u32,
    k: u32,
) -> f64 {
    if total == 0 {
        return f64::NAN;
    }
    let exponent = i32::try_from(k).unwrap_or(i32::MAX);
    let total = f64::from(total);
    let mut cumulative = 0u32;
    let mut below = 0.0;
    let mut expectation = 0.0;
    for (value, count) in sorted_values.iter().zip(counts_in_order) {
        if count == 0 {
            continue;
        }
        cumulative += count;
        let at_or_below = (f64::from(cumulative) / total).powi(exponent);
        expectation += value * (at_or_below - below);
        below = at_or_below;
    }
    expectation
}

/// [`expected_best_of_k`] of a plain sample (each value once).
pub fn best_of_k_of(values: &[f64], k: u32) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = u32::try_from(sorted.len()).ok().filter(|n| *n > 0)?;
    Some(expected_best_of_k(&sorted, std::iter::repeat(1), n, k))
}

/// k runs of `run_length_s` each within a total budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Split {
    pub k: u32,
    pub run_length_s: f64,
}

/// Splits of `budget_s` worth considering: one run of the whole budget, and
/// k = floor(budget / L) runs of each run length L the data has (a budget of
/// some run). With a `cap` (humans' run length), runs are at most that
/// long, and a budget above it is split only into runs of exactly that
/// length (RE-Bench: 32 h = the best of 4 eight-hour runs, never 64 half-hour
/// test sessions). Whether an environment has runs for a split is checked
/// by the caller.
pub fn candidate_splits(budget_s: f64, run_budgets_s: &[f64], cap_s: Option<f64>) -> Vec<Split> {
    let cap = cap_s.unwrap_or(f64::INFINITY);
    if budget_s > cap + 1e-6 {
        let k = (budget_s / cap + 1e-9).floor();
        return (k >= 1.0 && k <= f64::from(u32::MAX))
            .then_some(Split {
                k: k as u32,
                run_length_s: cap.round(),
            })
            .into_iter()
            .collect();
    }
    let mut lengths: Vec<f64> = run_budgets_s
        .iter()
        .copied()
        .chain(std::iter::once(budget_s))
        // Whole seconds: budgets are set in seconds, extensions add milliseconds at most.
        .map(f64::round)
        .filter(|l| *l > 0.0 && *l <= budget_s + 1e-6 && *l <= cap + 1e-6)
        .collect();
    lengths.sort_by(f64::total_cmp);
    lengths.dedup();
    lengths
        .into_iter()
        .filter_map(|run_length_s| {
            let k = (budget_s / run_length_s + 1e-9).floor();
            (k >= 1.0 && k <= f64::from(u32::MAX)).then_some(Split {
                k: k as u32,
                run_length_s,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_budgets_above_the_run_length_use_runs_of_that_length_only() {
        let eight = 8.0 * 3600.0;
        let budgets = [1800.0, 7200.0, eight];
        let splits = candidate_splits(32.0 * 3600.0, &budgets, Some(eight));
        assert_eq!(
            splits,
            vec![Split {
                k: 4,
                run_length_s: eight
            }]
        );
        // At or below it, every length the data has.
        let at_two = candidate_splits(7200.0, &budgets, Some(eight));
        assert_eq!(at_two.len(), 2);
        // Agents have no cap: 30-minute runs may make up 32 h.
        let agents = candidate_splits(32.0 * 3600.0, &budgets, None);
        assert!(agents.contains(&Split {
            k: 64,
            run_length_s: 1800.0
        }));
    }

    #[test]
    fn best_of_one_is_the_mean_and_best_of_many_tends_to_the_maximum() {
        let values = [0.0, 0.5, 1.0];
        assert!((best_of_k_of(&values, 1).unwrap() - 0.5).abs() < 1e-12);
        // Best of 2 of {0, .5, 1}: P(max=1) = 5/9, P(max=.5) = 3/9 -> 5/9 + 1.5/9 = 13/18.
        assert!((best_of_k_of(&values, 2).unwrap() - 13.0 / 18.0).abs() < 1e-12);
        assert!((best_of_k_of(&values, 200).unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(best_of_k_of(&[0.7, 0.7, 0.7], 4), Some(0.7));
        assert_eq!(best_of_k_of(&[], 4), None);
    }

    #[test]
    fn counts_act_as_repeated_values() {
        let sorted = [0.0, 1.0];
        // {0, 0, 0, 1}: best of 2 = 1 - (3/4)^2 = 7/16.
        let e = expected_best_of_k(&sorted, [3, 1].into_iter(), 4, 2);
        assert!((e - 7.0 / 16.0).abs() < 1e-12);
    }

    #[test]
    fn splits_use_the_run_lengths_in_the_data() {
        let h = 3600.0;
        let agents = candidate_splits(8.0 * h, &[0.5 * h, 2.0 * h, 8.0 * h, 8.0 * h], None);
        let ks: Vec<(u32, f64)> = agents.iter().map(|s| (s.k, s.run_length_s / h)).collect();
        assert_eq!(ks, vec![(16, 0.5), (4, 2.0), (1, 8.0)]);
        // Humans at 32 h: best of 4 eight-hour runs, never one 32-hour run.
        let humans = candidate_splits(32.0 * h, &[8.0 * h], Some(HUMAN_RUN_CAP_S));
        assert_eq!(
            humans,
            vec![Split {
                k: 4,
                run_length_s: 8.0 * h
            }]
        );
        // Below the runs' budget: one run, scored by its state at 2 h.
        let short = candidate_splits(2.0 * h, &[8.0 * h], Some(HUMAN_RUN_CAP_S));
        assert_eq!(
            short,
            vec![Split {
                k: 1,
                run_length_s: 2.0 * h
            }]
        );
    }
}
