use queue_core::prelude::*;
use queue_core::processor;

struct NotSerde {
    pages: u32,
}

#[processor("reports", job = "notify")]
async fn notify(_job: Job<String>, steps: ChildResults<NotSerde>) -> Result<u32, JobError> {
    Ok(steps.values().map(|s| s.pages).sum())
}

fn main() {}
