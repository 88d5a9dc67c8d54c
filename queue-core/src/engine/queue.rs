//! The engine's queue, behind our types: adds with duplicate detection and the per-job
//! timeout, getters, and management.

use std::time::Duration;

use std::future::IntoFuture;

use futures::future::{join, join_all, try_join_all};

use super::connection::Connection;
use super::convert::{
    counts_from_engine, engine_error_in, job_info, millis, options_to_engine, state_range_name,
};
use super::extras::{self, JobExtras};
use crate::error::Error;
use crate::job::{now_ms, JobCounts, JobInfo, JobState};
use crate::options::JobOptions;

/// What an `add` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddOutcome {
    pub(crate) id: String,
    /// A job with this id (or deduplication id) existed: nothing was added.
    pub(crate) duplicate: bool,
}

/// One queue's engine handle plus the shared connection for plain commands.
#[derive(Clone)]
pub(crate) struct EngineQueue {
    inner: bullmq::Queue,
    conn: Connection,
}

impl std::fmt::Debug for EngineQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineQueue")
            .field("name", &self.inner.name())
            .finish()
    }
}

/// A job about to be added: its options (with an id where it needs one), whether the
/// id was already taken, and extras still to be written alongside the add.
struct Prepared {
    opts: JobOptions,
    existed: bool,
    /// The job has extras (its timestamp says so: [`extras::stamp`]).
    has_extras: bool,
    alongside: Option<JobExtras>,
}

