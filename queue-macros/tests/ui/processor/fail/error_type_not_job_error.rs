use queue_core::prelude::*;
use queue_core::processor;

#[processor("email")]
async fn send(job: Job<String>) -> Result<(), std::io::Error> {
    let _ = job;
    Ok(())
}

fn main() {}
