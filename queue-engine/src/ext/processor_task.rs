//! Where a job's processor runs: in its slot's task, or in a task of its own while
//! processors are seen holding their thread (engine change 27, `PATCHES.md`).
//!
//! A slot's task is woken by the connection it waits on, and tokio puts a task woken
//! from a worker thread in that thread's LIFO slot, which other workers cannot steal
//! from (tokio-rs/tokio#4941). A processor that computes for a millisecond without an
//! `.await` keeps whatever sits in that slot (often the connection's own task) on its
//! thread meanwhile: on a multi-thread runtime the worker then ran, in some runs, at
//! the speed of one core, in others of all of them (measured in
//! `docs/benchmarks/2026-12-04.md`). A task of its own, spawned from the slot's task,
//! takes the LIFO slot in its place and pushes the task that was there to the stealable
//! queue, waking an idle worker.
//!
//! A spawn per job is not free: for processors that return at once it cost a worker a
//! third of its jobs at concurrency 10. So processors run in place until one of them
//! holds its thread for [`LONG_POLL`] in one go (the call that makes its future, or one
//! poll of it), and in place again once [`SPAWNED_AFTER_LONG_POLL`] processors in a row
//! have not. The choice is the worker's, not a slot's: the first jobs of a worker start
//! in place, as many as it runs at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::task::JoinHandle;

use crate::error::Error;
use crate::job::Job;

/// Holding a runtime thread this long in one go makes a processor one that computes:
/// far past what a processor that awaits its I/O spends between two awaits (a few
/// microseconds), and short enough that one doing a millisecond of work is seen on its
/// first job. Wall time: a thread the system took away for this long counts too, and
/// costs a few spawns.
pub(crate) const LONG_POLL: Duration = Duration::from_micros(250);

/// Processors run in tasks of their own after a long poll, until this many in a row
/// have had none: a queue whose jobs are of several kinds keeps its computing ones
/// spread while its quick ones pass between them.
pub(crate) const SPAWNED_AFTER_LONG_POLL: u32 = 8;

/// What a processor returns, boxed as the worker's processor function makes it.
type ProcessorFuture = Pin<Box<dyn Future<Output = Result<serde_json::Value, Error>> + Send>>;

/// A processor taking a job and a `T`: the worker's `ProcessorFn` is
/// `Processor<CancellationToken>`. Generic here so that this module needs nothing of the
/// worker's (which imports it).
pub(crate) type Processor<T> = Arc<dyn Fn(Job, T) -> ProcessorFuture + Send + Sync>;

/// One worker's choice of where its processors run, shared by its slots.
#[derive(Debug)]
pub(crate) struct ProcessorPlacement {
    /// How many more processors run in tasks of their own.
    spawns_left: Arc<AtomicU32>,
    /// A current-thread runtime has no other thread to spread over.
    can_spread: bool,
}

impl ProcessorPlacement {
    /// A placement for the runtime this is called on (none: every processor in place).
    pub(crate) fn for_current_runtime() -> Self {
        let can_spread = Handle::try_current()
            .map(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread)
            .unwrap_or(false);
        ProcessorPlacement {
            spawns_left: Arc::default(),
            can_spread,
        }
    }

    /// Calls `processor` and runs its future to the end, in place or in a task of its
    /// own. A panic in the processor continues in the caller, as it would in place.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        processor: &Processor<T>,
        job: Job,
        token: T,
    ) -> Result<serde_json::Value, Error> {
        if !(self.can_spread && self.spawns_left.load(Ordering::Relaxed) > 0) {
            return timed(&self.spawns_left, processor, job, token).await;
        }
        let (processor, spawns_left) = (processor.clone(), self.spawns_left.clone());
        let spawned =
            tokio::spawn(async move { timed(&spawns_left, &processor, job, token).await });
        let mut task = AbortOnDrop(spawned);
        match (&mut task.0).await {
            Ok(outcome) => outcome,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: by the runtime's shutdown (a spawn during it is cancelled at
            // once) or by an abort, which only this future's drop sends. In place, the
            // processor would have been dropped without an outcome: so here, which
            // leaves the job to stalled-job recovery rather than failing an attempt
            // nobody failed.
            Err(_) => std::future::pending().await,
        }
    }
}

/// Calls `processor` and awaits its future, then notes whether it held its thread for
/// [`LONG_POLL`] in one go: the call, or any one poll.
async fn timed<T>(
    spawns_left: &AtomicU32,
    processor: &Processor<T>,
    job: Job,
    token: T,
) -> Result<serde_json::Value, Error> {
    let called = Instant::now();
    let future = processor(job, token);
    let polls = TimedPolls {
        inner: future,
        held: called.elapsed() >= LONG_POLL,
    };
    let (outcome, held) = polls.await;
    if held {
        spawns_left.store(SPAWNED_AFTER_LONG_POLL, Ordering::Relaxed);
    } else {
        // A hint, not a count to keep exact: a lost decrement costs one spawn.
        let _ = spawns_left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            left.checked_sub(1)
        });
    }
    outcome
}

/// A processor's future, and whether any of its polls so far took [`LONG_POLL`].
struct TimedPolls {
    inner: ProcessorFuture,
    held: bool,
}

