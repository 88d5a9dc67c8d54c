use queue_core::prelude::*;
use queue_core::processor;

struct Mailer;

#[processor("reports", job = "notify")]
async fn notify(_job: Job<String>, steps: ChildResults<u32>, _mailer: Dep<Mailer>) -> Result<u32, JobError> {
    Ok(steps.values().sum())
}

#[derive(Default)]
struct Reports;

#[processor("report-steps")]
impl Reports {
    #[job("render")]
    async fn render(&self, _job: Job<u32>, parts: ChildResults<String>) -> Result<usize, JobError> {
        Ok(parts.len())
    }
}

fn main() {}
