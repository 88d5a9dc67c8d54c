// `batch` written wrongly: no size, a size out of range, an unknown key, a bare flag,
// a wait that is not a duration.
use queue_core::prelude::*;
use queue_core::processor;

#[processor("rows", batch(wait = "20ms"))]
async fn no_size(batch: Batch<u64>) -> Result<BatchResult, JobError> {
    let _ = batch;
    Ok(BatchResult::new())
}

#[processor("rows", batch(size = 5000))]
async fn too_big(batch: Batch<u64>) -> Result<BatchResult, JobError> {
    let _ = batch;
    Ok(BatchResult::new())
}

#[processor("rows", batch(size = 0))]
async fn empty(batch: Batch<u64>) -> Result<BatchResult, JobError> {
    let _ = batch;
    Ok(BatchResult::new())
}

#[processor("rows", batch(size = 10, linger = "5ms"))]
async fn unknown_key(batch: Batch<u64>) -> Result<BatchResult, JobError> {
    let _ = batch;
    Ok(BatchResult::new())
}

#[processor("rows", batch)]
async fn bare(batch: Batch<u64>) -> Result<BatchResult, JobError> {
    let _ = batch;
    Ok(BatchResult::new())
}

#[processor("rows", batch(size = 10, wait = "soon"))]
async fn bad_wait(batch: Batch<u64>) -> Result<BatchResult, JobError> {
    let _ = batch;
    Ok(BatchResult::new())
}

fn main() {}
