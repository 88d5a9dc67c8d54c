use queue_core::{inject_queue, Queue};

#[inject_queue(axum = "yes")]
struct Producers {
    #[queue("email")]
    email: Queue<String>,
}

fn main() {}
