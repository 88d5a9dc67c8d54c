//! Lock renewal where a blocked handler cannot starve it.
//!
//! A handler that blocks its thread (CPU work, a synchronous client,
//! `std::thread::sleep`) stops every task queued behind it on the app's runtime. The
//! engine renews job locks from such a task, so a job could lose its lock while its
//! handler still runs, be recovered as stalled and run twice: BullMQ's most reported
//! problem. So the engine's renewal is off, and this keeper renews the locks of the
//! running attempts from the engine runtime ([`super::runtime`]), over a connection
//! of its own.
//!
//! Handlers themselves stay on the app's runtime with the engine's fetch loop: moving
//! each attempt to another runtime costs two thread wake-ups, which halved throughput
//! at concurrency 1 when measured (`BENCHMARKS.md`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use bullmq::worker::CancellationToken;

use super::connection::Connection;
use super::convert::{engine_error, millis};
use super::runtime::{on_engine, spawn_on_engine};
use super::worker::EventSink;
use crate::error::Error;
use crate::events::EngineEvent;

/// What the keeper holds for one running attempt: its cancellation, and the job as the
/// keeper's own queue read it (once, at the first renewal: the engine's extend-lock is a
/// method of a read job, and reading the whole hash, payload included, before every
/// renewal would cost far more than the renewal).
#[derive(Clone, Debug)]
struct Attempt {
    cancel: CancellationToken,
    job: Arc<tokio::sync::OnceCell<Option<bullmq::Job>>>,
}

/// (job id, lock token) -> the attempt, for the attempts running now. Keyed by the
/// token too: when a stale run of a job ends, it drops its own hold, never that of a
/// fresh run of the same job (which holds another token).
type Held = Mutex<HashMap<(String, String), Attempt>>;

/// Renews the locks of one queue's running attempts.
#[derive(Debug, Clone)]
pub(super) struct LockKeeper {
    held: Arc<Held>,
}

/// Keeps a job's lock renewed until dropped (when the attempt ends, however it ends).
#[derive(Debug)]
pub(super) struct LockHold {
    held: Arc<Held>,
    key: (String, String),
}

impl LockKeeper {
    /// Starts renewing, every half `lock_duration`, on the engine runtime. It stops by
    /// itself once the keeper and every hold are gone.
    pub(super) async fn start(
        conn: &Connection,
        queue: &str,
        lock_duration: Duration,
        renew_within: Duration,
        sink: Arc<dyn EventSink>,
    ) -> Result<Self, Error> {
        let held = Arc::new(Held::default());
        let options = conn.queue_options();
        let name = queue.to_owned();
        // Made on the engine runtime, so that its connection is served there.
        let engine_queue = on_engine(queue, async move {
            bullmq::Queue::with_options(&name, options).await
        })
        .await?
        .map_err(engine_error)?;
        spawn_on_engine(
            queue,
            renew(
                engine_queue,
                queue.to_owned(),
                Arc::downgrade(&held),
                Timing {
                    lock_duration,
                    renew_within,
                },
                sink,
            ),
        )?;
        Ok(LockKeeper { held })
    }

    /// Renews `job_id`'s lock (held under `token`) until the hold is dropped; if the
    /// lock is lost, `cancel` stops the attempt.
    pub(super) fn hold(&self, job_id: &str, token: &str, cancel: CancellationToken) -> LockHold {
        let key = (job_id.to_owned(), token.to_owned());
        let attempt = Attempt {
            cancel,
            job: Arc::new(tokio::sync::OnceCell::new()),
        };
        lock(&self.held).insert(key.clone(), attempt);
        LockHold {
            held: self.held.clone(),
            key,
        }
    }
}

impl Drop for LockHold {
    fn drop(&mut self) {
        lock(&self.held).remove(&self.key);
    }
}

fn lock(held: &Held) -> std::sync::MutexGuard<'_, HashMap<(String, String), Attempt>> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one renewal found.
enum Renewal {
    Renewed,
    /// The job is gone (removed while it ran): nothing to keep.
    Gone,
    /// Another run holds the lock now (ours expired, or the job was taken over).
    Lost,
    Failed(String),
}

/// How long locks last, and how long one renewal may take: the app's command timeout,
/// and at most half the lock (a renewal slower than that is too late anyway, and must
/// not hold up the others).
#[derive(Debug, Clone, Copy)]
struct Timing {
    lock_duration: Duration,
    renew_within: Duration,
}

async fn renew_one(
    queue: &bullmq::Queue,
    job_id: &str,
    token: &str,
    attempt: &Attempt,
    timing: Timing,
) -> Renewal {
    let Timing {
        lock_duration,
        renew_within,
    } = timing;
    let renewal = async {
        let read = attempt.job.get_or_try_init(|| queue.get_job(job_id)).await;
        match read {
            Ok(Some(job)) => match job.extend_lock(token, millis(lock_duration)).await {
                Ok(()) => Renewal::Renewed,
                Err(bullmq::Error::JobLocked(_)) => Renewal::Lost,
                Err(e) => Renewal::Failed(e.to_string()),
            },
            Ok(None) => Renewal::Gone,
            Err(e) => Renewal::Failed(e.to_string()),
        }
    };
    tokio::time::timeout(renew_within, renewal)
        .await
        .unwrap_or_else(|_| Renewal::Failed(format!("no answer within {renew_within:?}")))
}

async fn renew(
    queue: bullmq::Queue,
    name: String,
    held: Weak<Held>,
    timing: Timing,
    sink: Arc<dyn EventSink>,
) {
    let mut ticks = tokio::time::interval(timing.lock_duration / 2);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let Some(held) = held.upgrade() else { break };
        let running: Vec<((String, String), Attempt)> = lock(&held)
            .iter()
            .map(|(key, attempt)| (key.clone(), attempt.clone()))
            .collect();
        drop(held);
        // All at once: on the multiplexed connection they go out together, so a pass
        // costs one round trip, however many jobs run.
        let renewals =
            futures::future::join_all(running.iter().map(|((job_id, token), attempt)| {
                renew_one(&queue, job_id, token, attempt, timing)
            }))
            .await;
        for (((job_id, _), attempt), renewal) in running.into_iter().zip(renewals) {
            let cancel = attempt.cancel;
            match renewal {
                Renewal::Renewed | Renewal::Gone => {}
                Renewal::Lost => {
                    // Two runs of one job must not go on side by side unknowingly: this
                    // one stops (its `job.cancelled()` fires) and says so.
                    tracing::warn!(queue = %name, %job_id, "the job's lock was lost (another run holds it); cancelling this run");
                    cancel.cancel();
                    sink.deliver(EngineEvent::LockLost { job_id });
                }
                Renewal::Failed(e) => {
                    tracing::warn!(queue = %name, %job_id, error = %e, "could not renew the job's lock; if it expires, another worker may run the job again");
                }
            }
        }
    }
}
