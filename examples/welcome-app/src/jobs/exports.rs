//! The users export: long work that can time out and be cancelled.
//!
//! An export is a flow of two jobs under one id prefix, `export-<id>`:
//! - `rows` (`export-<id>-rows`) writes the users table in batches. Each batch is stored
//!   on its own (once: a primary key), so a retried attempt resumes after the last
//!   stored batch. Its attempts time out (5 minutes by default) and are retried; it
//!   checks for cancellation between batches and then stops, failing as cancelled
//!   without retries.
//! - `deliver` (`export-<id>`, the parent) joins the batches into the export file once
//!   `rows` is done. A `rows` that fails for good fails it, naming it.

use std::time::Duration;

use queue_core::prelude::*;
use queue_core::{processor, FlowJob};

use crate::db::Db;

/// The export queue.
pub const EXPORT_QUEUE: &str = "export";

/// How exports run (`EXPORT_TIMEOUT_MS`, `EXPORT_BATCH_SIZE`, `EXPORT_BATCH_PAUSE_MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportSettings {
    /// How long one attempt of `rows` may run.
    pub timeout: Duration,
    /// Users per batch.
    pub batch_size: u32,
    /// The pause between batches, so that an export never hogs the database.
    pub pause: Duration,
}

impl Default for ExportSettings {
    fn default() -> Self {
        ExportSettings {
            timeout: Duration::from_secs(5 * 60),
            batch_size: 500,
            pause: Duration::from_millis(20),
        }
    }
}

/// What both jobs of an export are about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportRequest {
    /// The export's id (random).
    pub export_id: String,
    /// Users per batch.
    pub batch_size: u32,
}

/// Data of `rows` (stored as the request itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ExportRows(pub ExportRequest);

/// Data of `deliver` (stored as the request itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DeliverExport(pub ExportRequest);

/// What `rows` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowsWritten {
    /// Batches stored.
    pub batches: i64,
    /// Users written.
    pub rows: i64,
}

/// The root job's id, and the prefix of every job of the export: `export-<id>`.
pub fn export_job_id(export_id: &str) -> String {
    format!("export-{export_id}")
}

/// The id of the export's `rows` job.
pub fn rows_job_id(export_id: &str) -> String {
    format!("{}-rows", export_job_id(export_id))
}

/// The export's flow: `deliver` waiting for `rows`.
pub fn flow(queue: &Queue<super::Export>, export_id: &str, settings: &ExportSettings) -> FlowJob {
    let request = ExportRequest {
        export_id: export_id.to_owned(),
        batch_size: settings.batch_size,
    };
    let rows = queue.flow_job_of(ExportRows(request.clone())).options(
        JobOptions::new()
            .job_id(rows_job_id(export_id))
            .attempts(3)
            .backoff(Backoff::fixed(Duration::from_millis(200)))
            .timeout(settings.timeout),
    );
    queue
        .flow_job_of(DeliverExport(request))
        .options(
            JobOptions::new()
                .job_id(export_job_id(export_id))
                .attempts(3),
        )
        .child(OnChildFailure::FailParent, rows)
}

/// The CSV line of one user (the token hash and internal id are not exported).
fn csv_line(user: &crate::db::User) -> String {
    let field = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    format!(
        "{},{},{},{}\n",
        field(&user.public_id),
        field(&user.email),
        field(&user.name),
        field(&user.birthday)
    )
}

/// The export's processors. Holds nothing itself: built from `Default`.
#[derive(Debug, Default)]
pub struct Exports;

#[processor(super::Export, concurrency = 2, per_minute_metrics = 1440)]
impl Exports {
    /// Writes the users in batches, resuming after the batches already stored, and
    /// stops between batches when cancelled.
    #[job]
    pub async fn rows(
        &self,
        job: Job<ExportRows>,
        db: Dep<Db>,
        settings: Dep<ExportSettings>,
    ) -> Result<RowsWritten, JobError> {
        let ExportRequest {
            export_id,
            batch_size,
        } = &job.data.0;
        let size = i64::from((*batch_size).max(1));
        // Resume after what an earlier attempt stored.
        let stored = db.export_batches(export_id).await?;
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let mut batch = count(stored.len());
        let mut rows = count(stored.iter().map(|b| b.lines().count()).sum());
        loop {
            if job.is_cancelled() {
                // Ends the job failed as cancelled, without retries.
                return Err(JobError::unrecoverable(std::io::Error::other(format!(
                    "stopped between batches, {batch} written"
                ))));
            }
            let users = db.users_page(batch * size, size).await?;
            if users.is_empty() {
                break;
            }
            let content: String = users.iter().map(csv_line).collect();
            db.store_export_batch(export_id, batch, &content).await?;
            rows += count(users.len());
            batch += 1;
            job.update_progress(serde_json::json!({"batches": batch, "rows": rows}))
                .await?;
            // Waits out the pause, or wakes at once when cancelled.
            tokio::select! {
                () = tokio::time::sleep(settings.pause) => {}
                () = job.cancelled() => {}
            }
        }
        Ok(RowsWritten {
            batches: batch,
            rows,
        })
    }

    /// Joins the batches into the export file (once: a file already there is kept).
    #[job]
    pub async fn deliver(
        &self,
        job: Job<DeliverExport>,
        rows: ChildResults<RowsWritten>,
        db: Dep<Db>,
    ) -> Result<RowsWritten, JobError> {
        let written = rows.values().next().copied().ok_or_else(|| {
            JobError::unrecoverable(std::io::Error::other("deliver: `rows` left no result"))
        })?;
        let export_id = &job.data.0.export_id;
        let content = db.export_batches(export_id).await?.concat();
        db.store_export_file(export_id, written.rows, &content)
            .await?;
        Ok(written)
    }
}
