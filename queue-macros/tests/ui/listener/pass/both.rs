use queue_core::{on_queue_event, on_worker_event, QueueEvent, WorkerEvent};

#[on_worker_event("email", failed)]
async fn on_failed(event: WorkerEvent) {
    let _ = event;
}

#[on_queue_event("email", retries_exhausted)]
async fn on_exhausted(event: QueueEvent) {
    let _ = event;
}

fn main() {}
