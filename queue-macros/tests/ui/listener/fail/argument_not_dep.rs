use queue_core::prelude::*;

#[on_worker_event("email", failed)]
async fn alert(event: WorkerEvent, mailer: String) {
    let _ = (event, mailer);
}

fn main() {}
