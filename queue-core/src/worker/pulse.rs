//! What a worker of this process has done lately, for the liveness check: when it last
//! took a job, how many it runs now, and when its locks were last renewed. Written by
//! the worker runtime on every attempt (two atomic stores), read by a probe.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

/// One worker's signs of life. Times are milliseconds since the pulse was made, so that
/// they fit an atomic.
#[derive(Debug)]
pub(crate) struct WorkerPulse {
    queue: String,
    concurrency: usize,
    lock_duration: Duration,
    born: Instant,
    started: AtomicBool,
    stopped: AtomicBool,
    /// When it last took a job (or started, before the first).
    last_take_ms: AtomicU64,
    /// When the locks of its running attempts were last renewed.
    last_renewal_ms: AtomicU64,
    running: AtomicUsize,
}

/// What a probe reads of a pulse at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PulseReading {
    pub(crate) queue: String,
    pub(crate) started: bool,
    pub(crate) running: usize,
    pub(crate) concurrency: usize,
    pub(crate) lock_duration: Duration,
    /// Since it last took a job (or since it started).
    pub(crate) since_take: Duration,
    /// Since its locks were last renewed; `None` when never.
    pub(crate) since_renewal: Option<Duration>,
}

impl WorkerPulse {
    pub(crate) fn new(queue: &str, concurrency: usize, lock_duration: Duration) -> Self {
        WorkerPulse {
            queue: queue.to_owned(),
            concurrency,
            lock_duration,
            born: Instant::now(),
            started: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            last_take_ms: AtomicU64::new(0),
            last_renewal_ms: AtomicU64::new(u64::MAX),
            running: AtomicUsize::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        self.born.elapsed().as_millis() as u64
    }

    /// The engine worker runs: the quiet period starts now.
    pub(crate) fn started(&self) {
        self.last_take_ms.store(self.now_ms(), Ordering::Relaxed);
        self.started.store(true, Ordering::Relaxed);
    }

    /// The worker was shut down: a probe no longer asks about it.
    pub(crate) fn stopped(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// An attempt begins.
    pub(crate) fn took(&self) {
        self.last_take_ms.store(self.now_ms(), Ordering::Relaxed);
        self.running.fetch_add(1, Ordering::Relaxed);
    }

    /// An attempt ended, however it ended.
    pub(crate) fn ended(&self) {
        self.running.fetch_sub(1, Ordering::Relaxed);
    }

    /// The locks of the running attempts were renewed.
    pub(crate) fn renewed(&self) {
        self.last_renewal_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    pub(crate) fn read(&self) -> PulseReading {
        let now = self.now_ms();
        let since = |at: u64| Duration::from_millis(now.saturating_sub(at));
        let renewal = self.last_renewal_ms.load(Ordering::Relaxed);
        PulseReading {
            queue: self.queue.clone(),
            started: self.started.load(Ordering::Relaxed),
            running: self.running.load(Ordering::Relaxed),
            concurrency: self.concurrency,
            lock_duration: self.lock_duration,
            since_take: since(self.last_take_ms.load(Ordering::Relaxed)),
            since_renewal: (renewal != u64::MAX).then(|| since(renewal)),
        }
    }
}

/// The pulses of the workers this process runs, for the app's probes. Weak: a worker
/// set dropped without a shutdown is forgotten with it.
#[derive(Debug, Default)]
pub(crate) struct PulseBoard {
    pulses: Mutex<Vec<Weak<WorkerPulse>>>,
}

impl PulseBoard {
    pub(crate) fn add(&self, pulse: &Arc<WorkerPulse>) {
        let mut pulses = self.pulses.lock().unwrap_or_else(PoisonError::into_inner);
        pulses.retain(|p| p.strong_count() > 0);
        pulses.push(Arc::downgrade(pulse));
    }

    /// Every worker not shut down, in the order they were made.
    pub(crate) fn readings(&self) -> Vec<PulseReading> {
        self.pulses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|p| !p.stopped.load(Ordering::Relaxed))
            .map(|p| p.read())
            .collect()
    }
}

/// Whether a worker, by its pulse alone, may be wedged: it has had no sign of life for
/// `period` although it could have taken a job. Whether jobs are waiting is asked of
/// Redis only for these.
///
/// - With a free slot, a worker that has taken nothing for `period` is suspect: either
///   nothing waits (Redis says), or its fetch loop is stuck (a blocked thread, a
///   connection that never came back).
/// - With every slot busy, it is busy, not wedged, while its locks are renewed (long
///   jobs are fine; renewals come every quarter of a lock). No renewal for `period` and a whole
///   lock duration (counted from the last take when there was none) makes it suspect.
pub(crate) fn is_suspect(reading: &PulseReading, period: Duration) -> bool {
    if !reading.started || reading.since_take < period {
        return false;
    }
    if reading.running < reading.concurrency {
        return true;
    }
    let quiet = reading.since_renewal.unwrap_or(reading.since_take);
    quiet >= period.max(reading.lock_duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(running: usize, since_take: u64, since_renewal: Option<u64>) -> PulseReading {
        PulseReading {
            queue: "q".to_owned(),
            started: true,
            running,
            concurrency: 2,
            lock_duration: Duration::from_secs(20),
            since_take: Duration::from_secs(since_take),
            since_renewal: since_renewal.map(Duration::from_secs),
        }
    }

    #[test]
    fn a_worker_with_a_free_slot_and_no_take_for_the_period_is_suspect() {
        let period = Duration::from_secs(10);
        assert!(is_suspect(&reading(0, 11, None), period));
        assert!(is_suspect(&reading(1, 11, Some(1)), period));
        assert!(!is_suspect(&reading(1, 9, None), period));
    }

    #[test]
    fn a_busy_worker_is_alive_while_its_locks_are_renewed() {
        let period = Duration::from_secs(10);
        assert!(!is_suspect(&reading(2, 60, Some(3)), period));
        assert!(is_suspect(&reading(2, 60, Some(30)), period));
        // Renewals come every quarter lock (5 s here): 15 s without one is not yet a sign.
        assert!(!is_suspect(&reading(2, 60, Some(15)), period));
        // None since the jobs were taken, a whole lock ago: the keeper is stuck.
        assert!(!is_suspect(&reading(2, 12, None), period));
        assert!(is_suspect(&reading(2, 25, None), period));
    }

    #[test]
    fn a_worker_not_started_is_never_suspect() {
        let mut r = reading(0, 60, None);
        r.started = false;
        assert!(!is_suspect(&r, Duration::from_secs(1)));
    }

    #[test]
    fn a_pulse_counts_running_attempts_and_forgets_stopped_workers() {
        let board = PulseBoard::default();
        let pulse = Arc::new(WorkerPulse::new("mail", 3, Duration::from_secs(30)));
        board.add(&pulse);
        pulse.started();
        pulse.took();
        pulse.took();
        pulse.ended();
        let read = &board.readings()[0];
        assert_eq!((read.running, read.concurrency, read.started), (1, 3, true));
        pulse.stopped();
        assert!(board.readings().is_empty());
        drop(pulse);
        assert!(board.readings().is_empty());
    }
}
