use queue_core::prelude::*;
use queue_core::{events::EventJob, events::JobFailure};

#[derive(Serialize, Deserialize)]
pub struct WelcomeEmail {
    pub to: String,
}

#[derive(Serialize, Deserialize)]
pub struct Delivery {
    pub accepted: bool,
}

#[job_queue("email")]
pub enum Email {
    #[job("welcome", output = Delivery)]
    Welcome(WelcomeEmail),
}

pub struct Alerts;

#[on_worker_event(Email, failed)]
async fn each_failure(job: EventJob<WelcomeEmail>, failure: JobFailure) {
    let _ = (job.data.to, failure.reason);
}

#[on_worker_event(Email, failed, final_only)]
async fn last_failure(job: EventJob<WelcomeEmail>, failure: JobFailure, alerts: Dep<Alerts>) {
    let _ = (job, failure, alerts);
}

#[on_worker_event(Email, completed)]
async fn delivered(job: EventJob<WelcomeEmail>, delivery: Delivery) {
    let _ = (job, delivery.accepted);
}

#[on_worker_event(Email, progress)]
async fn progressed(job: EventJob<WelcomeEmail>, progress: u32) {
    let _ = (job, progress);
}

#[on_worker_event("plain", failed, job = "resize")]
async fn plain(job: EventJob<WelcomeEmail>, failure: JobFailure) {
    let _ = (job, failure);
}

#[on_worker_event("plain", failed, final_only)]
async fn untyped_final(event: WorkerEvent) {
    let _ = event;
}

fn main() {}
