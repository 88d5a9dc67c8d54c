//! A worker process of the chaos run (tests/tests/worker/chaos.rs): runs the `grant`
//! processor against `REDIS_URL` / `PREFIX`, with its effects in the SQLite file
//! `CHAOS_DB`, until it is killed.

use std::path::PathBuf;

use queue_core::app::Registrations;
use queue_tests::chaos;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let db = PathBuf::from(std::env::var("CHAOS_DB")?);
    let pool = chaos::open_db(&db).await?;
    let app = queue_tests::redis_builder()
        .prefix(std::env::var("PREFIX")?)
        .registrations(Registrations::None)
        .provide(pool)
        .processor(chaos::processor())
        .build()
        .await?;
    let _workers = app.start_workers().await?;
    println!("ready");
    std::future::pending::<()>().await;
    Ok(())
}
