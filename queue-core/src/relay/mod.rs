//! The relay: takes outbox rows in batches, adds their jobs to Redis, and deletes each
//! row only after Redis acknowledged its add.
//!
//! Any number of relays run at once. A relay leases the rows it takes, in the
//! database's time (PostgreSQL: `SKIP LOCKED`, so relays never wait on each other;
//! SQLite: its single writer), so no row is taken by two relays while the lease runs. A
//! relay that dies holding rows leaves them to the next one when the lease runs out;
//! that one adds only the rows whose jobs the first had not added (each row is marked
//! in Redis once its job is added: `queue/relayed.rs`). A row this relay cannot add
//! because of its own build or settings waits for one that can.
//!
//! A relay adds through the app's queues, which it holds weakly: it stops when the app
//! is dropped.

mod batch;
mod stats;
mod target;

pub use stats::RelayStats;
pub(crate) use target::RelayTarget;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use stats::Counters;

use crate::error::Error;
use crate::store::{database, ClaimedRow, Outbox};

/// A running relay. [`QueueAppBuilder::build`](crate::QueueAppBuilder::build) starts
/// one for an app with an outbox; [`QueueApp::start_relay`](crate::QueueApp::start_relay)
/// starts more (a process that only relays). Dropping the handle leaves it running until the app is dropped.
///
/// ```no_run
/// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
/// let relay = app.start_relay()?;
/// // ...
/// println!("{} jobs relayed", relay.stats().added);
/// relay.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Relay {
    control: Arc<Control>,
    task: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Control {
    stopping: AtomicBool,
    stop: Notify,
    counters: Counters,
}

impl Relay {
    /// Starts a relay of `outbox` into `app`. It stops when the app is dropped.
    pub(crate) fn start(app: Weak<dyn RelayTarget>, outbox: Outbox) -> Relay {
        let control = Arc::new(Control::default());
        let owner = format!("relay-{}", uuid::Uuid::new_v4().simple());
        let task = tokio::spawn(run(app, outbox, owner, control.clone()));
        Relay { control, task }
    }

    /// What it has done so far.
    pub fn stats(&self) -> RelayStats {
        let c = &self.control.counters;
        RelayStats {
            added: c.added.load(Ordering::Relaxed),
            duplicates: c.duplicates.load(Ordering::Relaxed),
            set_aside: c.set_aside.load(Ordering::Relaxed),
            deferred: c.deferred.load(Ordering::Relaxed),
        }
    }

    /// Stops after the batch in flight (its rows are added and deleted, or left for
    /// the next relay).
    pub async fn shutdown(self) {
        self.control.stopping.store(true, Ordering::SeqCst);
        self.control.stop.notify_one();
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "outbox relay task failed");
        }
    }
}

/// The waits after a failed batch: from 100 ms, doubling, at most 5 s.
fn retry_delay(failures: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << failures.min(6))).min(Duration::from_secs(5))
}

/// How often a relay holding its rows for Redis's memory looks again (the guard reads
/// the memory once a second).
const MEMORY_RECHECK: Duration = Duration::from_secs(1);

