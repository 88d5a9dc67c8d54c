//! Medians, percentiles and ratios.

use std::fmt;

pub(super) fn median(values: &[f64]) -> f64 {
    quantile(values, 0.5)
}

/// The `q` quantile (0..=1) of `values`, interpolated between the two nearest order
/// statistics (so the 0.5 quantile is the usual median of an even count too).
pub(super) fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (low, high) = (position.floor() as usize, position.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
}

/// The nearest-rank percentile (`p` in 0..=100) of `samples`.
pub(super) fn percentile(samples: &[u64], p: f64) -> u64 {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A comparison of two systems run back to back in each round, summarised by the ratio
/// of each round's own pair. The machine's speed drifts by more than the differences we
/// look for (±25 % between consecutive runs here), but both halves of a pair see about
/// the same machine: the median of the paired ratios cancels the drift that a ratio of
/// the two systems' separate medians keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Paired {
    pub(super) median: f64,
    /// The interquartile range of the per-round ratios: how far one round can be trusted.
    pub(super) q1: f64,
    pub(super) q3: f64,
}

/// `numerators[i] / denominators[i]` for each round `i` (the two series of one run, in
/// round order), summarised.
pub(super) fn paired(numerators: &[f64], denominators: &[f64]) -> Paired {
    let ratios: Vec<f64> = numerators
        .iter()
        .zip(denominators)
        .map(|(a, b)| a / b)
        .collect();
    Paired {
        median: quantile(&ratios, 0.5),
        q1: quantile(&ratios, 0.25),
        q3: quantile(&ratios, 0.75),
    }
}

/// `**0.95** (IQR 0.91 to 0.98)`; the rounds are the section's to say.
impl fmt::Display for Paired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "**{:.2}** (IQR {:.2} to {:.2})",
            self.median, self.q1, self.q3
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(quantile(&[4.0, 1.0, 2.0, 3.0, 5.0], 0.25), 2.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.75), 3.25);
        let samples: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&samples, 50.0), 50);
        assert_eq!(percentile(&samples, 99.0), 99);
        assert_eq!(percentile(&samples, 100.0), 100);
    }

    #[test]
    fn paired_ratios_are_taken_round_by_round() {
        // Our median is round 0's, raw's is round 1's: their ratio (0.88) mixes two
        // rounds' machines. Each round's own ratio: 0.87, 0.98, 0.89, 0.93, 0.90.
        let ours = [900.0, 1000.0, 500.0, 1400.0, 700.0];
        let raw = [1040.0, 1020.0, 560.0, 1500.0, 780.0];
        assert!((median(&ours) / median(&raw) - 900.0 / 1020.0).abs() < 1e-9);
        let p = paired(&ours, &raw);
        assert!((p.median - 700.0 / 780.0).abs() < 1e-9, "{p:?}");
        assert!((p.q1 - 500.0 / 560.0).abs() < 1e-9, "{p:?}");
        assert!((p.q3 - 1400.0 / 1500.0).abs() < 1e-9, "{p:?}");
        assert_eq!(p.to_string(), "**0.90** (IQR 0.89 to 0.93)");
        assert!(paired(&[], &[]).median.is_nan());
    }
}
