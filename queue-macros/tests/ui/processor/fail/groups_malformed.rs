// `groups` written wrongly: a value, twice, unknown or repeated keys, values of the
// wrong kind.
use queue_core::prelude::*;
use queue_core::processor;

#[processor("reports", groups = 3)]
async fn valued(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

#[processor("reports", groups, concurrency = 4, groups(concurrency = 2))]
async fn twice(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

#[processor("reports", groups(concurency = 2, rate = "30/1m", rate = "60/1m"))]
async fn misspelled(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

#[processor("reports", groups(concurrency = "2", rate = 30))]
async fn wrong_kinds(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

fn main() {}
