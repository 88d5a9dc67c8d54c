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

use super::connection::Connection;
use super::convert::{engine_error, millis};
use super::runtime::{on_engine, spawn_on_engine};
use crate::error::Error;

/// Job id -> lock token, for the attempts running now.
type Held = Mutex<HashMap<String, String>>;

/// Renews the locks of one queue's running attempts.
#[derive(Debug, Clone)]
pub(super) struct LockKeeper {
    held: Arc<Held>,
}

/// Keeps a job's lock renewed until dropped (when the attempt ends, however it ends).
#[derive(Debug)]
pub(super) struct LockHold {
    held: Arc<Held>,
    job_id: String,
}

impl LockKeeper {
    /// Starts renewing, every half `lock_duration`, on the engine runtime. It stops by
    /// itself once the keeper and every hold are gone.
    pub(super) async fn start(
        conn: &Connection,
        queue: &str,
        lock_duration: Duration,
    ) -> Result<Self, Error> {
        let held = Arc::new(Held::default());
        let options = conn.queue_options();
        let name = queue.to_owned();
        // Made on the engine runtime, so that its connection is served there.
        let engine_queue =
            on_engine(async move { bullmq::Queue::with_options(&name, options).await })
                .await?
                .map_err(engine_error)?;
        spawn_on_engine(renew(
            engine_queue,
            queue.to_owned(),
            Arc::downgrade(&held),
            lock_duration,
        ))?;
        Ok(LockKeeper { held })
    }

    /// Renews `job_id`'s lock (held under `token`) until the hold is dropped.
    pub(super) fn hold(&self, job_id: &str, token: &str) -> LockHold {
        lock(&self.held).insert(job_id.to_owned(), token.to_owned());
        LockHold {
            held: self.held.clone(),
            job_id: job_id.to_owned(),
        }
    }
}

impl Drop for LockHold {
    fn drop(&mut self) {
        lock(&self.held).remove(&self.job_id);
    }
}

fn lock(held: &Held) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn renew(queue: bullmq::Queue, name: String, held: Weak<Held>, lock_duration: Duration) {
    let mut ticks = tokio::time::interval(lock_duration / 2);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let Some(held) = held.upgrade() else { break };
        let running: Vec<(String, String)> = lock(&held)
            .iter()
            .map(|(id, token)| (id.clone(), token.clone()))
            .collect();
        drop(held);
        for (job_id, token) in running {
            let renewed = match queue.get_job(&job_id).await {
                Ok(Some(job)) => job.extend_lock(&token, millis(lock_duration)).await,
                // Removed while running: nothing to keep.
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = renewed {
                tracing::warn!(queue = %name, %job_id, error = %e, "could not renew the job's lock; if it expires, another worker may run the job again");
            }
        }
    }
}
