use queue_core::inject_queue;

#[inject_queue]
struct EmailService {
    #[queue("email")]
    email: Vec<String>,
}

fn main() {}
