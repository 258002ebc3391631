//! Plain statistics: means, medians, percentiles, seeded random streams and
//! the statistics the bootstrap evaluates on a resample given as counts.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Two-sided coverage of every interval in the report.
pub const CONFIDENCE: f64 = 0.95;

/// A point estimate with its percentile-bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    pub value: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

impl Estimate {
    /// An estimate with a percentile interval from bootstrap samples. With no
    /// finite sample the interval collapses onto the point estimate.
    pub fn from_samples(value: f64, samples: &[f64]) -> Estimate {
        let (ci_low, ci_high) = percentile_interval(samples).unwrap_or((value, value));
        Estimate {
            value,
            ci_low,
            ci_high,
        }
    }
}

pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile(&sorted, 0.5)
}

/// The `q` quantile of ascending `sorted` values, interpolating linearly
/// between order statistics (numpy's default, R's type 7).
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let position = q.clamp(0.0, 1.0) * last as f64;
    let below = position.floor() as usize;
    let above = position.ceil() as usize;
    let fraction = position - below as f64;
    Some(sorted[below] + (sorted[above] - sorted[below]) * fraction)
}

/// The central [`CONFIDENCE`] interval of finite samples (non-finite ones are dropped).
pub fn percentile_interval(samples: &[f64]) -> Option<(f64, f64)> {
    let mut finite: Vec<f64> = samples.iter().copied().filter(|s| s.is_finite()).collect();
    finite.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    Some((percentile(&finite, tail)?, percentile(&finite, 1.0 - tail)?))
}

/// A random stream for one labelled part of the report, so that its numbers
/// depend only on the seed and its own data, not on what else is in the report.
pub fn labelled_rng(seed: u64, label: &str) -> StdRng {
    // FNV-1a: stable across Rust versions, unlike the std hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in seed.to_le_bytes().iter().chain(label.as_bytes()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    StdRng::seed_from_u64(hash)
}

/// One bootstrap resample of `counts.len()` items: how often each item was drawn
/// when drawing as many items as there are, with replacement.
pub fn draw_counts(rng: &mut StdRng, counts: &mut [u32]) {
    counts.fill(0);
    // u32 draws use half the random stream of usize ones; no stratum has 2^32 runs.
    let n = u32::try_from(counts.len()).unwrap_or(u32::MAX);
    for _ in 0..n {
        counts[rng.random_range(0..n) as usize] += 1;
    }
}

/// Mean of `values` weighted by `counts` (a resample); `total` = sum of counts.
pub fn counted_mean(values: &[f64], counts: &[u32], total: u32) -> f64 {
    let sum: f64 = values
        .iter()
        .zip(counts)
        .map(|(v, c)| v * f64::from(*c))
        .sum();
    sum / f64::from(total)
}

/// Median of a resample given as ascending values, the counts in that order
/// and their sum.
pub fn counted_median(
    sorted_values: &[f64],
    counts_in_order: impl Iterator<Item = u32>,
    total: u32,
) -> f64 {
    if total == 0 {
        return f64::NAN;
    }
    // 0-based ranks of the middle item(s).
    let (low_rank, high_rank) = ((total - 1) / 2, total / 2);
    let mut seen = 0u32;
    let mut low = None;
    for (value, count) in sorted_values.iter().copied().zip(counts_in_order) {
        seen += count;
        if low.is_none() && seen > low_rank {
            low = Some(value);
        }
        if seen > high_rank {
            return (low.unwrap_or(value) + value) / 2.0;
        }
    }
    f64::NAN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_between_order_statistics() {
        let sorted = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&sorted, 0.0), Some(1.0));
        assert_eq!(percentile(&sorted, 1.0), Some(4.0));
        assert_eq!(percentile(&sorted, 0.5), Some(2.5));
        assert_eq!(percentile(&sorted, 0.25), Some(1.75));
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(mean(&[]), None);
    }

    #[test]
    fn counted_statistics_match_the_expanded_sample() {
        let values = [0.1, 0.5, 0.9, 2.0];
        let counts = [2, 0, 1, 1];
        let expanded = [0.1, 0.1, 0.9, 2.0];
        assert!((counted_mean(&values, &counts, 4) - mean(&expanded).unwrap()).abs() < 1e-12);
        let m = counted_median(&values, counts.iter().copied(), 4);
        assert_eq!(m, median(&expanded).unwrap());
        let odd = counted_median(&values, [1, 1, 1, 0].into_iter(), 3);
        assert_eq!(odd, 0.5);
    }

    #[test]
    fn resamples_are_reproducible_per_seed_and_label() {
        let draw = |seed, label| {
            let mut rng = labelled_rng(seed, label);
            let mut counts = vec![0; 20];
            draw_counts(&mut rng, &mut counts);
            counts
        };
        assert_eq!(draw(7, "a"), draw(7, "a"));
        assert_ne!(draw(7, "a"), draw(8, "a"));
        assert_ne!(draw(7, "a"), draw(7, "b"));
        assert_eq!(draw(7, "a").iter().sum::<u32>(), 20);
    }
}
