//! What several modules of the area share: grouped jobs added by number, and a gate a
//! handler waits at until the test lets its job go.

use std::ops::Range;

use queue_core::{queue::BulkJob, JobOptions, Queue};

/// Jobs of `group` numbered `numbers`, each its number as payload, ids `<group>-<n>`.
pub(crate) async fn add(queue: &Queue<u32>, group: &str, numbers: Range<u32>) {
    let jobs = numbers
        .map(|n| {
            BulkJob::new("work", n).options(
                JobOptions::new()
                    .group(group)
                    .job_id(format!("{group}-{n}")),
            )
        })
        .collect();
    queue.add_bulk(jobs).await.expect("add_bulk");
}

/// Where a handler holds a job until the test adds a permit.
pub(crate) struct Gate(tokio::sync::Semaphore);

impl Gate {
    /// Shut: every job that waits at it waits for a permit.
    pub(crate) fn shut() -> Self {
        Gate(tokio::sync::Semaphore::new(0))
    }

    /// Lets `jobs` more jobs through.
    pub(crate) fn open_for(&self, jobs: usize) {
        self.0.add_permits(jobs);
    }

    /// Waits until a job may go through.
    pub(crate) async fn pass(&self) {
        self.0
            .acquire()
            .await
            .expect("the gate stays open")
            .forget();
    }
}
