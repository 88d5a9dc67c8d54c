//! The outbox relay's add (`relay/`): each row's job added as its producer wrote
//! it, at most once per row, and every refusal saying whether any relay ever could.
//!
//! **At most once per row.** A row's job is added with the deduplication id
//! `outbox-<row key>` (its own, if the job has one, is kept), and once Redis has
//! acknowledged the add that key is *held*: set to a value that is no job's id, with
//! the relay's window as its TTL. BullMQ deletes a deduplication key with its job only
//! when the key names that job, so the mark outlives the job whatever removes it
//! (retention, or an operator's remove, clean, drain, obliterate). A relay that takes a
//! row again (the one before died between the add and the row's delete) looks for the
//! mark first and adds nothing if it is there. The key is the row's, random, not the
//! job id's: a new row for the id of a job that is gone adds it again, as `add` would.
//! The window between the add and the hold is covered by BullMQ's own deduplication,
//! which lasts through retention (it has a TTL); only an operator's removal of the job
//! in that same instant, before the hold, could let a second add through.
//!
//! **As the producer wrote it.** `add_in` applied the defaults and checks of its app;
//! the stored options are final. The relay applies no defaults of its own (a delay
//! spent in the outbox must not come back as the queue's default) and checks only what
//! no build could accept (BullMQ's rules); what depends on its own build or settings (a
//! custom backoff it does not know, its payload limit, Redis refusing the job) is
//! [`Refusal::NotHere`]: the row waits for a relay that can.

use std::collections::HashSet;
use std::time::Duration;

use super::Queue;
use crate::error::Error;
use crate::options::{Deduplication, JobOptions};

/// A job as an outbox row holds it.
#[derive(Debug, Clone)]
pub(crate) struct RowJob {
    pub(crate) name: String,
    pub(crate) data: serde_json::Value,
    /// As `add_in` stored them: its app's defaults applied, the delay already shortened
    /// by the time the row waited.
    pub(crate) options: JobOptions,
    /// The row's key (see the module's docs).
    pub(crate) row_key: String,
    /// A relay took the row before this one: its job may be in Redis already.
    pub(crate) taken_before: bool,
}

/// What became of a row's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Relayed {
    /// Redis has the job: added now, or (`duplicate`) a job with its id existed, or
    /// this row was relayed before.
    Added { duplicate: bool },
    /// Not added.
    Refused(Refusal),
}

/// Why a row's job was not added, and whether any relay ever could.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No relay can ever add it as it is (an option BullMQ's rules refuse, data that is
    /// not JSON, a queue name BullMQ refuses): the row is set aside.
    Never(String),
    /// This relay cannot (a custom backoff it does not know, a payload over its limit,
    /// options it cannot read, Redis refusing the job): the row waits for one that can.
    NotHere(String),
}

/// The deduplication id a row's job is added, and marked relayed, under.
fn relay_deduplication_id(row_key: &str) -> String {
    format!("outbox-{row_key}")
}

impl Queue<serde_json::Value> {
    /// Adds the rows' jobs, each at most once (see the module's docs). `Err` only when
    /// Redis is unavailable (the relay retries the whole batch later); each job's own
    /// refusal is in its [`Relayed`].
    pub(crate) async fn add_relayed(
        &self,
        jobs: Vec<RowJob>,
        window: Duration,
    ) -> Result<Vec<Relayed>, Error> {
        let relayed_before = self.relayed_before(&jobs).await?;
        let mut outcomes: Vec<Option<Relayed>> = Vec::with_capacity(jobs.len());
        let mut to_add = Vec::with_capacity(jobs.len());
        for job in jobs {
            let dedup_id = relay_deduplication_id(&job.row_key);
            if relayed_before.contains(&dedup_id) {
                outcomes.push(Some(Relayed::Added { duplicate: true }));
                continue;
            }
            match self.as_written(job.options, &job.data, &dedup_id, window) {
                Ok(options) => {
                    outcomes.push(None);
                    to_add.push((job.name, job.data, options, dedup_id));
                }
                Err(refusal) => outcomes.push(Some(Relayed::Refused(refusal))),
            }
        }
        let held: Vec<(String, String)> = to_add
            .iter()
            .map(|(_, _, options, dedup_id)| {
                (dedup_id.clone(), options.job_id.clone().unwrap_or_default())
            })
            .collect();
        let added = self.add_as_written(to_add).await?;
        let held: Vec<(String, String)> = held
            .into_iter()
            .zip(&added)
            .filter(|(_, outcome)| matches!(outcome, Relayed::Added { .. }))
            .map(|(held, _)| held)
            .collect();
        self.hold(&held, window).await;
        let mut added = added.into_iter();
        Ok(outcomes
            .into_iter()
            .map(|outcome| {
                outcome.unwrap_or_else(|| {
                    added.next().unwrap_or_else(|| {
                        Relayed::Refused(Refusal::NotHere(
                            "the engine answered fewer jobs than it was given".to_owned(),
                        ))
                    })
                })
            })
            .collect())
    }

