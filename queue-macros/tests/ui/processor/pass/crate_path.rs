mod reexport {
    pub use queue_core as queues;
}

use queue_core::prelude::*;

#[queue_core::processor("email", crate = "reexport::queues")]
async fn send(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

fn main() {}
