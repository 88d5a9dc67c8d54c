//! BullMQ's own four benchmark scenarios (taskforcesh/bullmq-bench, `src/bullmq-suite.ts`
//! as of 2023-10), so that our figures can sit beside the ones people publish with it:
//!
//! | scenario | warm-up | timed | how | payload |
//! |---|---|---|---|---|
//! | `queue-add` | 1,000 | 1,000 | `add`, each awaited | 10 keys, each a chain 10 deep |
//! | `queue-add-bulk` | 1,000 | 10,000 | `addBulk` of 50 | one key |
//! | `worker-generic` | 1,000 | 1,000 | a worker at concurrency 1 | one key |
//! | `worker-concurrent` | 1,000 | 10,000 | a worker at concurrency 100 | one key |
//!
//! The worker scenarios' jobs are added before the worker starts (`addBulk` of 100, not
//! timed); the handler returns a one-key object and completed jobs are kept. As in
//! bullmq-bench, a run makes its payload (keys are UUIDs) and its result once and sends
//! them with every job, so the window holds the queue's work, not the making of data.
//!
//! Timed here: from the end of the warm-up (the first timed add sent, or the first
//! timed handler started) to the last add answered, or the last job in the completed
//! set. The rate is the timed jobs over that window. bullmq-bench's window opens one
//! job earlier (before the last warm-up add, or at the last warm-up handler's start) and
//! closes one earlier (before the last add, or at the last handler's start), and it
//! divides warm-up and timed jobs together by it, so the figure it prints is about twice
//! this one for `queue-add` and `worker-generic` and 1.1 times for the other two:
//! [`Scenario::as_bullmq_bench_prints`]. Ours and the raw engine see the last
//! completion by polling the completed set every millisecond (as the throughput suite
//! does), Node by its worker's `completed` events.
//! `bench/node/bench.mjs` runs the same scenarios for Node BullMQ.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::BenchResult;

/// Every scenario's warm-up (the processors' clocks need it as a constant).
pub(crate) const WARMUP: u64 = 1_000;

/// One of the four.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scenario {
    pub(crate) name: &'static str,
    pub(crate) warmup: u64,
    pub(crate) timed: u64,
    /// `addBulk` batches of this many; 0: one `add` at a time (adds only).
    pub(crate) bulk: u64,
    /// The worker's concurrency; `None`: an add scenario.
    pub(crate) concurrency: Option<usize>,
    /// The payload: this many keys, each a chain this deep.
    pub(crate) width: usize,
    pub(crate) depth: usize,
}

pub(crate) const SCENARIOS: [Scenario; 4] = [
    Scenario {
        name: "queue-add",
        warmup: WARMUP,
        timed: 1_000,
        bulk: 0,
        concurrency: None,
        width: 10,
        depth: 10,
    },
    Scenario {
        name: "queue-add-bulk",
        warmup: WARMUP,
        timed: 10_000,
        bulk: 50,
        concurrency: None,
        width: 1,
        depth: 1,
    },
    Scenario {
        name: "worker-generic",
        warmup: WARMUP,
        timed: 1_000,
        bulk: 100,
        concurrency: Some(1),
        width: 1,
        depth: 1,
    },
    Scenario {
        name: "worker-concurrent",
        warmup: WARMUP,
        timed: 10_000,
        bulk: 100,
        concurrency: Some(100),
        width: 1,
        depth: 1,
    },
];

impl Scenario {
    pub(crate) fn named(name: &str) -> Option<Scenario> {
        SCENARIOS.into_iter().find(|s| s.name == name)
    }

    pub(crate) fn total(self) -> u64 {
        self.warmup + self.timed
    }

    /// The queue a run uses: one per scenario, so our processors can be registered on
    /// the worker scenarios' queues by name.
    pub(crate) fn queue(self) -> String {
        format!("bench-{}", self.name)
    }

    /// A rate as bullmq-bench prints it: every job over the timed window.
    pub(crate) fn as_bullmq_bench_prints(self, rate: f64) -> f64 {
        rate * self.total() as f64 / self.timed as f64
    }

    /// A job's data: `width` keys, each the head of a chain `depth` objects deep.
    pub(crate) fn payload(self) -> Value {
        sample(self.width, self.depth)
    }
}

/// A worker scenario's clock: handler starts counted, the window opened by the first
/// start after the warm-up.
pub(crate) struct WorkerClock {
    started: AtomicU64,
    opened: OnceLock<Instant>,
}

impl WorkerClock {
    pub(crate) const fn new() -> Self {
        WorkerClock {
            started: AtomicU64::new(0),
            opened: OnceLock::new(),
        }
    }

