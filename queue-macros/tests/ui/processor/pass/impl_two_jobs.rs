use queue_core::prelude::*;
use queue_core::processor;

#[derive(Serialize, Deserialize)]
struct Welcome {
    to: String,
}

#[derive(Serialize, Deserialize)]
struct Reset {
    token: String,
}

struct Mailer;

#[derive(Default)]
struct EmailProcessor;

#[processor("email", concurrency = 2)]
impl EmailProcessor {
    #[job("welcome")]
    async fn welcome(&self, job: Job<Welcome>, _mailer: Dep<Mailer>) -> Result<(), JobError> {
        let _ = job.data.to;
        Ok(())
    }

    #[job("reset")]
    async fn reset(&self, job: Job<Reset>) -> Result<u32, JobError> {
        Ok(job.data.token.len() as u32)
    }
}

fn main() {}
