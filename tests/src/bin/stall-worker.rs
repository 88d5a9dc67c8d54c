//! A worker *process* for the stalled-job test: it takes jobs from the queue named on
//! its command line, says `started <id>` on stdout, and hangs until it is killed.
//!
//! Run by tests/tests/worker/stalled.rs with `PREFIX` and `REDIS_URL` set.

use std::io::Write;
use std::time::Duration;

use queue_core::{app::Registrations, Job, JobError, Processor};

async fn hang(job: Job<serde_json::Value>) -> Result<(), JobError> {
    println!("started {}", job.id());
    let _ = std::io::stdout().flush();
    std::future::pending::<()>().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), queue_core::Error> {
    let queue = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "stalled".to_owned());
    let app = queue_tests::redis_builder()
        .prefix(std::env::var("PREFIX").unwrap_or_else(|_| "bull".to_owned()))
        .registrations(Registrations::None)
        .processor(
            Processor::new(queue)
                .lock_duration(Duration::from_secs(1))
                .stalled_interval(Duration::from_secs(1))
                .any_job(hang),
        )
        .build()
        .await?;
    let _workers = app.start_workers().await?;
    std::future::pending::<()>().await;
    Ok(())
}
