//! The relay: takes outbox rows in batches, adds their jobs to Redis, and deletes each
//! row only after Redis acknowledged its add.
//!
//! Any number of relays run at once. A relay leases the rows it takes (PostgreSQL:
//! `SKIP LOCKED`, so relays never wait on each other; SQLite: its single writer), so no
//! row is taken by two relays while the lease runs. A relay that dies holding rows
//! leaves them to the next one when the lease runs out; that one adds the same job ids
//! again, and BullMQ's job-id and deduplication checks make it one job.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::backend::ClaimedRow;
use super::outbox::{database, Outbox};
use super::record::StoredOptions;
use crate::app::{AppInner, QueueApp};
use crate::clock::now_ms;
use crate::error::Error;
use crate::options::{Deduplication, JobOptions};
use crate::queue::BulkJob;

/// What a relay has done since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayStats {
    /// Rows whose job Redis acknowledged as new.
    pub added: u64,
    /// Rows whose job Redis already had (a row added again after a relay died, or a
    /// job id another producer used first). Nothing was added for them.
    pub duplicates: u64,
    /// Rows set aside because their job can never be added as it is.
    pub set_aside: u64,
}

#[derive(Debug, Default)]
struct Counters {
    added: AtomicU64,
    duplicates: AtomicU64,
    set_aside: AtomicU64,
}

