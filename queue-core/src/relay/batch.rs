//! One batch of claimed rows: each row decoded, the jobs added queue by queue, and each
//! row settled: added (its row is deleted by the caller), set aside (no relay can ever
//! add it as it is), or deferred (this relay cannot; it waits, with the reason, for one
//! that can).
//!
//! Deferring is what keeps a row from being lost when two processes run different
//! builds: a producer that registered a custom backoff, or raised its payload limit,
//! before the relays were upgraded. Such a row is taken again later by any relay,
//! backing off from 1 s to 1 min, and the producer sees its job as pending, not failed.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::stats::Counters;
use super::target::RelayTarget;
use crate::error::Error;
use crate::queue::{Refusal, Relayed, RowJob};
use crate::store::{database, ClaimedRow, Outbox, StoredOptions};

/// What one batch did.
#[derive(Default)]
pub(super) struct Batch {
    /// Rows it took.
    pub(super) taken: usize,
    /// Rows whose jobs Redis has, to delete.
    pub(super) done: Vec<i64>,
    /// Why it stopped short (the rows it could not add were given back).
    pub(super) error: Option<Error>,
}

/// One batch: add the claimed rows; the caller deletes what was added.
pub(super) async fn run(
    app: &dyn RelayTarget,
    outbox: &Outbox,
    owner: &str,
    counters: &Counters,
    claimed: Result<Vec<ClaimedRow>, Error>,
) -> Batch {
    let mut outcome = Batch::default();
    let mut settle = Settle {
        outbox,
        owner,
        counters,
        deferred: BTreeMap::new(),
    };
    let result = match claimed {
        Ok(rows) => add_claimed(app, &mut settle, rows, &mut outcome).await,
        Err(e) => Err(e),
    };
    settle.warn_deferred();
    if let Err(e) = result {
        outcome.error = Some(e);
    }
    outcome
}

/// A claimed row as a job to add, or why it cannot be one.
struct Decoded {
    row_id: i64,
    queue: String,
    attempts: i32,
    job: Result<RowJob, Refusal>,
}

fn decode(row: ClaimedRow) -> Decoded {
    let job = (|| {
        let data: serde_json::Value = serde_json::from_str(&row.data)
            .map_err(|e| Refusal::Never(format!("the row's data is not JSON ({e})")))?;
        // A newer build may write options this one cannot read: wait for it.
        let stored: StoredOptions = serde_json::from_str(&row.options).map_err(|e| {
            Refusal::NotHere(format!("this build cannot read the row's options ({e})"))
        })?;
        let mut options = stored.into_options(row.job_id.clone());
        // A delay counts from the row's write, not from the relay's visit: both times
        // are the database's.
        let waited = Duration::from_millis(u64::try_from(row.waited_ms).unwrap_or(0));
        options.delay = options
            .delay
            .map(|d| d.saturating_sub(waited))
            .filter(|d| !d.is_zero());
        Ok(RowJob {
            name: row.job_name,
            data,
            options,
            row_key: row.row_key,
            taken_before: row.attempts > 1,
        })
    })();
    Decoded {
        row_id: row.id,
        queue: row.queue,
        attempts: row.attempts,
        job,
    }
}

