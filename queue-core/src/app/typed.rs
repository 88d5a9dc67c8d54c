//! The app's side of typed job contracts: a declared queue's producer, an add that
//! finds the queue itself, and what the declarations linked into this binary declare.

use serde_json::{json, Map, Value};

use super::QueueApp;
use crate::contract::{DeclaredJob, JobType, QueueType};
use crate::error::Error;
use crate::events::QueueEvents;
use crate::options::JobOptions;
use crate::queue::{AddedJob, Queue};

impl QueueApp {
    /// The producer of the declared queue `Q` (under the app's rename of it, if any).
    pub fn queue_of<Q: QueueType>(&self) -> Result<Queue<Q>, Error> {
        self.queue::<Q>(Q::NAME)
    }

    /// The Redis event stream of the declared queue `Q` (see [`QueueApp::queue_events`]).
    pub async fn queue_events_of<Q: QueueType>(&self) -> Result<QueueEvents, Error> {
        self.queue_events(self.inner.renames.actual(Q::NAME)).await
    }

    /// Adds `job` to the queue its declaration names, under its job name.
    ///
    /// ```no_run
    /// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
    /// use queue_core::prelude::*;
    ///
    /// #[derive(Serialize, Deserialize)]
    /// pub struct BirthdayGrant { pub user_id: String }
    ///
    /// #[job_queue("coupon")]
    /// pub enum Coupon {
    ///     #[job("birthday-grant")]
    ///     Grant(BirthdayGrant),
    /// }
    ///
    /// let added = app.add_job(BirthdayGrant { user_id: "u1".into() }, JobOptions::new()).await?;
    /// assert_eq!((added.queue.as_str(), added.name.as_str()), ("coupon", "birthday-grant"));
    /// # Ok(()) }
    /// ```
    pub async fn add_job<J: JobType>(
        &self,
        job: J,
        options: JobOptions,
    ) -> Result<AddedJob, Error> {
        // The queue is the type's own: there is no other to get wrong.
        self.queue_of::<J::Queue>()?
            .retyped::<J>()
            .add(J::NAME, job, options)
            .await
    }

    /// Every job type the [`#[job_queue]`](crate::job_queue) declarations of this app's
    /// registrations declare, sorted by queue and name, each with whether a handler of
    /// this app takes it. `build` logs a warning naming those none does.
    pub fn declared_jobs(&self) -> &[DeclaredJob] {
        &self.inner.declared
    }

    /// The JSON Schemas of the declared jobs, as one document for other services (a Node
    /// producer validates what it adds with it, with ajv say):
    /// `{"queues": {"email": {"welcome": {"payload": {..}, "output": {..}}}}}`. A type
    /// without `schemars::JsonSchema` has `null`.
    pub fn job_schemas(&self) -> Value {
        let mut queues = Map::new();
        for job in &self.inner.declared {
            let entry = queues
                .entry(job.queue.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(jobs) = entry {
                jobs.insert(
                    job.name.clone(),
                    json!({
                        "payloadType": job.payload_type,
                        "outputType": job.output_type,
                        "payload": job.payload_schema,
                        "output": job.output_schema,
                    }),
                );
            }
        }
        json!({ "queues": queues })
    }

    /// The declaration of job `name` on `queue`, if one is linked into this binary.
    pub(crate) fn declared_job(&self, queue: &str, name: &str) -> Option<&DeclaredJob> {
        self.inner
            .declared
            .iter()
            .find(|job| job.queue == queue && job.name == name)
    }
}