impl Future for TimedPolls {
    type Output = (Result<serde_json::Value, Error>, bool);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let started = Instant::now();
        let polled = self.inner.as_mut().poll(cx);
        if started.elapsed() >= LONG_POLL {
            self.held = true;
        }
        polled.map(|outcome| (outcome, self.held))
    }
}

/// A spawned processor is aborted when the future that awaits it is dropped, as the
/// processor itself would have been dropped in place.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy_for(time: Duration) {
        let started = Instant::now();
        while started.elapsed() < time {
            std::hint::spin_loop();
        }
    }

    /// A processor that computes for `computes_in_call` when called, then, in its
    /// future, for `computes_in_future`, and answers with what `answer` makes of the
    /// job's data.
    fn processor(
        computes_in_call: Duration,
        computes_in_future: Duration,
        answer: fn(&serde_json::Value) -> serde_json::Value,
    ) -> Processor<()> {
        Arc::new(move |job: Job, _token| {
            busy_for(computes_in_call);
            let data = job.data().clone();
            Box::pin(async move {
                busy_for(computes_in_future);
                Ok(answer(&data))
            })
        })
    }

    /// The id of the task the processor's future runs in.
    fn task_id(_: &serde_json::Value) -> serde_json::Value {
        serde_json::json!(tokio::task::id().to_string())
    }

    fn echo(data: &serde_json::Value) -> serde_json::Value {
        data.clone()
    }

    fn job(n: i64) -> Job {
        Job::new("j", serde_json::json!(n), None)
    }

    async fn run(placement: &ProcessorPlacement, processor: &Processor<()>) -> serde_json::Value {
        placement
            .run(processor, job(1), ())
            .await
            .expect("the processor answers")
    }

    /// Runs `scenario` in a task, as a worker's slot runs its processors.
    async fn in_a_task<F: Future<Output = ()> + Send + 'static>(scenario: F) {
        tokio::spawn(scenario)
            .await
            .expect("the scenario ran to its end");
    }

    fn here() -> serde_json::Value {
        serde_json::json!(tokio::task::id().to_string())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_poll_spreads_the_next_processors_until_enough_have_been_quick() {
        in_a_task(async {
            let placement = ProcessorPlacement::for_current_runtime();
            let quick = processor(Duration::ZERO, Duration::ZERO, task_id);
            let computing = processor(Duration::ZERO, LONG_POLL * 2, echo);
            assert_eq!(run(&placement, &quick).await, here(), "in place at first");
            assert_eq!(run(&placement, &computing).await, serde_json::json!(1));
            for _ in 0..SPAWNED_AFTER_LONG_POLL {
                assert_ne!(
                    run(&placement, &quick).await,
                    here(),
                    "in a task of its own"
                );
            }
            assert_eq!(run(&placement, &quick).await, here(), "in place again");
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_processor_that_computes_before_it_returns_its_future_counts_too() {
        in_a_task(async {
            let placement = ProcessorPlacement::for_current_runtime();
            let computing_call = processor(LONG_POLL * 2, Duration::ZERO, echo);
            let quick = processor(Duration::ZERO, Duration::ZERO, task_id);
            run(&placement, &computing_call).await;
            assert_ne!(run(&placement, &quick).await, here());
        })
        .await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_current_thread_runtime_runs_every_processor_in_place() {
        in_a_task(async {
            let placement = ProcessorPlacement::for_current_runtime();
            let computing = processor(Duration::ZERO, LONG_POLL * 2, echo);
            let quick = processor(Duration::ZERO, Duration::ZERO, task_id);
            run(&placement, &computing).await;
            assert_eq!(run(&placement, &quick).await, here());
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_a_spawned_processor_continues_in_the_caller() {
        let placement = Arc::new(ProcessorPlacement::for_current_runtime());
        let computing = processor(Duration::ZERO, LONG_POLL * 2, echo);
        run(&placement, &computing).await;
        let panics: Processor<()> =
            Arc::new(|_job, _token| Box::pin(async { panic!("the processor's own panic") }));
        let caller = placement.clone();
        let outcome = tokio::spawn(async move { run(&caller, &panics).await }).await;
        let payload = outcome
            .expect_err("the panic reached the caller")
            .into_panic();
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"the processor's own panic")
        );
        let quick = processor(Duration::ZERO, Duration::ZERO, echo);
        assert_eq!(run(&placement, &quick).await, serde_json::json!(1));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_caller_stops_a_spawned_processor() {
        let placement = ProcessorPlacement::for_current_runtime();
        run(&placement, &processor(Duration::ZERO, LONG_POLL * 2, echo)).await;
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
        let dropped_tx = Arc::new(std::sync::Mutex::new(Some(dropped_tx)));
        let never_ends: Processor<()> = Arc::new(move |_job, _token| {
            // Dropped with the spawned task: the receiver then sees the channel closed.
            let dropped = dropped_tx.lock().unwrap().take();
            Box::pin(async move {
                let _dropped = dropped;
                std::future::pending::<()>().await;
                Ok(serde_json::Value::Null)
            })
        });
        let running = placement.run(&never_ends, job(1), ());
        tokio::select! {
            _ = running => unreachable!("the processor never ends"),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        tokio::time::timeout(Duration::from_secs(5), dropped_rx)
            .await
            .expect("the spawned processor was dropped")
            .expect_err("dropped, not sent on");
    }
}
