//! An outbox relay *process* for the crash test: it relays the outbox of the
//! PostgreSQL database at `DATABASE_URL` into Redis (`REDIS_URL`, `QUEUE_PREFIX`) with
//! a one-second lease, until it is killed.
//!
//! Run by tests/tests/store/outbox.rs.

use std::time::Duration;

use queue_core::{app::Registrations, store::Outbox};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")?;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await?;
    let _app = queue_tests::redis_builder()
        .prefix(std::env::var("QUEUE_PREFIX")?)
        .registrations(Registrations::None)
        .outbox(
            Outbox::new(pool)
                .lease(Duration::from_secs(1))
                .poll_interval(Duration::from_millis(20)),
        )
        .build()
        .await?;
    std::future::pending::<()>().await;
    Ok(())
}
