use queue_core::prelude::*;

#[derive(Serialize, Deserialize)]
pub struct WelcomeEmail {
    pub to: String,
}

#[job_queue("email")]
pub enum Email {
    #[job("welcome")] // output `()`
    Welcome(WelcomeEmail),
}

#[on_worker_event(Email, completed)]
async fn on_done(job: EventJob<WelcomeEmail>, output: String) {
    let _ = (job, output);
}

fn main() {}
