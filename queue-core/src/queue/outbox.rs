//! `Queue::add_in`: a job written into the application's own transaction, through the
//! app's [`Outbox`](crate::store::Outbox).

use serde::Serialize;

use super::{AddedJob, Queue};
use crate::error::Error;
use crate::job::{JobInfo, JobState};
use crate::options::JobOptions;
use crate::store::{database, NewRow, OutboxConnection, StoredOptions};

/// Ids `add_in` gives jobs that have none: fixed when the row is written, so that every
/// relay that adds the row adds the same job.
fn outbox_job_id() -> String {
    format!("o-{}", uuid::Uuid::new_v4().simple())
}

#[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
impl<T: Serialize> Queue<T> {
    /// Writes the job into the app's outbox inside `conn`'s transaction (pass `&mut *tx`):
    /// it reaches Redis when, and only if, that transaction commits. The relay adds it
    /// with exactly these options; its trace id and timeout travel with it.
    ///
    /// The job id is fixed now (yours, or a new `o-<uuid>`), and is the one returned.
    /// Each row is added to Redis at most once, even by a relay that takes it again after
    /// another died between the add and the row's delete. Bad options and oversized
    /// payloads are refused here, as by [`add`](Self::add), and nothing is written; this
    /// app's defaults are applied here, once. While the row waits, a second `add_in`
    /// with the same job id writes nothing and reports `duplicate`; a row set aside
    /// (see [`Outbox::failed`](crate::store::Outbox::failed)) is replaced by the new one. The
    /// relay adds the job as [`add`](Self::add) would have: once a job with this id
    /// finished and was removed, the id is free again. The job's state is
    /// [`JobState::Pending`] until the relay has added it.
    ///
    /// Fails with [`Error::InvalidOption`] (`"outbox"`) when the app has no outbox or
    /// it lives in another kind of database than `conn`.
    ///
    /// On SQLite, waking this process's relay at commit uses the connection's commit
    /// hook, replacing any hook the application set on that connection.
    pub async fn add_in<C: OutboxConnection + ?Sized>(
        &self,
        conn: &mut C,
        name: &str,
        data: T,
        options: JobOptions,
    ) -> Result<AddedJob, Error> {
        // A backend that runs each job when it is added (an app built inline) has no
        // relay to wait for: the job runs now.
        if self.runs_when_added() {
            return self.add(name, data, options).await;
        }
        let outbox = self.shared.settings.outbox.as_ref().ok_or_else(|| {
            Error::invalid(
                "outbox",
                "this app has no outbox; give it one with QueueAppBuilder::outbox",
            )
        })?;
        if outbox.backend != std::any::TypeId::of::<C::Backend>() {
            return Err(Error::invalid(
                "outbox",
                format!(
                    "the app's outbox is in {}, but this transaction is {}",
                    outbox.backend_name,
                    std::any::type_name::<C::Backend>()
                ),
            ));
        }
        // The producer's span is this write: the relay's later add is plumbing.
        let span = crate::trace::producer_span("add", self.name(), Some(name), options.get_trace());
        let mut options = span.in_scope(|| self.prepare(options))?;
        let data = self.to_json(&data)?;
        let job_id = options.job_id.take().unwrap_or_else(outbox_job_id);
        crate::trace::record_job_id(&span, &job_id);
        let stored = serde_json::to_string(&StoredOptions::of(&options)).map_err(|source| {
            Error::Serialize {
                what: "job options",
                source,
            }
        })?;
        let row = NewRow {
            queue: self.name(),
            job_id: &job_id,
            job_name: name,
            data: data.to_string(),
            options: stored,
        };
        let inserted = <C::Backend as crate::store::Store>::outbox_insert(
            conn.as_backend(),
            &row,
            &outbox.wake,
        )
        .await
        .map_err(database)?;
        Ok(AddedJob {
            queue: self.name().to_owned(),
            id: job_id,
            name: name.to_owned(),
            duplicate: !inserted,
            state: Some(JobState::Pending),
            link: super::JobLink::to(self),
        })
    }
}

impl<T> Queue<T> {
    pub(crate) fn has_outbox(&self) -> bool {
        self.shared.settings.outbox.is_some()
    }

    /// The job as it waits in the outbox, with its state there: [`JobState::Pending`],
    /// or [`JobState::Failed`] for a row set aside (its reason as the failure reason).
    pub(crate) async fn in_outbox(&self, id: &str) -> Result<Option<JobInfo>, Error> {
        let Some(outbox) = &self.shared.settings.outbox else {
            return Ok(None);
        };
        let Some(entry) = outbox.find(self.name(), id).await? else {
            return Ok(None);
        };
        let state = if entry.set_aside_at_ms.is_some() {
            JobState::Failed
        } else {
            JobState::Pending
        };
        let options = entry.options.unwrap_or_default();
        let info = JobInfo {
            id: entry.job_id,
            name: entry.job_name,
            data: entry.data,
            progress: serde_json::Value::from(0),
            attempts_made: 0,
            attempts_started: 0,
            max_attempts: options.attempts.unwrap_or(1),
            timestamp_ms: entry.created_at_ms,
            processed_on_ms: None,
            finished_on_ms: entry.set_aside_at_ms,
            // A pending row's last error is why the last relay could not add it; the
            // job has not failed.
            failed_reason: entry.set_aside_at_ms.and(entry.last_error),
            return_value: None,
            delay: options.delay.unwrap_or_default(),
            priority: options.priority.unwrap_or(0),
            stacktrace: Vec::new(),
            runs_at_ms: None,
            parent: None,
            state: Some(state),
            options,
        };
        Ok(Some(info))
    }
}