    /// The deduplication ids of rows a relay took before whose mark is in Redis.
    async fn relayed_before(&self, jobs: &[RowJob]) -> Result<HashSet<String>, Error> {
        let ids: Vec<String> = jobs
            .iter()
            .filter(|job| job.taken_before)
            .map(|job| relay_deduplication_id(&job.row_key))
            .collect();
        if ids.is_empty() {
            return Ok(HashSet::new());
        }
        let taken = self
            .timed("add", async {
                self.engine().await?.deduplication_taken(&ids).await
            })
            .await?;
        Ok(ids
            .into_iter()
            .zip(taken)
            .filter_map(|(id, taken)| taken.then_some(id))
            .collect())
    }

    /// The stored options checked, without this app's defaults, plus the relay's
    /// deduplication unless the job has its own.
    fn as_written(
        &self,
        mut options: JobOptions,
        data: &serde_json::Value,
        dedup_id: &str,
        window: Duration,
    ) -> Result<JobOptions, Refusal> {
        options
            .validate()
            .map_err(|e| Refusal::Never(e.to_string()))?;
        self.shared
            .settings
            .backoffs
            .check(&options)
            .map_err(|e| Refusal::NotHere(e.to_string()))?;
        self.check_size(data)
            .map_err(|e| Refusal::NotHere(e.to_string()))?;
        if options.deduplication.is_none() {
            options.deduplication = Some(Deduplication::new(dedup_id).ttl(window));
        }
        Ok(options)
    }

    /// Adds checked jobs in one pipelined call; when Redis refuses something in the
    /// batch, one by one to find which.
    async fn add_as_written(
        &self,
        jobs: Vec<(String, serde_json::Value, JobOptions, String)>,
    ) -> Result<Vec<Relayed>, Error> {
        let added = |duplicate| Relayed::Added { duplicate };
        let jobs: Vec<(String, serde_json::Value, JobOptions)> = jobs
            .into_iter()
            .map(|(name, data, options, _)| (name, data, options))
            .collect();
        match self.add_prepared_bulk(jobs.clone()).await {
            Ok(done) => Ok(done.into_iter().map(|job| added(job.duplicate)).collect()),
            Err(e) if e.is_unavailable() => Err(e),
            Err(_) => {
                let mut one_by_one = Vec::with_capacity(jobs.len());
                for (name, data, options) in jobs {
                    // The row's data as stored (sealed already, when its queue
                    // seals), as the batched add sends it.
                    let sent = match self.check_size(&data) {
                        Ok(()) => self.add_prepared(&name, data, &options).await,
                        Err(e) => Err(e),
                    };
                    match sent {
                        Ok(job) => one_by_one.push(added(job.duplicate)),
                        Err(e) if e.is_unavailable() => return Err(e),
                        Err(e) => one_by_one.push(Relayed::Refused(Refusal::NotHere(format!(
                            "Redis refused the job: {e}"
                        )))),
                    }
                }
                Ok(one_by_one)
            }
        }
    }

    /// Marks the rows relayed. Their jobs are in Redis: should this fail, the rows are
    /// deleted all the same, and BullMQ's deduplication covers them for as long as the
    /// job is not removed by hand (see the module's docs).
    async fn hold(&self, held: &[(String, String)], window: Duration) {
        if held.is_empty() {
            return;
        }
        let outcome = self
            .timed("add", async {
                self.engine().await?.hold_deduplication(held, window).await
            })
            .await;
        if let Err(e) = outcome {
            tracing::warn!(queue = %self.name(), error = %e, rows = held.len(), "cannot mark relayed outbox rows; their jobs are added");
        }
    }
}
