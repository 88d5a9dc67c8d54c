//! Jobs kept in a library crate: they register only if the binary links this crate.

use queue_core::{processor, Job, JobError};

/// The queue this crate's processor serves.
pub const QUEUE: &str = "helper-reports";

/// Builds a report.
#[processor("helper-reports", job = "build")]
pub async fn build_report(job: Job<u32>) -> Result<String, JobError> {
    Ok(format!("report {}", job.data))
}
