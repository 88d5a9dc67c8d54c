use queue_core::prelude::*;
use queue_core::processor;

struct Mailer;

#[processor("email")]
async fn send(job: Job<String>, mailer: Mailer) -> Result<(), JobError> {
    let _ = (job, mailer);
    Ok(())
}

fn main() {}
