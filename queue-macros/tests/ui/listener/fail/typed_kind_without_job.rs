use queue_core::{on_worker_event, events::EventJob};

#[on_worker_event("email", active)]
async fn on_active(job: EventJob<String>, what: String) {
    let _ = (job, what);
}

fn main() {}
