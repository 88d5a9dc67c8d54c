use queue_core::prelude::*;

#[derive(Serialize, Deserialize)]
pub struct WelcomeEmail { pub to: String }
#[derive(Serialize, Deserialize)]
pub struct BirthdayGrant { pub user_id: String }

#[job_queue("email")]
pub enum Email {
    #[job("welcome")]
    Welcome(WelcomeEmail),
}

#[job_queue("coupon")]
pub enum Coupon {
    #[job("birthday-grant")]
    Grant(BirthdayGrant),
}

#[processor(Email)]
async fn grant(job: Job<BirthdayGrant>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

fn main() {}