/// A running relay. [`QueueAppBuilder::build`](crate::QueueAppBuilder::build) starts
/// one for an app with an outbox; [`QueueApp::start_relay`] starts more (a process
/// that only relays). Dropping the handle leaves it running until the app is dropped.
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
    /// Starts a relay for `app`'s outbox. It holds the app weakly: it stops when the
    /// app is dropped.
    pub(crate) fn start(app: &QueueApp, outbox: Outbox) -> Relay {
        let control = Arc::new(Control::default());
        let owner = format!("relay-{}", uuid::Uuid::new_v4().simple());
        let task = tokio::spawn(run(
            Arc::downgrade(&app.inner),
            outbox,
            owner,
            control.clone(),
        ));
        Relay { control, task }
    }

    /// What it has done so far.
    pub fn stats(&self) -> RelayStats {
        let c = &self.control.counters;
        RelayStats {
            added: c.added.load(Ordering::Relaxed),
            duplicates: c.duplicates.load(Ordering::Relaxed),
            set_aside: c.set_aside.load(Ordering::Relaxed),
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

async fn run(app: Weak<AppInner>, outbox: Outbox, owner: String, control: Arc<Control>) {
    let listener = tokio::spawn(outbox.store.listen(outbox.wake.clone()));
    let settings = outbox.settings;
    let mut failures = 0u32;
    let mut outage: Option<Instant> = None;
    // Two overlaps keep Redis busy while the database works: when a batch was full, the
    // next batch is claimed while this one is added; and a batch's delete runs while the
    // next one is added. The rows in between are leased, so no relay takes them.
    let mut prefetched: Option<JoinHandle<Result<Vec<ClaimedRow>, Error>>> = None;
    let mut deleting: Option<JoinHandle<()>> = None;
    tracing::debug!(%owner, "outbox relay started");
    while !control.stopping.load(Ordering::SeqCst) {
        let Some(app) = app.upgrade().map(|inner| QueueApp { inner }) else {
            break;
        };
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
        let outcome = batch(&app, &outbox, &owner, &control.counters, claimed).await;
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
    let now = crate::store::db_now_ms();
    let lease_ms = i64::try_from(outbox.settings.lease.as_millis()).unwrap_or(i64::MAX);
    let limit = i64::try_from(outbox.settings.batch_size).unwrap_or(i64::MAX);
    outbox
        .store
        .claim(&owner, now, now.saturating_add(lease_ms), limit)
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
        let ids: Vec<i64> = rows.iter().map(|row| row.0).collect();
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

/// A row ready to be added, or why it never can be.
struct Decoded {
    row_id: i64,
    queue: String,
    job: Result<BulkJob<serde_json::Value>, String>,
}

fn decode(
    row: super::backend::ClaimedRow,
    now: u64,
    settings: &super::outbox::RelaySettings,
) -> Decoded {
    let (row_id, queue, job_id, job_name, data, options, created_at_ms) = row;
    let job = (|| {
        let data: serde_json::Value =
            serde_json::from_str(&data).map_err(|e| format!("the row's data is not JSON ({e})"))?;
        let stored: StoredOptions = serde_json::from_str(&options)
            .map_err(|e| format!("the row's options are not readable ({e})"))?;
        let mut options: JobOptions = stored.into_options(job_id.clone());
        // A delay counts from the commit, not from when the relay got to the row.
        let waited =
            Duration::from_millis(now.saturating_sub(u64::try_from(created_at_ms).unwrap_or(0)));
        options.delay = options
            .delay
            .map(|d| d.saturating_sub(waited))
            .filter(|d| !d.is_zero());
        if options.deduplication.is_none() {
            options.deduplication =
                Some(Deduplication::new(format!("outbox-{job_id}")).ttl(settings.dedup_window));
        }
        Ok(BulkJob::new(job_name, data).options(options))
    })();
    Decoded { row_id, queue, job }
}

/// What one batch did.
#[derive(Default)]
struct Batch {
    /// Rows it took.
    taken: usize,
    /// Rows whose jobs Redis acknowledged, to delete.
    done: Vec<i64>,
    /// Why it stopped short (the rows it could not add were given back).
    error: Option<Error>,
}

/// One batch: add the claimed rows; the caller deletes what was added.
async fn batch(
    app: &QueueApp,
    outbox: &Outbox,
    owner: &str,
    counters: &Counters,
    claimed: Result<Vec<ClaimedRow>, Error>,
) -> Batch {
    let mut outcome = Batch::default();
    let result = match claimed {
        Ok(rows) => add_claimed(app, outbox, owner, counters, rows, &mut outcome).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        outcome.error = Some(e);
    }
    outcome
}

async fn add_claimed(
    app: &QueueApp,
    outbox: &Outbox,
    owner: &str,
    counters: &Counters,
    rows: Vec<ClaimedRow>,
    outcome: &mut Batch,
) -> Result<(), Error> {
    let store = &outbox.store;
    let now = now_ms();
    outcome.taken = rows.len();
    let mut by_queue: BTreeMap<String, Vec<(i64, BulkJob<serde_json::Value>)>> = BTreeMap::new();
    for decoded in rows
        .into_iter()
        .map(|row| decode(row, now, &outbox.settings))
    {
        match decoded.job {
            Ok(job) => by_queue
                .entry(decoded.queue)
                .or_default()
                .push((decoded.row_id, job)),
            Err(reason) => set_aside(outbox, counters, decoded.row_id, &reason).await?,
        }
    }
    let mut unavailable = None;
    for (queue, jobs) in by_queue {
        let ids: Vec<i64> = jobs.iter().map(|(id, _)| *id).collect();
        if unavailable.is_some() {
            store.release(&ids, owner).await.map_err(database)?;
            continue;
        }
        let handle = match app.queue::<serde_json::Value>(&queue) {
            Ok(handle) => handle,
            Err(e) => {
                for id in ids {
                    set_aside(outbox, counters, id, &e.to_string()).await?;
                }
                continue;
            }
        };
        match handle
            .add_relayed(jobs.into_iter().map(|(_, job)| job).collect())
            .await
        {
            Ok(added) => {
                for (id, added) in ids.into_iter().zip(added) {
                    match added {
                        Ok(added) => {
                            let counter = if added.duplicate {
                                &counters.duplicates
                            } else {
                                &counters.added
                            };
                            counter.fetch_add(1, Ordering::Relaxed);
                            outcome.done.push(id);
                        }
                        Err(e) => set_aside(outbox, counters, id, &e.to_string()).await?,
                    }
                }
            }
            Err(e) => {
                store.release(&ids, owner).await.map_err(database)?;
                unavailable = Some(e);
            }
        }
    }
    unavailable.map_or(Ok(()), Err)
}

async fn set_aside(
    outbox: &Outbox,
    counters: &Counters,
    row_id: i64,
    reason: &str,
) -> Result<(), Error> {
    tracing::error!(
        row_id,
        reason,
        "outbox row set aside: its job can never be added as it is"
    );
    let now = crate::store::db_now_ms();
    outbox
        .store
        .set_aside(row_id, reason, now)
        .await
        .map_err(database)?;
    counters.set_aside.fetch_add(1, Ordering::Relaxed);
    Ok(())
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
