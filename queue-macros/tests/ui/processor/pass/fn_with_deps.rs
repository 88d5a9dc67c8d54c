use queue_core::prelude::*;
use queue_core::processor;

#[derive(Serialize, Deserialize)]
struct Welcome {
    to: String,
}

struct Mailer;
struct Templates;

#[processor("email", concurrency = 5, job = "welcome", timeout = "30s", lock_duration = "1m", limiter(max = 10, per = "1s"))]
async fn send_welcome(job: Job<Welcome>, _mailer: Dep<Mailer>, _templates: Dep<Templates>) -> Result<String, JobError> {
    Ok(job.data.to)
}

fn main() {}
