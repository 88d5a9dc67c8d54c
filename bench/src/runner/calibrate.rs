//! Sizes the observability suite's "1 ms of CPU" handler to 1 ms on the machine it runs
//! on. A fixed pass count was sized elsewhere (80 passes: 0.9 ms there, 0.55 ms on the
//! bench VM), and a handler half the size it is named for doubles what any per-job cost
//! looks like. Timed in the runner process, once per run, before the suite's rounds.

use std::time::Instant;

use super::stats::median;
use crate::probe::{checksum, CpuWork};

/// What one call should take.
const TARGET_MS: f64 = 1.0;
/// The pass count timed first, to find a pass's cost.
const PROBE_PASSES: u32 = 100;
/// Calls timed per figure: the median of a few hundred is steady over a preempted one.
const CALLS: usize = 301;

/// The calibrated work, and the median time of one call of it in the runner.
#[derive(Debug, Clone, Copy)]
pub(super) struct Calibrated {
    pub(super) work: CpuWork,
    pub(super) ms: f64,
}

/// The median time of one `checksum(passes)` call, ms.
fn time_one_call(passes: u32) -> f64 {
    let times: Vec<f64> = (0..CALLS)
        .map(|_| {
            let started = Instant::now();
            std::hint::black_box(checksum(std::hint::black_box(passes)));
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    median(&times)
}

/// Times [`PROBE_PASSES`], scales to [`TARGET_MS`], and times the result (half a second).
pub(super) fn calibrate() -> Calibrated {
    let per_pass = time_one_call(PROBE_PASSES) / f64::from(PROBE_PASSES);
    let passes = (TARGET_MS / per_pass).round().clamp(1.0, 1e6) as u32;
    Calibrated {
        work: CpuWork::new(passes),
        ms: time_one_call(passes),
    }
}

impl Calibrated {
    /// A sentence for the suite's text.
    pub(super) fn describe(&self) -> String {
        format!(
            "The CPU handler runs {} passes of FNV-1a over 4 KiB (checksum {:#010x}, which \
             both handlers check on every job), calibrated at the start of the suite to \
             {:.2} ms a call in the runner (median of {CALLS} calls); the same loop in Rust \
             and in Node.",
            self.work.passes, self.work.checksum, self.ms
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_calibrated_work_takes_about_a_millisecond() {
        let calibrated = super::calibrate();
        assert!(calibrated.work.passes > 0);
        // Loose: a test machine is busy, and a debug build is slower per pass, which
        // calibration takes into account.
        assert!(calibrated.ms > 0.3 && calibrated.ms < 3.0, "{calibrated:?}");
    }
}
