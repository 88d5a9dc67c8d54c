use queue_core::{on_queue_event, events::EventJob};

#[on_queue_event("email", completed)]
async fn on_done(job: EventJob<String>, output: String) {
    let _ = (job, output);
}

fn main() {}
