use queue_core::prelude::*;

pub struct WelcomeEmail { pub to: String }

#[job_queue("email")]
pub enum Email {
    #[job("welcome")]
    Welcome(WelcomeEmail),
}

fn main() {}
