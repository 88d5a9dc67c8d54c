use queue_core::prelude::*;
use queue_core::inject_queue;

#[inject_queue]
struct EmailService {
    email: Queue<String>,
}

fn main() {}
