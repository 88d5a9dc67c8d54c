use queue_core::prelude::*;

#[processor("email", also_serve = "email-eu")]
async fn send(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

#[processor("email", job = "other", also_serve = ["email:eu"])]
async fn other(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

fn main() {}
