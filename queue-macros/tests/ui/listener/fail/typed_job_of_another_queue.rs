use queue_core::prelude::*;

#[derive(Serialize, Deserialize)]
pub struct WelcomeEmail {
    pub to: String,
}

#[derive(Serialize, Deserialize)]
pub struct Invoice {
    pub number: u64,
}

#[job_queue("email")]
pub enum Email {
    #[job("welcome")]
    Welcome(WelcomeEmail),
}

#[job_queue("billing")]
pub enum Billing {
    #[job("invoice")]
    Invoice(Invoice),
}

#[on_worker_event(Email, failed)]
async fn on_failed(job: EventJob<Invoice>, failure: JobFailure) {
    let _ = (job, failure);
}

fn main() {}
