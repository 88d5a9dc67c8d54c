//! The welcome-email / birthday-coupon example service.
//!
//! Run with: `cargo run --release -p welcome-app`
//!
//! The HTTP service arrives with the queue-axum and example issues. Until then this
//! binary checks that Redis answers and says what it will become.

fn main() {
    println!(
        "welcome-app: the example service is not built yet.\n\
         It will serve POST /users (202 Accepted, a welcome email job on queue `email`)\n\
         and a daily birthday-coupon scan on queue `coupon`, on PORT (default 3000),\n\
         using REDIS_URL (default {}).\n\
         Today, `scripts/test.sh` runs queue-core's suite against Redis.",
        queue_core::DEFAULT_REDIS_URL
    );
}
