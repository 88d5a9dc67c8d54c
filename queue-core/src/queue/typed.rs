//! The typed producer of a declared queue: `Queue<Q>` with `Q` a
//! [`#[job_queue]`](crate::job_queue) type adds jobs by their payload, whose declaration
//! gives the job name; a payload of another queue does not compile.

use super::{AddedJob, BulkJob, Queue};
use crate::contract::{JobOf, QueueType};
use crate::error::Error;
use crate::options::{JobOptions, Schedule};

impl<Q: QueueType> Queue<Q> {
    /// Adds `job` under the name its declaration gives it; otherwise exactly
    /// [`add`](Queue::add) (checks, duplicates, retries).
    ///
    /// ```no_run
    /// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
    /// use queue_core::prelude::*;
    ///
    /// #[derive(Serialize, Deserialize)]
    /// pub struct WelcomeEmail { pub to: String }
    ///
    /// #[job_queue("email")]
    /// pub enum Email {
    ///     #[job("welcome")]
    ///     Welcome(WelcomeEmail),
    /// }
    ///
    /// let email = app.queue_of::<Email>()?;
    /// let added = email
    ///     .add_job(WelcomeEmail { to: "ada@example.com".into() }, JobOptions::new().job_id("welcome-42"))
    ///     .await?;
    /// assert_eq!(added.name, "welcome");
    /// # Ok(()) }
    /// ```
    pub async fn add_job<J: JobOf<Q>>(
        &self,
        job: J,
        options: JobOptions,
    ) -> Result<AddedJob, Error> {
        self.retyped::<J>().add(J::NAME, job, options).await
    }

    /// Adds several jobs of one type in one round trip, as [`add_bulk`](Queue::add_bulk).
    pub async fn add_jobs<J: JobOf<Q>>(
        &self,
        jobs: impl IntoIterator<Item = (J, JobOptions)>,
    ) -> Result<Vec<AddedJob>, Error> {
        let bulk = jobs
            .into_iter()
            .map(|(job, options)| BulkJob::new(J::NAME, job).options(options))
            .collect();
        self.retyped::<J>().add_bulk(bulk).await
    }

    /// Creates or updates the scheduler `id`, which adds `job` on `schedule`, as
    /// [`upsert_scheduler`](Queue::upsert_scheduler) does.
    pub async fn upsert_scheduler_of<J: JobOf<Q>>(
        &self,
        id: &str,
        schedule: Schedule,
        job: J,
        options: JobOptions,
    ) -> Result<(), Error> {
        self.retyped::<J>()
            .upsert_scheduler(id, schedule, J::NAME, job, options)
            .await
    }

    /// Writes `job` into the app's outbox inside `conn`'s transaction, as
    /// [`add_in`](Queue::add_in) does.
    #[cfg(feature = "sqlx")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
    pub async fn add_job_in<J: JobOf<Q>, C: crate::store::OutboxConnection + ?Sized>(
        &self,
        conn: &mut C,
        job: J,
        options: JobOptions,
    ) -> Result<AddedJob, Error> {
        self.retyped::<J>()
            .add_in(conn, J::NAME, job, options)
            .await
    }
}
