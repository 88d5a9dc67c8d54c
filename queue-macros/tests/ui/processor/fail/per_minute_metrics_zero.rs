use queue_core::prelude::*;
use queue_core::processor;

#[processor("email", per_minute_metrics = 0)]
async fn send(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

fn main() {}
