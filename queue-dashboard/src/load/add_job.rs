//! What the add-a-job form tells about a queue: the job names this app's handlers take,
//! and the JSON Schema of each declared job's payload. Read from the app, not Redis.

use queue_core::contract::DeclaredJob;
use queue_core::QueueApp;

/// The form's hints for one queue.
pub(crate) struct JobHints<'a> {
    /// The names this app's handlers of the queue take.
    pub(crate) names: Vec<&'a str>,
    /// Whether a catch-all handler takes any other name.
    pub(crate) any_name: bool,
    /// Each declared job of the queue with a payload schema, and the schema.
    pub(crate) schemas: Vec<(&'a DeclaredJob, &'a serde_json::Value)>,
}

/// The hints for `queue`.
pub(crate) fn read<'a>(app: &'a QueueApp, queue: &str) -> JobHints<'a> {
    let (names, any_name) = app.job_names(queue);
    let schemas = app
        .declared_jobs()
        .iter()
        .filter(|job| job.queue == queue)
        .filter_map(|job| Some((job, job.payload_schema.as_ref()?)))
        .collect();
    JobHints {
        names,
        any_name,
        schemas,
    }
}
