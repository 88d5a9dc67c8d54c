// Every bad group limit is reported at once, each at its own value.
use queue_core::prelude::*;
use queue_core::processor;

#[processor("reports", groups(concurrency = 0, rate = "0/1m"))]
async fn stopped(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

#[processor("reports", groups(concurrency = 5000000000, rate = "30 a minute"))]
async fn too_many(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

#[processor("reports", groups(rate = "30/0ms"))]
async fn no_window(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

#[processor("reports", groups(rate = "30/500us"))]
async fn sub_millisecond(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

#[processor("reports", groups(rate = "30/1min"))]
async fn unknown_unit(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

fn main() {}
