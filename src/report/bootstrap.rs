//! The percentile bootstrap behind every interval: runs are resampled with
//! replacement within each stratum (an environment of one kind of participant),
//! and every statistic is evaluated on the same resamples.
//!
//! A quantity (final score, score at 2 h, score at 30 min for a split...) is a
//! [`Column`]: the runs eligible for it and their values. Columns with the same
//! eligible runs share their resamples, so a report costs about one draw per run
//! per resample however many statistics it has.

use std::collections::HashMap;

use rand::rngs::StdRng;

use super::stats::{counted_mean, counted_median, draw_counts};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Statistic {
    Mean,
    Median,
    /// Expected best of k runs drawn with replacement.
    BestOfK(u32),
    /// Mean best over every k-subset of the runs (drawn without
    /// replacement): unbiased for the best of k fresh runs; needs k runs.
    BestOfKUnbiased(u32),
}

/// One quantity over the runs of a stratum eligible for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Indices of the eligible runs in the stratum, ascending.
    pub members: Vec<usize>,
    /// The quantity for each member.
    pub values: Vec<f64>,
    pub statistics: Vec<Statistic>,
}

/// The runs of one environment and kind of participant, with its own random stream.
pub struct Stratum {
    pub columns: Vec<Column>,
    pub rng: StdRng,
}

/// A statistic on the original runs and on each resample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    pub point: f64,
    pub resamples: Vec<f64>,
}

pub struct BootstrapOutcome {
    /// `[stratum][column][statistic]`, in the order given.
    pub strata: Vec<Vec<Vec<Sampled>>>,
    /// Mean and median of the pooled column over all strata (stratified resampling).
    pub pooled: Option<(Sampled, Sampled)>,
}

/// A column ready for resampling: values ascending, with where each came from.
struct PreparedColumn {
    group: usize,
    /// Position in the group of the i-th smallest value.
    order: Vec<usize>,
    sorted_values: Vec<f64>,
    /// `sorted_values[j + 1] - sorted_values[j]`.
    gaps: Vec<f64>,
    values: Vec<f64>,
    statistics: Vec<Statistic>,
    /// For `BestOfK(k)`: `(c / m)^k` for c = 0..=m, so a resample needs no powers.
    power_tables: Vec<Vec<f64>>,
    /// Whether a statistic reads the values in order (not only the mean).
    needs_order: bool,
}

struct PreparedStratum {
    /// Sizes of the distinct member sets; one count vector each per resample.
    group_sizes: Vec<usize>,
    columns: Vec<PreparedColumn>,
    rng: StdRng,
}

fn prepare(stratum: Stratum) -> PreparedStratum {
    let mut groups: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut group_sizes = Vec::new();
    let columns = stratum
        .columns
        .into_iter()
        .map(|column| {
            let size = column.members.len();
            let group = *groups.entry(column.members).or_insert_with(|| {
                group_sizes.push(size);
                group_sizes.len() - 1
            });
            let mut order: Vec<usize> = (0..column.values.len()).collect();
            order.sort_by(|a, b| column.values[*a].total_cmp(&column.values[*b]));
            let sorted_values: Vec<f64> = order.iter().map(|i| column.values[*i]).collect();
            let gaps = sorted_values.windows(2).map(|w| w[1] - w[0]).collect();
            let power_tables = column
                .statistics
                .iter()
                .map(|statistic| match statistic {
                    Statistic::BestOfK(k) => power_table(size, *k),
                    Statistic::BestOfKUnbiased(k) => subset_table(size, *k),
                    _ => Vec::new(),
                })
                .collect();
            let needs_order = column.statistics.iter().any(|s| *s != Statistic::Mean);
            PreparedColumn {
                group,
                order,
                sorted_values,
                gaps,
                values: column.values,
                statistics: column.statistics,
                power_tables,
                needs_order,
            }
        })
        .collect();
    PreparedStratum {
        group_sizes,
        columns,
        rng: stratum.rng,
    }
}

