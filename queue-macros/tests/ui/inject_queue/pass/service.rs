use queue_core::prelude::*;
use queue_core::inject_queue;

#[derive(Serialize)]
struct Welcome {
    to: String,
}

#[inject_queue]
pub struct EmailService {
    #[queue("email")]
    pub email: Queue<Welcome>,
    #[queue("coupon")]
    pub coupon: Queue<u64>,
}

fn main() {
    let _build: fn(&QueueApp) -> queue_core::Result<EmailService> = EmailService::from_app;
}
