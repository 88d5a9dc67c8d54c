use queue_core::{on_worker_event, WorkerEvent};

#[on_worker_event("email", finished)]
async fn on_finished(event: WorkerEvent) {
    let _ = event;
}

fn main() {}