fn power_table(size: usize, k: u32) -> Vec<f64> {
    let exponent = i32::try_from(k).unwrap_or(i32::MAX);
    (0..=size)
        .map(|c| (c as f64 / size as f64).powi(exponent))
        .collect()
}

/// For `BestOfKUnbiased(k)`: the chance that a k-subset of `size` runs
/// lies within the lowest c, C(c, k) / C(size, k), for c = 0..=size.
fn subset_table(size: usize, k: u32) -> Vec<f64> {
    let k = k as usize;
    (0..=size)
        .map(|c| {
            if c < k || size < k {
                return 0.0;
            }
            (0..k).map(|i| (c - i) as f64 / (size - i) as f64).product()
        })
        .collect()
}

/// Every statistic of a column on one resample (`counts`, per group member),
/// into `results`. `cumulative` is scratch of the column's length.
///
/// On values in ascending order with cumulative counts C_j out of m draws, the
/// best of k is v_j with probability P_j - P_(j-1), P_j = (C_j/m)^k; summing by
/// parts, E = v_max - sum_j P_j (v_(j+1) - v_j), one table lookup per run.
/// (`best_of_k::expected_best_of_k` is the plain version the tests compare with.)
fn evaluate_column(
    column: &PreparedColumn,
    counts: &[u32],
    cumulative: &mut [u32],
    results: &mut Vec<f64>,
) {
    // A resample draws as many runs as the group has.
    let total = u32::try_from(counts.len()).unwrap_or(u32::MAX);
    if column.needs_order {
        let mut running = 0;
        for (slot, position) in cumulative.iter_mut().zip(&column.order) {
            running += counts[*position];
            *slot = running;
        }
    }
    results.clear();
    for (statistic, table) in column.statistics.iter().zip(&column.power_tables) {
        let value = match statistic {
            Statistic::Mean => counted_mean(&column.values, counts, total),
            Statistic::Median => {
                // The item at 0-based rank r is the first whose cumulative count exceeds r.
                let at_rank = |rank: u32| {
                    let index = cumulative.partition_point(|c| *c <= rank);
                    column.sorted_values.get(index).copied().unwrap_or(f64::NAN)
                };
                (at_rank(total.saturating_sub(1) / 2) + at_rank(total / 2)) / 2.0
            }
            Statistic::BestOfK(_) | Statistic::BestOfKUnbiased(_) => {
                let below_best: f64 = column
                    .gaps
                    .iter()
                    .zip(cumulative.iter())
                    .map(|(gap, c)| gap * table[*c as usize])
                    .sum();
                column.sorted_values.last().copied().unwrap_or(f64::NAN) - below_best
            }
        };
        results.push(value);
    }
}

