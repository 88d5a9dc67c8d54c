use queue_core::prelude::*;
use queue_core::processor;

#[processor("email")]
async fn send(to: String) -> Result<(), JobError> {
    let _ = to;
    Ok(())
}

fn main() {}
