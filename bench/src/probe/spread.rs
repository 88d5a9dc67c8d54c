//! Queues spread over a Redis Cluster's masters, or the same queues on one Redis: every
//! queue pre-filled, then one worker process runs them all. The cluster suite's side.

use std::time::{Duration, Instant};

use queue_core::{
    app::Registrations, queue::BulkJob, Job, JobError, JobOptions, Processor, QueueApp, Retention,
};

use super::Email;
use crate::BenchResult;

async fn noop(_job: Job<Email>) -> Result<(), JobError> {
    Ok(())
}

/// `target` is `single:<url>` or `cluster:<url>,<url>,..`. Adds `n` jobs to each of
/// `queues`, then times their processing, `concurrency` at a time per queue.
pub(super) async fn run(
    target: &str,
    queues: &[String],
    concurrency: usize,
    n: u64,
) -> BenchResult<Duration> {
    let builder = match target.split_once(':') {
        Some(("single", url)) => QueueApp::builder().redis(url),
        Some(("cluster", nodes)) => QueueApp::builder().redis_cluster(nodes.split(',')),
        _ => return Err(format!("`{target}`: single:<url> or cluster:<urls>").into()),
    };
    // Only these queues: the other suites' macro-registered processors stay out.
    let mut builder = builder
        .prefix("bench")
        .registrations(Registrations::None)
        .default_job_options(JobOptions::new().remove_on_complete(Retention::All));
    for queue in queues {
        builder = builder.processor(Processor::new(queue).concurrency(concurrency).any_job(noop));
    }
    let app = builder.build().await?;
    for queue in queues {
        let q = app.queue::<Email>(queue)?;
        for batch in super::batches(n, Email::numbered) {
            q.add_bulk(
                batch
                    .into_iter()
                    .map(|e| BulkJob::new("email", e))
                    .collect(),
            )
            .await?;
        }
    }
    let handles = queues
        .iter()
        .map(|q| app.queue::<Email>(q))
        .collect::<Result<Vec<_>, _>>()?;
    let started = Instant::now();
    let workers = app.start_workers().await?;
    loop {
        let mut done = 0;
        for q in &handles {
            done += q.get_job_counts().await?.completed;
        }
        if done >= n * handles.len() as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed();
    workers.shutdown(Duration::from_secs(5)).await;
    Ok(took)
}
