use queue_core::prelude::*;
use queue_core::processor;

struct NotSerde {
    to: String,
}

#[processor("email")]
async fn send(job: Job<NotSerde>) -> Result<(), JobError> {
    let _ = job.data.to;
    Ok(())
}

fn main() {}
