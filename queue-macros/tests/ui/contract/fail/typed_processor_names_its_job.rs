use queue_core::prelude::*;

#[derive(Serialize, Deserialize)]
pub struct WelcomeEmail { pub to: String }

#[job_queue("email")]
pub enum Email {
    #[job("welcome")]
    Welcome(WelcomeEmail),
}

#[processor(Email, job = "welcome")]
async fn send(job: Job<WelcomeEmail>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

#[derive(Default)]
pub struct Jobs;

#[processor(Email)]
impl Jobs {
    #[job("welcome")]
    async fn welcome(&self, job: Job<WelcomeEmail>) -> Result<(), JobError> {
        let _ = job;
        Ok(())
    }
}

fn main() {}
