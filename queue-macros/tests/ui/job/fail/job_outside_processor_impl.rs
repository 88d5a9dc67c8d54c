use queue_core::prelude::*;
use queue_core::job;

struct Mailer;

impl Mailer {
    #[job("welcome")]
    async fn welcome(&self, job: Job<String>) -> Result<(), JobError> {
        let _ = job;
        Ok(())
    }
}

fn main() {}
