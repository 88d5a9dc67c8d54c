use queue_core::prelude::*;
use queue_core::processor;

#[processor("email")]
async fn send(job: Job<String>) -> Option<()> {
    let _ = job;
    None
}

fn main() {}
