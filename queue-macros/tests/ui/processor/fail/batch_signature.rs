// A batch handler's signature mistakes: a single job first, a single job's return,
// a job name (a batch takes every name), and batch(..) on an impl block.
use queue_core::prelude::*;
use queue_core::processor;

#[processor("rows", batch(size = 10))]
async fn takes_a_job(job: Job<u64>) -> Result<BatchResult, JobError> {
    let _ = job;
    Ok(BatchResult::new())
}

#[processor("rows", batch(size = 10))]
async fn returns_a_value(batch: Batch<u64>) -> Result<u64, JobError> {
    Ok(batch.len() as u64)
}

#[processor("rows", job = "insert", batch(size = 10))]
async fn names_a_job(batch: Batch<u64>) -> Result<BatchResult, JobError> {
    let _ = batch;
    Ok(BatchResult::new())
}

#[derive(Default)]
struct Rows;

#[processor("rows", batch(size = 10))]
impl Rows {
    #[job("insert")]
    async fn insert(&self, job: Job<u64>) -> Result<(), JobError> {
        let _ = job;
        Ok(())
    }
}

fn main() {}
