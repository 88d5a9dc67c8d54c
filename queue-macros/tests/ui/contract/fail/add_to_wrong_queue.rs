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

async fn signup(app: QueueApp) -> queue_core::Result<()> {
    let email = app.queue_of::<Email>()?;
    email.add_job(BirthdayGrant { user_id: "u1".into() }, JobOptions::new()).await?;
    Ok(())
}

fn main() {
    let _ = signup;
}