/// Resamples every stratum `resamples` times. `pooled_column`, when given, is
/// a column index present in every stratum whose pooled mean and median are wanted.
pub fn run_bootstrap(
    strata: Vec<Stratum>,
    resamples: usize,
    pooled_column: Option<usize>,
) -> BootstrapOutcome {
    let mut strata: Vec<PreparedStratum> = strata.into_iter().map(prepare).collect();
    let ones = |size: usize| vec![1u32; size];

    // Point estimates: every run counted once.
    let mut results = Vec::new();
    let mut outcome: Vec<Vec<Vec<Sampled>>> = strata
        .iter()
        .map(|stratum| {
            stratum
                .columns
                .iter()
                .map(|column| {
                    let counts = ones(column.values.len());
                    let mut cumulative = vec![0; column.values.len()];
                    evaluate_column(column, &counts, &mut cumulative, &mut results);
                    results
                        .iter()
                        .map(|point| Sampled {
                            point: *point,
                            resamples: Vec::with_capacity(resamples),
                        })
                        .collect()
                })
                .collect()
        })
        .collect();

    let pooled_order = pooled_column.map(|c| pooled_sort_order(&strata, c));
    let mut pooled = pooled_order.as_ref().map(|order| {
        let values: Vec<f64> = order.iter().map(|(_, _, v)| *v).collect();
        let total = u32::try_from(values.len()).unwrap_or(u32::MAX);
        let all_once = std::iter::repeat(1);
        (
            Sampled {
                point: counted_mean(&values, &ones(values.len()), total),
                resamples: Vec::with_capacity(resamples),
            },
            Sampled {
                point: counted_median(&values, all_once, total),
                resamples: Vec::with_capacity(resamples),
            },
        )
    });

    let mut counts: Vec<Vec<Vec<u32>>> = strata
        .iter()
        .map(|s| s.group_sizes.iter().map(|n| vec![0; *n]).collect())
        .collect();
    let mut cumulative: Vec<Vec<Vec<u32>>> = strata
        .iter()
        .map(|s| s.columns.iter().map(|c| vec![0; c.values.len()]).collect())
        .collect();
    for _ in 0..resamples {
        for (((stratum, stratum_counts), stratum_cumulative), stratum_out) in strata
            .iter_mut()
            .zip(&mut counts)
            .zip(&mut cumulative)
            .zip(&mut outcome)
        {
            for group_counts in stratum_counts.iter_mut() {
                draw_counts(&mut stratum.rng, group_counts);
            }
            for ((column, scratch), column_out) in stratum
                .columns
                .iter()
                .zip(stratum_cumulative.iter_mut())
                .zip(stratum_out.iter_mut())
            {
                evaluate_column(column, &stratum_counts[column.group], scratch, &mut results);
                for (value, out) in results.iter().zip(column_out.iter_mut()) {
                    out.resamples.push(*value);
                }
            }
        }
        if let (Some(column), Some(order), Some((mean, median))) =
            (pooled_column, &pooled_order, &mut pooled)
        {
            let (pooled_mean, pooled_median) = pooled_statistics(&strata, &counts, column, order);
            mean.resamples.push(pooled_mean);
            median.resamples.push(pooled_median);
        }
    }
    BootstrapOutcome {
        strata: outcome,
        pooled,
    }
}

/// `(stratum, position in column, value)` of the pooled column, ascending by value.
fn pooled_sort_order(strata: &[PreparedStratum], column: usize) -> Vec<(usize, usize, f64)> {
    let mut order: Vec<(usize, usize, f64)> = strata
        .iter()
        .enumerate()
        .filter_map(|(s, stratum)| stratum.columns.get(column).map(|c| (s, c)))
        .flat_map(|(s, c)| c.values.iter().enumerate().map(move |(i, v)| (s, i, *v)))
        .collect();
    order.sort_by(|a, b| a.2.total_cmp(&b.2));
    order
}

