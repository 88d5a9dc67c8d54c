use queue_core::prelude::*;
use queue_core::processor;

struct Mailer;

#[processor("reports", job = "notify")]
async fn notify(_job: Job<String>, _mailer: Dep<Mailer>, steps: ChildResults<u32>) -> Result<usize, JobError> {
    Ok(steps.len())
}

fn main() {}