async fn run(app: Weak<dyn RelayTarget>, outbox: Outbox, owner: String, control: Arc<Control>) {
    let listener = tokio::spawn(outbox.store.listen(outbox.wake.clone()));
    let settings = outbox.settings;
    let mut failures = 0u32;
    let mut outage: Option<Instant> = None;
    // Since when Redis's memory has been above the guard's mark: the rows stay here.
    let mut holding: Option<Instant> = None;
    // Two overlaps keep Redis busy while the database works: when a batch was full, the
    // next batch is claimed while this one is added; and a batch's delete runs while the
    // next one is added. The rows in between are leased, so no relay takes them.
    let mut prefetched: Option<JoinHandle<Result<Vec<ClaimedRow>, Error>>> = None;
    let mut deleting: Option<JoinHandle<()>> = None;
    tracing::debug!(%owner, "outbox relay started");
    while !control.stopping.load(Ordering::SeqCst) {
        let Some(app) = app.upgrade() else {
            break;
        };
        if app.memory_high() {
            if holding.is_none() {
                holding = Some(Instant::now());
                tracing::warn!("Redis memory is above the high-water mark: the outbox keeps its rows until it falls");
            }
            drop(app);
            give_back(&outbox, &owner, prefetched.take()).await;
            tokio::select! {
                () = control.stop.notified() => {}
                () = tokio::time::sleep(MEMORY_RECHECK) => {}
            }
            continue;
        }
        if let Some(since) = holding.take() {
            tracing::info!(held_for = ?since.elapsed(), "Redis memory fell below the mark: the outbox relays again");
        }
        let claimed = match prefetched.take() {
            Some(task) => task.await.unwrap_or_else(|e| {
                Err(Error::Database(
                    format!("the claim task failed: {e}").into(),
                ))
            }),
            None => claim(outbox.clone(), owner.clone()).await,
        };
        if matches!(&claimed, Ok(rows) if rows.len() == settings.batch_size) {
            prefetched = Some(tokio::spawn(claim(outbox.clone(), owner.clone())));
        }
        let outcome = batch::run(&*app, &outbox, &owner, &control.counters, claimed).await;
        drop(app);
        if let Some(previous) = deleting.take() {
            let _ = previous.await;
        }
        if !outcome.done.is_empty() {
            deleting = Some(tokio::spawn(delete(outbox.clone(), outcome.done)));
        }
        let pause = match outcome.error {
            None => {
                if let Some(since) = outage.take() {
                    tracing::info!(down_for = ?since.elapsed(), "outbox relay is moving jobs again");
                }
                failures = 0;
                if outcome.taken == settings.batch_size {
                    continue; // more rows are waiting
                }
                None
            }
            Some(e) => {
                give_back(&outbox, &owner, prefetched.take()).await;
                // Said once per outage, not per row or per retry.
                if outage.is_none() {
                    tracing::warn!(error = %e, "outbox relay cannot move jobs; retrying with backoff until it can");
                    outage = Some(Instant::now());
                }
                failures = failures.saturating_add(1);
                Some(retry_delay(failures))
            }
        };
        let wait = pause.unwrap_or(settings.poll_interval);
        tokio::select! {
            () = control.stop.notified() => {}
            // A commit wakes the relay, unless it is backing off from a failure.
            () = outbox.wake.notified(), if pause.is_none() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
    give_back(&outbox, &owner, prefetched.take()).await;
    if let Some(previous) = deleting.take() {
        let _ = previous.await;
    }
    listener.abort();
    tracing::debug!(%owner, "outbox relay stopped");
}

/// Leases up to a batch of ready rows to `owner`.
async fn claim(outbox: Outbox, owner: String) -> Result<Vec<ClaimedRow>, Error> {
    let lease_ms = i64::try_from(outbox.settings.lease.as_millis()).unwrap_or(i64::MAX);
    let limit = i64::try_from(outbox.settings.batch_size).unwrap_or(i64::MAX);
    outbox
        .store
        .claim(&owner, lease_ms, limit)
        .await
        .map_err(database)
}

/// Gives back the rows of a claim this relay will not add (it stops, or Redis is down),
/// so that they need not wait for their lease to run out.
async fn give_back(
    outbox: &Outbox,
    owner: &str,
    claim: Option<JoinHandle<Result<Vec<ClaimedRow>, Error>>>,
) {
    let Some(claim) = claim else { return };
    if let Ok(Ok(rows)) = claim.await {
        let ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
        if let Err(e) = outbox.store.release(&ids, owner).await {
            tracing::debug!(error = %e, "cannot give back claimed outbox rows; their lease will run out");
        }
    }
}

/// Deletes the rows whose jobs Redis acknowledged. Should it fail, their leases run out
/// and a relay adds them again, under the same ids: one job all the same.
async fn delete(outbox: Outbox, rows: Vec<i64>) {
    if let Err(e) = outbox.store.delete(&rows).await {
        tracing::warn!(error = %e, rows = rows.len(), "cannot delete relayed outbox rows; they will be re-added (as the same jobs) when their lease runs out");
    }
}

#[cfg(test)]
mod tests {
    use super::retry_delay;
    use std::time::Duration;

    #[test]
    fn retries_back_off_to_five_seconds() {
        assert_eq!(retry_delay(1), Duration::from_millis(200));
        assert_eq!(retry_delay(3), Duration::from_millis(800));
        assert_eq!(retry_delay(40), Duration::from_secs(5));
    }
}