fn pooled_statistics(
    strata: &[PreparedStratum],
    counts: &[Vec<Vec<u32>>],
    column: usize,
    order: &[(usize, usize, f64)],
) -> (f64, f64) {
    let count_of = |(s, i, _): &(usize, usize, f64)| -> u32 {
        strata[*s]
            .columns
            .get(column)
            .map_or(0, |c| counts[*s][c.group][*i])
    };
    let total: u32 = order.iter().map(count_of).sum();
    let sum: f64 = order.iter().map(|e| e.2 * f64::from(count_of(e))).sum();
    let values: Vec<f64> = order.iter().map(|e| e.2).collect();
    let median = counted_median(&values, order.iter().map(count_of), total);
    (sum / f64::from(total), median)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::stats::{draw_counts, labelled_rng, percentile_interval};

    fn column(values: &[f64], statistics: &[Statistic]) -> Column {
        Column {
            members: (0..values.len()).collect(),
            values: values.to_vec(),
            statistics: statistics.to_vec(),
        }
    }

    #[test]
    fn point_estimates_use_each_run_once_and_intervals_contain_them() {
        let values = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 0.3];
        let stratum = Stratum {
            columns: vec![column(
                &values,
                &[Statistic::Mean, Statistic::Median, Statistic::BestOfK(2)],
            )],
            rng: labelled_rng(1, "x"),
        };
        let outcome = run_bootstrap(vec![stratum], 2000, Some(0));
        let stats = &outcome.strata[0][0];
        assert!((stats[0].point - 0.5625).abs() < 1e-12);
        assert!((stats[1].point - 0.5).abs() < 1e-12);
        for s in stats {
            assert_eq!(s.resamples.len(), 2000);
            let (low, high) = percentile_interval(&s.resamples).unwrap();
            assert!(
                low <= s.point && s.point <= high,
                "{low} {} {high}",
                s.point
            );
        }
        let (mean, median) = outcome.pooled.unwrap();
        assert!((mean.point - stats[0].point).abs() < 1e-12);
        assert_eq!(median.point, stats[1].point);
        // One stratum: the pooled resamples are the stratum's resamples.
        let same = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12);
        assert!(same(&mean.resamples, &stats[0].resamples));
        assert!(same(&median.resamples, &stats[1].resamples));
    }

    #[test]
    fn the_fast_scan_agrees_with_the_plain_formulas() {
        use crate::report::best_of_k::expected_best_of_k;
        use crate::report::stats::counted_median;
        let values = [0.3, 0.0, 1.2, 0.7, 0.7, 0.05, 2.5, 0.0, 0.9];
        let statistics = [
            Statistic::Mean,
            Statistic::Median,
            Statistic::BestOfK(3),
            Statistic::BestOfK(40),
        ];
        let prepared = prepare(Stratum {
            columns: vec![column(&values, &statistics)],
            rng: labelled_rng(0, "unused"),
        });
        let column = &prepared.columns[0];
        let mut rng = labelled_rng(11, "scan");
        let (mut counts, mut cumulative, mut results) = (vec![0; 9], vec![0; 9], Vec::new());
        for _ in 0..200 {
            draw_counts(&mut rng, &mut counts);
            evaluate_column(column, &counts, &mut cumulative, &mut results);
            let in_order = || column.order.iter().map(|i| counts[*i]);
            let want = [
                counted_mean(&values, &counts, 9),
                counted_median(&column.sorted_values, in_order(), 9),
                expected_best_of_k(&column.sorted_values, in_order(), 9, 3),
                expected_best_of_k(&column.sorted_values, in_order(), 9, 40),
            ];
            for (got, want) in results.iter().zip(want) {
                assert!((got - want).abs() < 1e-12, "{got} vs {want} for {counts:?}");
            }
        }
    }

    #[test]
    fn percentile_intervals_of_the_mean_cover_the_truth_about_95_percent_of_the_time() {
        // 400 samples of 40 uniform(0, 1) values; the true mean is 0.5.
        let mut covered = 0;
        for trial in 0..400 {
            let values: Vec<f64> = (0..40)
                .map(|i| {
                    let mut r = labelled_rng(trial, &i.to_string());
                    rand::Rng::random::<f64>(&mut r)
                })
                .collect();
            let stratum = Stratum {
                columns: vec![column(&values, &[Statistic::Mean])],
                rng: labelled_rng(trial, "resample"),
            };
            let outcome = run_bootstrap(vec![stratum], 500, None);
            let (low, high) = percentile_interval(&outcome.strata[0][0][0].resamples).unwrap();
            covered += usize::from(low <= 0.5 && 0.5 <= high);
        }
        let coverage = covered as f64 / 400.0;
        assert!((0.90..=0.98).contains(&coverage), "coverage {coverage}");
    }

    #[test]
    fn identical_runs_give_a_degenerate_interval() {
        let stratum = Stratum {
            columns: vec![column(&[0.7; 5], &[Statistic::Mean, Statistic::BestOfK(4)])],
            rng: labelled_rng(3, "y"),
        };
        let outcome = run_bootstrap(vec![stratum], 100, None);
        for s in &outcome.strata[0][0] {
            assert!(s.resamples.iter().all(|r| (r - 0.7).abs() < 1e-12));
        }
        assert!(outcome.pooled.is_none());
    }
}
