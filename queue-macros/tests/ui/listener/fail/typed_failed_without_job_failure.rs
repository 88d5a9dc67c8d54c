use queue_core::{on_worker_event, events::EventJob};

#[on_worker_event("email", failed)]
async fn on_failed(job: EventJob<String>, reason: String) {
    let _ = (job, reason);
}

fn main() {}
