use queue_core::prelude::*;
use queue_core::processor;

#[processor(concurrency = 5)]
async fn send(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

fn main() {}
