use queue_core::prelude::*;

#[derive(Serialize, Deserialize)]
pub struct WelcomeEmail { pub to: String }

#[job_queue("email")]
pub enum Email {
    BirthdayGreeting(WelcomeEmail),
    #[job("welcome")]
    Welcome { to: String },
    #[job("", output = bool)]
    Empty(WelcomeEmail),
}

fn main() {}