async fn add_claimed(
    app: &dyn RelayTarget,
    settle: &mut Settle<'_>,
    rows: Vec<ClaimedRow>,
    outcome: &mut Batch,
) -> Result<(), Error> {
    let store = &settle.outbox.store;
    let window = settle.outbox.settings.dedup_window;
    outcome.taken = rows.len();
    let mut by_queue: BTreeMap<String, Vec<(i64, i32, RowJob)>> = BTreeMap::new();
    for decoded in rows.into_iter().map(decode) {
        match decoded.job {
            Ok(job) => by_queue.entry(decoded.queue).or_default().push((
                decoded.row_id,
                decoded.attempts,
                job,
            )),
            Err(refusal) => {
                settle
                    .refused(decoded.row_id, decoded.attempts, refusal)
                    .await?
            }
        }
    }
    let mut unavailable = None;
    for (queue, jobs) in by_queue {
        let ids: Vec<(i64, i32)> = jobs.iter().map(|(id, n, _)| (*id, *n)).collect();
        let row_ids: Vec<i64> = ids.iter().map(|(id, _)| *id).collect();
        if unavailable.is_some() {
            store
                .release(&row_ids, settle.owner)
                .await
                .map_err(database)?;
            continue;
        }
        let handle = match app.queue(&queue) {
            Ok(handle) => handle,
            Err(e) => {
                // A name BullMQ refuses is the row's fault; anything else (a cluster
                // prefix without a hash tag) is this app's.
                let refusal = if queue.is_empty() || queue.contains(':') {
                    Refusal::Never(e.to_string())
                } else {
                    Refusal::NotHere(e.to_string())
                };
                for (id, attempts) in ids {
                    settle.refused(id, attempts, refusal.clone()).await?;
                }
                continue;
            }
        };
        let jobs = jobs.into_iter().map(|(_, _, job)| job).collect();
        match handle.add_relayed(jobs, window).await {
            Ok(relayed) => {
                for ((id, attempts), relayed) in ids.into_iter().zip(relayed) {
                    match relayed {
                        Relayed::Added { duplicate } => {
                            let counter = if duplicate {
                                &settle.counters.duplicates
                            } else {
                                &settle.counters.added
                            };
                            counter.fetch_add(1, Ordering::Relaxed);
                            outcome.done.push(id);
                        }
                        Relayed::Refused(refusal) => settle.refused(id, attempts, refusal).await?,
                    }
                }
            }
            Err(e) => {
                store
                    .release(&row_ids, settle.owner)
                    .await
                    .map_err(database)?;
                unavailable = Some(e);
            }
        }
    }
    unavailable.map_or(Ok(()), Err)
}

/// How long a deferred row waits before any relay takes it again: from 1 s, doubling
/// with each attempt, at most 1 min (a relay upgraded to a build that can add it then
/// takes it within a minute).
fn defer_for(attempts: i32) -> Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1).clamp(0, 6)).unwrap_or(6);
    Duration::from_secs(1u64 << doublings).min(Duration::from_secs(60))
}

/// Settles the rows a batch could not add.
struct Settle<'a> {
    outbox: &'a Outbox,
    owner: &'a str,
    counters: &'a Counters,
    /// Deferred rows by reason, for one warning per reason and batch, not per row.
    deferred: BTreeMap<String, (usize, Duration)>,
}

impl Settle<'_> {
    async fn refused(&mut self, row_id: i64, attempts: i32, refusal: Refusal) -> Result<(), Error> {
        match refusal {
            Refusal::Never(reason) => {
                tracing::error!(
                    row_id,
                    reason,
                    "outbox row set aside: its job can never be added as it is"
                );
                self.outbox
                    .store
                    .set_aside(row_id, &reason)
                    .await
                    .map_err(database)?;
                self.counters.set_aside.fetch_add(1, Ordering::Relaxed);
            }
            Refusal::NotHere(reason) => {
                let after = defer_for(attempts);
                let after_ms = i64::try_from(after.as_millis()).unwrap_or(i64::MAX);
                self.outbox
                    .store
                    .retry_later(row_id, self.owner, &reason, after_ms)
                    .await
                    .map_err(database)?;
                self.counters.deferred.fetch_add(1, Ordering::Relaxed);
                let entry = self.deferred.entry(reason).or_insert((0, after));
                entry.0 += 1;
                entry.1 = entry.1.min(after);
            }
        }
        Ok(())
    }

    fn warn_deferred(&self) {
        for (reason, (rows, after)) in &self.deferred {
            tracing::warn!(
                rows,
                reason = reason.as_str(),
                retry_in = ?after,
                "outbox rows this relay cannot add wait for a relay that can (is this process's build or configuration older than the producer's?)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::defer_for;
    use std::time::Duration;

    #[test]
    fn deferred_rows_back_off_from_one_second_to_one_minute() {
        assert_eq!(defer_for(1), Duration::from_secs(1));
        assert_eq!(defer_for(3), Duration::from_secs(4));
        assert_eq!(defer_for(7), Duration::from_secs(60));
        assert_eq!(defer_for(i32::MAX), Duration::from_secs(60));
    }
}
