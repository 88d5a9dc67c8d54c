// A batch handler: `Batch<T>` first, dependencies after, `Result<BatchResult, JobError>`.
use queue_core::prelude::*;
use queue_core::processor;

#[derive(Serialize, Deserialize)]
struct Row {
    id: u64,
}

struct Db;

#[processor("rows", concurrency = 2, timeout = "30s", batch(size = 100, wait = "20ms"))]
async fn insert(batch: Batch<Row>, _db: Dep<Db>) -> Result<BatchResult, JobError> {
    let mut result = BatchResult::new();
    for job in &batch {
        if job.data.id == 0 {
            result.fail(job, JobError::unrecoverable("row 0 is reserved"));
        }
    }
    Ok(result)
}

// `wait` may be left out: the batch runs with what it found.
#[processor("mail", batch(size = 10))]
async fn send(batch: Batch<String>) -> Result<BatchResult, JobError> {
    let _ = batch.len();
    Ok(BatchResult::new())
}

fn main() {}
