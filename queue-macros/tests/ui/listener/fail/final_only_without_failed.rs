use queue_core::{on_worker_event, WorkerEvent};

#[on_worker_event("email", completed, final_only)]
async fn on_done(event: WorkerEvent) {
    let _ = event;
}

fn main() {}
