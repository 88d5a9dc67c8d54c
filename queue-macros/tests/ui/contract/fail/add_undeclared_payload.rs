use queue_core::prelude::*;

#[derive(Serialize, Deserialize)]
pub struct WelcomeEmail { pub to: String }

#[job_queue("email")]
pub enum Email {
    #[job("welcome")]
    Welcome(WelcomeEmail),
}

#[derive(Serialize, Deserialize)]
pub struct Newsletter { pub issue: u32 }

async fn send(app: QueueApp) -> queue_core::Result<()> {
    app.add_job(Newsletter { issue: 3 }, JobOptions::new()).await?;
    Ok(())
}

fn main() {
    let _ = send;
}
