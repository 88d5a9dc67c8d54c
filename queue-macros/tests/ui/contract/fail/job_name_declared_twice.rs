use queue_core::prelude::*;

#[derive(Serialize, Deserialize)]
pub struct WelcomeEmail { pub to: String }
#[derive(Serialize, Deserialize)]
pub struct WelcomeBack { pub to: String }

#[job_queue("email")]
pub enum Email {
    #[job("welcome")]
    Welcome(WelcomeEmail),
    #[job("welcome")]
    Back(WelcomeBack),
}

fn main() {}
