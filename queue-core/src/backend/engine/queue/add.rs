//! Adding jobs, and telling a new job from a duplicate.
//!
//! Everything a job carries travels in the one add: BullMQ's options, the trace context
//! in BullMQ's telemetry field and the timeout in the stored options
//! ([`super::super::convert::options_to_engine`]). A job without a custom id or a
//! deduplication id cannot be a duplicate and costs the add's round trip alone.

use std::future::Future;

use futures::future::try_join_all;

use super::EngineQueue;
use crate::backend::engine::convert::options_to_engine;
use crate::clock::now_ms;
use crate::error::Error;
use crate::options::JobOptions;

/// `opts` with the engine's size check on the job's JSON (not stored with the job).
fn limited(opts: bullmq::JobOptions, max_payload_bytes: usize) -> bullmq::JobOptions {
    bullmq::JobOptions {
        size_limit: Some(max_payload_bytes),
        ..opts
    }
}

/// What an `add` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddOutcome {
    pub(crate) id: String,
    /// A job with this id (or deduplication id) existed: nothing was added.
    pub(crate) duplicate: bool,
}

impl EngineQueue {
    /// Adds one job. `opts` must be validated already; a payload whose JSON is over
    /// `max_payload_bytes` is refused.
    pub(crate) async fn add(
        &self,
        name: &str,
        data: serde_json::Value,
        opts: &JobOptions,
        max_payload_bytes: usize,
    ) -> Result<AddOutcome, Error> {
        // A job without a custom id or a deduplication id cannot be a duplicate: the
        // add's round trip alone, in a future that holds the engine's boxed one and
        // little else (every add carries it). The other kind is boxed.
        if opts.may_be_duplicate() {
            return Box::pin(self.add_checked(name, data, opts, max_payload_bytes)).await;
        }
        let id = self
            .add_job(name, data, opts, now_ms(), max_payload_bytes)
            .await?;
        Ok(AddOutcome {
            id,
            duplicate: false,
        })
    }

    /// Adds a job that may be a duplicate: whether its id was taken is read before and,
    /// for a race with another producer, after.
    async fn add_checked(
        &self,
        name: &str,
        data: serde_json::Value,
        opts: &JobOptions,
        max_payload_bytes: usize,
    ) -> Result<AddOutcome, Error> {
        let existed = self.claimed_before(opts).await?;
        let timestamp = now_ms();
        let id = self
            .add_job(name, data, opts, timestamp, max_payload_bytes)
            .await?;
        self.after_add(id, opts, timestamp, existed).await
    }

    /// The engine's add of one job created at `timestamp`; its id. Not an async
    /// function: the engine's future is boxed already, and one would keep the payload
    /// a second time.
    fn add_job<'a>(
        &'a self,
        name: &str,
        data: serde_json::Value,
        opts: &JobOptions,
        timestamp: u64,
        max_payload_bytes: usize,
    ) -> impl Future<Output = Result<String, Error>> + 'a {
        let sent = self
            .inner
            .add_value(name, data)
            .options(limited(
                options_to_engine(opts, timestamp),
                max_payload_bytes,
            ))
            .id();
        async move { sent.await.map_err(|e| self.add_error(e, max_payload_bytes)) }
    }

    /// Adds several jobs, pipelined over the shared connection.
    pub(crate) async fn add_bulk(
        &self,
        jobs: Vec<(String, serde_json::Value, JobOptions)>,
    ) -> Result<Vec<AddOutcome>, Error> {
        let existed =
            try_join_all(jobs.iter().map(|(_, _, opts)| self.claimed_before(opts))).await?;
        let timestamp = now_ms();
        let mut options = Vec::with_capacity(jobs.len());
        let bulk = jobs
            .into_iter()
            .map(|(name, data, opts)| {
                let engine_opts = options_to_engine(&opts, timestamp);
                options.push(opts);
                bullmq::BulkJob::from_value(name, data, engine_opts)
            })
            .collect();
        let added = self.inner.add_bulk(bulk).await.map_err(|e| self.error(e))?;
        try_join_all(
            added
                .iter()
                .zip(&options)
                .zip(existed)
                .map(|((job, opts), existed)| {
                    self.after_add(job.id().to_owned(), opts, timestamp, existed)
                }),
        )
        .await
    }

    /// The engine's refusal of an add: its size check (the only one it makes on
    /// options we validated) as our payload error.
    fn add_error(&self, e: bullmq::Error, max_payload_bytes: usize) -> Error {
        match e {
            bullmq::Error::InvalidConfig(reason) if reason.contains("exceeds the limit") => {
                Error::oversized_payload(None, max_payload_bytes)
            }
            // The connection's deadline ended the add: the command timeout, as the
            // caller's would have.
            bullmq::Error::Redis(e) if e.is_timeout() => match self.conn.command_deadline() {
                Some(after) => Error::Timeout { what: "add", after },
                None => self.error(bullmq::Error::Redis(e)),
            },
            other => self.error(other),
        }
    }

    /// Whether the connection ends each command at the command timeout
    /// ([`super::super::connection::Connection::command_deadline`]).
    pub(crate) fn bounds_each_command(&self) -> bool {
        self.conn.command_deadline().is_some()
    }

    /// Whether the job id or the deduplication id is already taken, read before adding:
    /// BullMQ adds nothing when either is (a `replace` deduplication excepted, which
    /// replaces the job it finds). No read at all for a job that has neither.
    pub(crate) async fn claimed_before(&self, opts: &JobOptions) -> Result<bool, Error> {
        let dedup = opts.deduplication.as_ref().filter(|d| !d.replace);
        if opts.job_id.is_none() && dedup.is_none() {
            return Ok(false);
        }
        let mut keys = Vec::with_capacity(2);
        if let Some(id) = &opts.job_id {
            keys.push(self.job_key(id));
        }
        if let Some(dedup) = dedup {
            let base = self.conn.queue_base(self.name());
            keys.push(format!("{base}:de:{}", dedup.id));
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
        let duplicate = if existed {
            true
        } else if opts.may_be_duplicate() {
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
}
