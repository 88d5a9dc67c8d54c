use queue_core::prelude::*;
use queue_core::processor;

#[processor("email", concurrency = 0)]
async fn send(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

fn main() {}
