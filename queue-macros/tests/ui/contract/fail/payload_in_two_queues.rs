use queue_core::prelude::*;

#[derive(Serialize, Deserialize)]
pub struct WelcomeEmail { pub to: String }

#[job_queue("email")]
pub enum Email {
    #[job("welcome")]
    Welcome(WelcomeEmail),
}

#[job_queue("email-eu")]
pub enum EmailEu {
    #[job("welcome")]
    Welcome(WelcomeEmail),
}

fn main() {}
