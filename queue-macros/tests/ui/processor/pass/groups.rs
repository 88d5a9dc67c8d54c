// Every form of `groups`: alone, each limit, both, a bare unit, through a renamed
// crate, and on an impl block (one limits function for all its jobs).
mod reexport {
    pub use queue_core as queues;
}

use queue_core::prelude::*;
use queue_core::processor;

#[derive(Serialize, Deserialize)]
struct Render {
    page: u32,
}

#[job_queue("reports")]
enum Reports {
    #[job("render")]
    Render(Render),
}

#[processor(Reports, concurrency = 20, groups(concurrency = 2, rate = "30/1m"))]
async fn render(job: Job<Render>) -> Result<(), JobError> {
    let _ = job.data.page;
    Ok(())
}

#[processor("turns", groups)]
async fn turns(_job: Job<String>) -> Result<(), JobError> {
    Ok(())
}

#[processor("slots", groups(concurrency = 1))]
async fn slots(_job: Job<String>) -> Result<(), JobError> {
    Ok(())
}

#[processor("paced", groups(rate = "10/s"), crate = "reexport::queues")]
async fn paced(_job: Job<String>) -> Result<(), JobError> {
    Ok(())
}

#[derive(Default)]
struct Exports;

#[processor("exports", groups(rate = "5/500ms", concurrency = 3))]
impl Exports {
    #[job("csv")]
    async fn csv(&self, _job: Job<String>) -> Result<(), JobError> {
        Ok(())
    }

    #[job("pdf")]
    async fn pdf(&self, _job: Job<String>) -> Result<(), JobError> {
        Ok(())
    }
}

fn main() {}