    /// A handler starts its job.
    pub(crate) fn mark(&self, warmup: u64) {
        if self.started.fetch_add(1, Ordering::Relaxed) == warmup {
            let _ = self.opened.set(Instant::now());
        }
    }

    /// Waits for all of the scenario's jobs in the completed set; answers the window.
    /// A run that has not finished in [`RUN_LIMIT`] is an error (a job failed, or the
    /// worker stopped), not a bench that waits for ever.
    pub(crate) async fn window(&self, scenario: Scenario) -> BenchResult<Duration> {
        let started = || self.started.load(Ordering::Relaxed);
        super::wait_until_completed(
            &scenario.queue(),
            scenario.total(),
            started,
            Some(RUN_LIMIT),
        )
        .await?;
        let opened = self.opened.get().ok_or("no timed job started")?;
        Ok(opened.elapsed())
    }
}

/// How long a worker scenario may take.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Adds the scenario's jobs through `add_one` or `add_many`, as its `bulk` says, each
/// with the run's one payload; answers the time from the first timed add to the last one
/// answered.
pub(crate) async fn time_adds<One, Many>(
    scenario: Scenario,
    mut add_one: impl FnMut(Value) -> One,
    mut add_many: impl FnMut(Vec<Value>) -> Many,
) -> BenchResult<Duration>
where
    One: std::future::Future<Output = BenchResult<()>>,
    Many: std::future::Future<Output = BenchResult<()>>,
{
    let payload = scenario.payload();
    let mut opened = None;
    let mut sent = 0;
    while sent < scenario.total() {
        if sent == scenario.warmup {
            opened = Some(Instant::now());
        }
        if scenario.bulk == 0 {
            add_one(payload.clone()).await?;
            sent += 1;
        } else {
            // A batch does not straddle the warm-up's end: it ends there.
            let end = if sent < scenario.warmup {
                scenario.warmup
            } else {
                scenario.total()
            };
            let size = scenario.bulk.min(end - sent);
            add_many((0..size).map(|_| payload.clone()).collect()).await?;
            sent += size;
        }
    }
    Ok(opened.ok_or("the warm-up took every job")?.elapsed())
}

/// A worker scenario's jobs, added before the worker starts, in batches of its `bulk`.
pub(crate) fn setup_batches(scenario: Scenario) -> impl Iterator<Item = Vec<Value>> {
    let total = scenario.total();
    let payload = scenario.payload();
    (0..total)
        .step_by(usize::try_from(scenario.bulk.max(1)).unwrap_or(1))
        .map(move |start| {
            (start..(start + scenario.bulk.max(1)).min(total))
                .map(|_| payload.clone())
                .collect()
        })
}

/// What a worker scenario's handler returns: bullmq-bench's one-key result, made once.
pub(crate) fn result() -> Value {
    static RESULT: OnceLock<Value> = OnceLock::new();
    RESULT.get_or_init(|| sample(1, 1)).clone()
}

/// What bullmq-bench's sample data looks like: fresh UUID keys, nested `depth` deep.
pub(crate) fn sample(width: usize, depth: usize) -> Value {
    let mut object = Map::new();
    for _ in 0..width {
        let mut chain = Value::Object(Map::new());
        for _ in 1..depth {
            let mut level = Map::new();
            level.insert(uuid::Uuid::new_v4().to_string(), chain);
            chain = Value::Object(level);
        }
        object.insert(uuid::Uuid::new_v4().to_string(), chain);
    }
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(value: &Value) -> usize {
        match value {
            Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    #[test]
    fn the_payloads_are_bullmq_benchs_shapes() {
        let add = Scenario::named("queue-add").map(Scenario::payload);
        let add = add
            .as_ref()
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        assert_eq!(add.len(), 10);
        assert!(add.values().all(|chain| depth(chain) == 10));
        let one = sample(1, 1);
        assert_eq!(one.as_object().map(Map::len), Some(1));
        assert_eq!(depth(&one), 2, "{{\"<uuid>\":{{}}}}");
    }

    #[test]
    fn bullmq_bench_counts_the_warm_up_in_its_rate() {
        let add = Scenario::named("queue-add").expect("a scenario");
        assert_eq!(add.as_bullmq_bench_prints(1_000.0), 2_000.0);
        let bulk = Scenario::named("queue-add-bulk").expect("a scenario");
        assert!((bulk.as_bullmq_bench_prints(1_000.0) - 1_100.0).abs() < 1e-9);
        assert!(Scenario::named("queue-get").is_none());
    }
}
