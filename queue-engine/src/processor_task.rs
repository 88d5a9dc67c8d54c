//! Where a job's processor runs: in its slot's task, or in a task of its own once
//! processors are seen holding their thread (engine change 27, `PATCHES.md`).
//!
//! A slot's task is woken by the connection it waits on, and tokio puts a task woken
//! from a worker thread in that thread's LIFO slot, which other workers cannot steal
//! from (tokio-rs/tokio#4941). A processor that computes for a millisecond without an
//! `.await` keeps whatever sits in that slot (often the connection's own task) on its
//! thread meanwhile: on a multi-thread runtime the worker then ran, in some runs, at
//! the speed of one core, in others of all of them (measured in `BENCHMARKS.md`). A
//! task of its own, spawned from the slot's task, takes the LIFO slot in its place and
//! pushes the task that was there to the stealable queue, waking an idle worker.
//!
//! A spawn per job is not free: for processors that return at once it cost a worker a
//! third of its jobs at concurrency 10. So processors run in place until one poll of
//! one of them holds its thread past [`HOLDS_THREAD`], and in place again once a job's
//! polls are all shorter.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::task::JoinHandle;

use crate::error::Error;

/// A poll at least this long holds a runtime thread: far past what a processor that
/// awaits its I/O spends between two awaits (a few microseconds), and short enough
/// that a processor doing a millisecond of work is seen on its first job.
pub(crate) const HOLDS_THREAD: Duration = Duration::from_micros(250);

/// What a processor returns, boxed as the worker's processor function makes it.
pub(crate) type ProcessorFuture =
    Pin<Box<dyn Future<Output = Result<serde_json::Value, Error>> + Send>>;

/// One worker's choice of where its processors run, shared by its slots.
#[derive(Debug)]
pub(crate) struct ProcessorPlacement {
    /// Whether a poll of the latest processor to finish held its thread.
    holds_thread: Arc<AtomicBool>,
    /// A current-thread runtime has no other thread to spread over.
    can_spread: bool,
}

impl ProcessorPlacement {
    /// A placement for the runtime this is called on.
    pub(crate) fn for_current_runtime() -> Self {
        let can_spread = Handle::try_current()
            .map(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread)
            .unwrap_or(false);
        ProcessorPlacement {
            holds_thread: Arc::default(),
            can_spread,
        }
    }

    /// Whether the next processor runs in a task of its own.
    fn spawns(&self) -> bool {
        self.can_spread && self.holds_thread.load(Ordering::Relaxed)
    }

    /// Runs `processor` to its end, in place or in a task of its own. A panic in the
    /// processor continues in the caller, as it would have in place.
    pub(crate) async fn run(&self, processor: ProcessorFuture) -> Result<serde_json::Value, Error> {
        let timed = TimedPolls {
            inner: processor,
            held: false,
            holds_thread: self.holds_thread.clone(),
        };
        if !self.spawns() {
            return timed.await;
        }
        let mut task = AbortOnDrop(tokio::spawn(timed));
        match (&mut task.0).await {
            Ok(outcome) => outcome,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Only an abort cancels it, and only a drop of this future or the
            // runtime's shutdown aborts it: nobody is left to read this.
            Err(_) => Err(Error::WorkerClosed),
        }
    }
}

/// A processor's future that notes, when it ends, whether any of its polls held the
/// thread for [`HOLDS_THREAD`] or more.
struct TimedPolls {
    inner: ProcessorFuture,
    held: bool,
    holds_thread: Arc<AtomicBool>,
}

impl Future for TimedPolls {
    type Output = Result<serde_json::Value, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let started = Instant::now();
        let polled = self.inner.as_mut().poll(cx);
        if started.elapsed() >= HOLDS_THREAD {
            self.held = true;
        }
        if polled.is_ready() {
            self.holds_thread.store(self.held, Ordering::Relaxed);
        }
        polled
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

    fn returns(value: i64) -> ProcessorFuture {
        Box::pin(async move { Ok(serde_json::json!(value)) })
    }

    fn computes(value: i64) -> ProcessorFuture {
        Box::pin(async move {
            busy_for(HOLDS_THREAD * 2);
            Ok(serde_json::json!(value))
        })
    }

    /// The id of the task a processor runs in.
    fn task_id() -> ProcessorFuture {
        Box::pin(async { Ok(serde_json::json!(tokio::task::id().to_string())) })
    }

    /// Runs `scenario` in a task, as a worker's slot runs its processors.
    async fn in_a_task<F: Future<Output = ()> + Send + 'static>(scenario: F) {
        tokio::spawn(scenario)
            .await
            .expect("the scenario ran to its end");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_processor_that_held_its_thread_makes_the_next_one_run_in_a_task_of_its_own() {
        in_a_task(async {
            let placement = ProcessorPlacement::for_current_runtime();
            let here = serde_json::json!(tokio::task::id().to_string());
            assert_eq!(
                placement.run(task_id()).await.unwrap(),
                here,
                "in place at first"
            );
            assert_eq!(
                placement.run(computes(1)).await.unwrap(),
                serde_json::json!(1)
            );
            let elsewhere = placement.run(task_id()).await.unwrap();
            assert_ne!(elsewhere, here, "after a long poll, in a task of its own");
            // That processor's polls were short: the next one runs in place again.
            assert_eq!(placement.run(task_id()).await.unwrap(), here);
        })
        .await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_current_thread_runtime_runs_every_processor_in_place() {
        in_a_task(async {
            let placement = ProcessorPlacement::for_current_runtime();
            let here = serde_json::json!(tokio::task::id().to_string());
            placement.run(computes(1)).await.unwrap();
            assert_eq!(placement.run(task_id()).await.unwrap(), here);
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_spawned_processor_s_panic_continues_in_the_caller() {
        let placement = Arc::new(ProcessorPlacement::for_current_runtime());
        placement.run(computes(1)).await.unwrap();
        let caller = placement.clone();
        let outcome = tokio::spawn(async move {
            caller
                .run(Box::pin(async { panic!("the processor's own panic") }))
                .await
        })
        .await;
        let payload = outcome
            .expect_err("the panic reached the caller")
            .into_panic();
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"the processor's own panic")
        );
        assert_eq!(
            placement.run(returns(2)).await.unwrap(),
            serde_json::json!(2)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_caller_stops_a_spawned_processor() {
        let placement = ProcessorPlacement::for_current_runtime();
        placement.run(computes(1)).await.unwrap();
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
        let never_ends: ProcessorFuture = Box::pin(async move {
            // Dropped with the task: the receiver then sees the channel closed.
            let _dropped = dropped_tx;
            std::future::pending::<()>().await;
            Ok(serde_json::Value::Null)
        });
        let run = placement.run(never_ends);
        tokio::select! {
            _ = run => unreachable!("the processor never ends"),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        tokio::time::timeout(Duration::from_secs(5), dropped_rx)
            .await
            .expect("the spawned processor was dropped")
            .expect_err("dropped, not sent on");
    }
}