impl EngineQueue {
    pub(crate) async fn open(conn: &Connection, name: &str) -> Result<Self, Error> {
        Ok(EngineQueue {
            inner: conn.engine_queue(name).await?,
            conn: conn.clone(),
        })
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The engine's error, naming this queue.
    fn error(&self, e: bullmq::Error) -> Error {
        engine_error_in(e, self.name())
    }

    fn job_key(&self, id: &str) -> String {
        format!("{}:{id}", self.conn.queue_base(self.name()))
    }

    /// Adds one job. `opts` must be validated already.
    pub(crate) async fn add(
        &self,
        name: &str,
        data: serde_json::Value,
        opts: &JobOptions,
    ) -> Result<AddOutcome, Error> {
        let Prepared {
            opts,
            existed,
            has_extras,
            alongside,
        } = self.before_add(opts).await?;
        let timestamp = extras::stamp(now_ms(), has_extras);
        let add = self
            .inner
            .add(name, data)
            .options(options_to_engine(&opts, timestamp))
            .into_future();
        let added = match &alongside {
            None => add.await,
            Some(extras) => {
                // The write is polled first, so Redis normally has it before the add.
                let (written, added) = join(self.write_extras(&opts, extras), add).await;
                if added.is_ok() {
                    self.settle_extras(written, &opts, extras).await;
                }
                added
            }
        };
        let job = added.map_err(|e| self.error(e))?;
        self.after_add(job.id().to_owned(), &opts, timestamp, existed)
            .await
    }

    /// Gives a job with extras an id and checks whether a given id is taken.
    ///
    /// Extras are stored under the job's id, so they need one before the add. A job
    /// with a custom id gets its extras written here, before the add, unless the id is
    /// taken. A job without one gets a generated id, which no other job can hold, and
    /// its extras are written alongside the add (one round trip instead of two); a
    /// worker that finds them missing waits briefly for them ([`extras::may_trail`]).
    async fn before_add(&self, opts: &JobOptions) -> Result<Prepared, Error> {
        let Some(extras) = JobExtras::of(opts) else {
            let existed = self.claimed_before(opts).await?;
            return Ok(Prepared {
                opts: opts.clone(),
                existed,
                has_extras: false,
                alongside: None,
            });
        };
        let mut opts = opts.clone();
        if opts.job_id.is_none() {
            opts.job_id = Some(extras::generated_id());
            return Ok(Prepared {
                opts,
                existed: false,
                has_extras: true,
                alongside: Some(extras),
            });
        }
        let existed = self.claimed_before(&opts).await?;
        if !existed {
            self.write_extras(&opts, &extras).await?;
        }
        Ok(Prepared {
            opts,
            existed,
            has_extras: true,
            alongside: None,
        })
    }

    async fn write_extras(&self, opts: &JobOptions, extras: &JobExtras) -> Result<(), Error> {
        let id = opts.job_id.as_deref().unwrap_or_default();
        extras::write(
            &self.conn,
            &extras::key(&self.conn, self.name(), id),
            extras,
            opts,
        )
        .await
    }

    /// The job is added; its extras must follow. One more try if the write failed,
    /// then the job runs without them (the worker says so).
    async fn settle_extras(
        &self,
        written: Result<(), Error>,
        opts: &JobOptions,
        extras: &JobExtras,
    ) {
        if written.is_ok() {
            return;
        }
        if let Err(e) = self.write_extras(opts, extras).await {
            tracing::error!(queue = %self.name(), job_id = ?opts.job_id, error = %e, "the job was added but its timeout and trace id could not be stored");
        }
    }

    /// Adds several jobs, pipelined over the shared connection.
    pub(crate) async fn add_bulk(
        &self,
        jobs: Vec<(String, serde_json::Value, JobOptions)>,
    ) -> Result<Vec<AddOutcome>, Error> {
        let prepared = try_join_all(jobs.iter().map(|(_, _, opts)| self.before_add(opts))).await?;
        let now = now_ms();
        let stamped: Vec<_> = prepared
            .into_iter()
            .map(|p| {
                (
                    extras::stamp(now, p.has_extras),
                    p.opts,
                    p.existed,
                    p.alongside,
                )
            })
            .collect();
        let bulk = jobs
            .iter()
            .zip(&stamped)
            .map(|((name, data, _), (timestamp, opts, _, _))| {
                bullmq::BulkJob::with_options(
                    name.clone(),
                    data,
                    options_to_engine(opts, *timestamp),
                )
            })
            .collect();
        let alongside: Vec<_> = stamped
            .iter()
            .filter_map(|(_, opts, _, extras)| extras.as_ref().map(|e| (opts, e)))
            .collect();
        let writes = join_all(alongside.iter().map(|(opts, e)| self.write_extras(opts, e)));
        let (written, added) = join(writes, self.inner.add_bulk(bulk)).await;
        let added = added.map_err(|e| self.error(e))?;
        join_all(
            written
                .into_iter()
                .zip(&alongside)
                .map(|(w, (opts, e))| self.settle_extras(w, opts, e)),
        )
        .await;
        try_join_all(
            added
                .iter()
                .zip(&stamped)
                .map(|(job, (timestamp, opts, existed, _))| {
                    self.after_add(job.id().to_owned(), opts, *timestamp, *existed)
                }),
        )
        .await
    }

    /// Whether the job id or the deduplication id is already taken, read before adding:
    /// BullMQ adds nothing when either is (a `replace` deduplication excepted, which
    /// replaces the job it finds).
    async fn claimed_before(&self, opts: &JobOptions) -> Result<bool, Error> {
        let base = self.conn.queue_base(self.name());
        let mut keys = Vec::with_capacity(2);
        if let Some(id) = &opts.job_id {
            keys.push(self.job_key(id));
        }
        if let Some(dedup) = opts.deduplication.as_ref().filter(|d| !d.replace) {
            keys.push(format!("{base}:de:{}", dedup.id));
        }
        if keys.is_empty() {
            return Ok(false);
        }
        let taken: u64 = self.conn.query(redis::cmd("EXISTS").arg(keys)).await?;
        Ok(taken > 0)
    }

    /// BullMQ answers a duplicate id with the existing job's id and no error. We tell
    /// the two apart by whether the id was taken just before the add and, for a race
    /// with another producer, by the creation timestamp we sent: a different one stored
    /// under the id means the job is someone else's. (Two adds of one id racing within
    /// the same millisecond may both be reported as new; only one job exists either way.)
    async fn after_add(
        &self,
        id: String,
        opts: &JobOptions,
        timestamp: u64,
        existed: bool,
    ) -> Result<AddOutcome, Error> {
        let may_be_duplicate = opts.job_id.is_some() || opts.deduplication.is_some();
        let duplicate = if existed {
            true
        } else if may_be_duplicate {
            let stored: Option<u64> = self
                .conn
                .query(redis::cmd("HGET").arg(self.job_key(&id)).arg("timestamp"))
                .await?;
            stored.is_some_and(|stored| stored != timestamp)
        } else {
            false
        };
        Ok(AddOutcome { id, duplicate })
    }

    pub(crate) async fn get_job(&self, id: &str) -> Result<Option<JobInfo>, Error> {
        match self.inner.get_job(id).await {
            Ok(job) => Ok(job.as_ref().map(job_info)),
            // A key under the queue that is not a job's hash is not a job.
            Err(bullmq::Error::Redis(e)) if e.code() == Some("WRONGTYPE") => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// The job's state from its own keys, in one round trip of O(1) and O(log n)
    /// commands, whatever the backlog. (The engine's `getState` script copies the
    /// whole wait and active lists: 125-228 ms of Redis time per call with 500,000
    /// waiting jobs.) A job in the active list whose lock has expired reads as waiting:
    /// it is about to be recovered as stalled.
    pub(crate) async fn state(&self, id: &str) -> Result<Option<JobState>, Error> {
        let base = self.conn.queue_base(self.name());
        let job = self.job_key(id);
        const SETS: [(&str, JobState); 5] = [
            ("completed", JobState::Completed),
            ("failed", JobState::Failed),
            ("delayed", JobState::Delayed),
            ("prioritized", JobState::Prioritized),
            ("waiting-children", JobState::WaitingChildren),
        ];
        let mut pipe = redis::pipe();
        for (set, _) in SETS {
            pipe.cmd("ZSCORE").arg(format!("{base}:{set}")).arg(id);
        }
        pipe.cmd("EXISTS").arg(format!("{job}:lock"));
        pipe.cmd("EXISTS").arg(&job);
        let (scores, locked, exists): (Vec<Option<f64>>, bool, bool) = {
            let replies: Vec<redis::Value> = self.conn.pipeline(&pipe).await?;
            let mut replies = replies.into_iter();
            let scores = replies
                .by_ref()
                .take(SETS.len())
                .map(|v| redis::from_redis_value(v).map_err(|e| Error::Redis(Box::new(e))))
                .collect::<Result<Vec<Option<f64>>, Error>>()?;
            let flag = |v: Option<redis::Value>| -> Result<bool, Error> {
                v.map_or(Ok(false), |v| {
                    redis::from_redis_value(v).map_err(|e| Error::Redis(Box::new(e)))
                })
            };
            (scores, flag(replies.next())?, flag(replies.next())?)
        };
        if let Some((_, state)) = SETS
            .iter()
            .zip(&scores)
            .find_map(|(set, score)| score.map(|_| set))
        {
            return Ok(Some(*state));
        }
        Ok(if locked {
            Some(JobState::Active)
        } else if exists {
            Some(JobState::Waiting)
        } else {
            None
        })
    }

    pub(crate) async fn counts(&self) -> Result<JobCounts, Error> {
        let counts = self
            .inner
            .get_job_counts()
            .await
            .map_err(|e| self.error(e))?;
        Ok(counts_from_engine(&counts))
    }

    pub(crate) async fn get_jobs(
        &self,
        states: &[JobState],
        start: i64,
        end: i64,
    ) -> Result<Vec<JobInfo>, Error> {
        // Pending jobs are in the application's outbox, never in Redis.
        let names: Vec<&str> = states
            .iter()
            .filter(|s| **s != JobState::Pending)
            .map(|s| state_range_name(*s))
            .collect();
        if names.is_empty() && !states.is_empty() {
            return Ok(Vec::new());
        }
        let jobs = self
            .inner
            .get_jobs(&names, start, end, false)
            .await
            .map_err(|e| self.error(e))?;
        Ok(jobs.iter().map(job_info).collect())
    }

    /// `false` when the job is locked by a worker.
    pub(crate) async fn remove(&self, id: &str) -> Result<bool, Error> {
        let removed = self.inner.remove(id).await.map_err(|e| self.error(e))?;
        if removed {
            extras::forget(&self.conn, &[extras::key(&self.conn, self.name(), id)]).await;
        }
        Ok(removed)
    }

    pub(crate) async fn retry(&self, id: &str) -> Result<(), Error> {
        let mut job = self.engine_job(id).await?;
        job.retry("failed", None).await.map_err(|e| self.error(e))
    }

    pub(crate) async fn retry_all_failed(&self) -> Result<(), Error> {
        self.inner
            .retry_jobs("failed", 1000, None)
            .await
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn promote(&self, id: &str) -> Result<(), Error> {
        self.engine_job(id)
            .await?
            .promote()
            .await
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn promote_all(&self) -> Result<(), Error> {
        self.inner
            .promote_jobs(1000)
            .await
            .map_err(|e| self.error(e))
    }

    async fn engine_job(&self, id: &str) -> Result<bullmq::Job, Error> {
        self.inner
            .get_job(id)
            .await
            .map_err(|e| self.error(e))?
            .ok_or_else(|| Error::JobNotFound {
                queue: self.name().to_owned(),
                id: id.to_owned(),
            })
    }

    pub(crate) async fn pause(&self) -> Result<(), Error> {
        self.inner.pause().await.map_err(|e| self.error(e))
    }

    pub(crate) async fn resume(&self) -> Result<(), Error> {
        self.inner.resume().await.map_err(|e| self.error(e))
    }

    pub(crate) async fn is_paused(&self) -> Result<bool, Error> {
        self.inner.is_paused().await.map_err(|e| self.error(e))
    }

    pub(crate) async fn drain(&self, include_delayed: bool) -> Result<(), Error> {
        self.inner
            .drain(include_delayed)
            .await
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn clean(
        &self,
        grace: Duration,
        limit: u32,
        state: JobState,
    ) -> Result<Vec<String>, Error> {
        let grace_ms = millis(grace);
        let set = match state {
            JobState::Waiting => "wait",
            other => other.as_str(),
        };
        let cleaned = self
            .inner
            .clean(grace_ms, limit, set)
            .await
            .map_err(|e| self.error(e))?;
        let keys: Vec<String> = cleaned
            .iter()
            .map(|id| extras::key(&self.conn, self.name(), id))
            .collect();
        extras::forget(&self.conn, &keys).await;
        Ok(cleaned)
    }

    /// Like Node's `obliterate`: pauses the queue first (the script refuses a running
    /// queue) and refuses active jobs unless forced. The engine does neither: it pauses
    /// only when forced, and sends "0" for "not forced", which the script reads as forced.
    pub(crate) async fn obliterate(&self, force: bool) -> Result<(), Error> {
        if !force && self.counts().await?.active > 0 {
            return Err(Error::WrongState {
                queue: self.name().to_owned(),
                id: "*".to_owned(),
                state: "active".to_owned(),
                operation: "obliterate without force while jobs are active",
            });
        }
        self.pause().await?;
        self.inner
            .obliterate(force, 1000)
            .await
            .map_err(|e| self.error(e))?;
        // BullMQ's script knows nothing of the extras keys: they go after it.
        self.forget_all_extras().await
    }

    /// Deletes every extras key of the queue (after an obliterate), scanning for them.
    async fn forget_all_extras(&self) -> Result<(), Error> {
        let pattern = extras::key(&self.conn, self.name(), "*");
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = self
                .conn
                .query(
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(1000),
                )
                .await?;
            extras::forget(&self.conn, &keys).await;
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    pub(crate) async fn logs(
        &self,
        id: &str,
        start: isize,
        end: isize,
    ) -> Result<(Vec<String>, usize), Error> {
        self.inner
            .get_job_logs(id, start, end, true)
            .await
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn upsert_scheduler(
        &self,
        id: &str,
        schedule: &crate::queue::Schedule,
        name: &str,
        data: serde_json::Value,
        opts: &JobOptions,
    ) -> Result<(), Error> {
        let repeat = bullmq::job_scheduler::RepeatOptions {
            pattern: schedule.cron.clone(),
            every: schedule.every.map(millis),
            tz: schedule.tz.clone(),
            ..Default::default()
        };
        let mut engine_opts = options_to_engine(opts, now_ms());
        engine_opts.timestamp = None;
        self.inner
            .upsert_job_scheduler(id, repeat, Some(name), Some(data), Some(engine_opts))
            .await
            .map(drop)
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn scheduler_count(&self) -> Result<u64, Error> {
        self.inner
            .get_job_schedulers_count()
            .await
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn remove_scheduler(&self, id: &str) -> Result<bool, Error> {
        self.inner
            .remove_job_scheduler(id)
            .await
            .map_err(|e| self.error(e))
    }

    /// Tells every worker of this queue, in any process, to cancel `id`; returns how
    /// many worker processes were listening.
    pub(crate) async fn publish_cancel(&self, id: &str) -> Result<u64, Error> {
        self.conn
            .query(
                redis::cmd("PUBLISH")
                    .arg(cancel_channel(&self.conn, self.name()))
                    .arg(id),
            )
            .await
    }
}

/// The pub/sub channel cancellations of a queue travel on.
pub(super) fn cancel_channel(conn: &Connection, queue: &str) -> String {
    format!("{}:cancel", conn.queue_base(queue))
}
