// One bad method in a #[processor] impl reports that method only: the other #[job]
// attributes do not each add "#[job] goes inside a #[processor] impl".
use queue_core::prelude::*;
use queue_core::processor;

#[derive(Default)]
struct Mail;

#[processor("email")]
impl Mail {
    #[job("welcome")]
    async fn welcome(&self, job: Job<String>) -> Result<(), JobError> {
        let _ = job;
        Ok(())
    }

    #[job("farewell")]
    fn farewell(&self, job: Job<String>) -> Result<(), JobError> {
        let _ = job;
        Ok(())
    }

    #[job("reminder")]
    async fn reminder(&self, job: Job<String>) -> Result<(), JobError> {
        let _ = job;
        Ok(())
    }
}

fn main() {}
