//! Lock renewal where a blocked handler cannot starve it.
//!
//! A handler that blocks its thread (CPU work, a synchronous client,
//! `std::thread::sleep`) stops every task queued behind it on the app's runtime. The
//! engine renews job locks from such a task, so a job could lose its lock while its
//! handler still runs, be recovered as stalled and run twice: BullMQ's most reported
//! problem. So the engine's renewal is off, and this keeper renews the locks of the
//! running attempts from the engine runtime ([`super::runtime`]), over a connection
//! of its own: every half lock, all of them in one `extendLocks` call, by job id and
//! lock token, without reading the jobs.
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
use super::sink::{EngineEvent, EventSink};
use crate::error::Error;

/// What the keeper holds for one running attempt: how to stop it if its lock is lost.
#[derive(Clone, Debug)]
struct Attempt {
    cancel: CancellationToken,
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
        let attempt = Attempt { cancel };
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

/// How long locks last, and how long one renewal may take: the app's command timeout,
/// and at most half the lock (a renewal slower than that is too late anyway, and must
/// not hold up the others).
#[derive(Debug, Clone, Copy)]
struct Timing {
    lock_duration: Duration,
    renew_within: Duration,
}

/// Renews the locks of `batch` (each job id at most once) in one script call, under the
/// time limit. Returns the jobs whose lock is no longer ours (expired, taken over by
/// another run, or the job removed), or why the renewal failed.
async fn renew_batch(
    queue: &bullmq::Queue,
    batch: &[(&str, &str)],
    timing: Timing,
) -> Result<Vec<String>, String> {
    let renewal = queue.extend_locks(batch, millis(timing.lock_duration));
    match tokio::time::timeout(timing.renew_within, renewal).await {
        Ok(Ok(lost)) => Ok(lost),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {:?}", timing.renew_within)),
    }
}

/// Splits the running attempts into batches in which each job id appears once: BullMQ's
/// script answers with job ids, so a stale run and a fresh run of one job (two tokens)
/// must not share a batch. Nearly always there is one batch.
fn batches(running: &[(String, String)]) -> Vec<Vec<(&str, &str)>> {
    let mut batches: Vec<Vec<(&str, &str)>> = Vec::new();
    for (job_id, token) in running {
        let free = batches
            .iter_mut()
            .find(|batch| batch.iter().all(|(id, _)| id != job_id));
        match free {
            Some(batch) => batch.push((job_id, token)),
            None => batches.push(vec![(job_id, token)]),
        }
    }
    batches
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
        let Some(now_held) = held.upgrade() else {
            break;
        };
        let running: HashMap<(String, String), Attempt> = lock(&now_held).clone();
        drop(now_held);
        let keys: Vec<(String, String)> = running.keys().cloned().collect();
        let batches = batches(&keys);
        // All batches at once, on the multiplexed connection: a pass costs one round
        // trip and one script call, however many jobs run.
        let results = futures::future::join_all(
            batches
                .iter()
                .map(|batch| renew_batch(&queue, batch, timing)),
        )
        .await;
        // An attempt that ended during the pass released its lock: it is not lost.
        let still_held = |key: &(String, String)| {
            held.upgrade()
                .is_some_and(|held| lock(&held).contains_key(key))
        };
        for (batch, result) in batches.iter().zip(results) {
            match result {
                Ok(lost) => {
                    for (job_id, token) in
                        batch.iter().filter(|(id, _)| lost.iter().any(|l| l == id))
                    {
                        let key = ((*job_id).to_owned(), (*token).to_owned());
                        let Some(attempt) = running.get(&key).filter(|_| still_held(&key)) else {
                            continue;
                        };
                        // Two runs of one job must not go on side by side unknowingly:
                        // this one stops (its `job.cancelled()` fires) and says so.
                        tracing::warn!(queue = %name, %job_id, "the job's lock was lost (another run holds it, or the job is gone); cancelling this run");
                        attempt.cancel.cancel();
                        sink.deliver(EngineEvent::LockLost {
                            job_id: (*job_id).to_owned(),
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!(queue = %name, jobs = batch.len(), error = %e, "could not renew the locks of running jobs; if they expire, another worker may run the jobs again");
                }
            }
        }
    }
}
