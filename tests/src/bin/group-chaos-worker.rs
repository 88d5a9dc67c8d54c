//! A worker process of the group chaos run (tests/tests/group/chaos.rs): runs the
//! grouped processor against `REDIS_URL` / `PREFIX`, reporting to the list `REPORTS`,
//! until it is killed.

use queue_core::app::Registrations;
use queue_tests::group_chaos::{self, Reports};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL")?;
    let conn = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let reports = Reports {
        conn,
        key: std::env::var("REPORTS")?,
    };
    let app = queue_core::QueueApp::builder()
        .redis(url)
        .prefix(std::env::var("PREFIX")?)
        .registrations(Registrations::None)
        .provide(reports)
        .processor(group_chaos::processor())
        .build()
        .await?;
    let _workers = app.start_workers().await?;
    println!("ready");
    std::future::pending::<()>().await;
    Ok(())
}
