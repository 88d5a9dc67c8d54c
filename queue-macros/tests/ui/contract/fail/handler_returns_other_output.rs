use queue_core::prelude::*;

#[derive(Serialize, Deserialize)]
pub struct WelcomeEmail { pub to: String }

#[job_queue("email")]
pub enum Email {
    #[job("welcome", output = bool)]
    Welcome(WelcomeEmail),
}

#[processor(Email)]
async fn send_welcome(job: Job<WelcomeEmail>) -> Result<String, JobError> {
    Ok(job.data.to.clone())
}

async fn explicit(job: Job<WelcomeEmail>) -> Result<u32, JobError> {
    let _ = job;
    Ok(1)
}

fn main() {
    let _ = Processor::of::<Email>().handle(explicit);
}
