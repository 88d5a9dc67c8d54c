//! A worker process of the batch chaos run (tests/tests/batch/chaos.rs): runs the
//! batch processor against `REDIS_URL` / `PREFIX`, logging to the list `LINES` and
//! counting in the hash `DONE`, until it is killed.

use queue_core::app::Registrations;
use queue_core::{JobOptions, Retention};
use queue_tests::batch_chaos::{self, Log};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL")?;
    let conn = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let log = Log {
        conn,
        lines: std::env::var("LINES")?,
        done: std::env::var("DONE")?,
    };
    let app = queue_core::QueueApp::builder()
        .redis(url)
        .prefix(std::env::var("PREFIX")?)
        .registrations(Registrations::None)
        // Every completed job stays, so that the run can account for each one.
        .default_job_options(JobOptions::new().remove_on_complete(Retention::All))
        .provide(log)
        .processor(batch_chaos::processor())
        .build()
        .await?;
    let _workers = app.start_workers().await?;
    println!("ready");
    std::future::pending::<()>().await;
    Ok(())
}
