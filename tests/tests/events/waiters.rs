//! Five thousand waits on one queue share one reader of its events: the Redis
//! connections are counted with `CLIENT LIST` on a private Redis (nobody else's clients
//! there), and waits whose callers left leave nothing behind.

use std::time::Duration;

use queue_core::app::Registrations;
use queue_core::prelude::*;
use queue_core::QueueApp;
use queue_tests::{wait_until, PrivateRedis};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Ping(u32);

#[job_queue("many-pings")]
enum Pings {
    #[job("ping", output = u32)]
    Ping(Ping),
}

#[processor(Pings, concurrency = 50)]
async fn pong(job: Job<Ping>) -> Result<u32, JobError> {
    Ok(job.data.0 + 1)
}

const WAITERS: u32 = 5_000;

/// Clients connected to `url`'s Redis, not counting the one asking.
fn connections(url: &str) -> usize {
    let mut conn = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("a connection to the private Redis");
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut conn)
        .expect("CLIENT LIST");
    list.lines().filter(|l| !l.trim().is_empty()).count() - 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_waiters_hold_at_most_two_connections_and_leave_nothing_behind() {
    let redis = PrivateRedis::start();
    let url = format!("redis://127.0.0.1:{}", redis.port());
    let app = QueueApp::builder()
        .redis(&url)
        .registrations(Registrations::of::<Pings>())
        .prefix("waiters")
        // Every finished job kept: a waiter whose watcher fell behind (5,000 of them on
        // one reader) reads the outcome from the job, which the default retention (the
        // last 1,000) could have removed by then; that `Gone` is documented, and not
        // what this test is about.
        .queue_defaults_of::<Pings>(JobOptions::new().remove_on_complete(Retention::All))
        .build()
        .await
        .unwrap();
    let pings = app.queue_of::<Pings>().unwrap();
    let added = pings
        .add_jobs((0..WAITERS).map(|n| (Ping(n), JobOptions::new())))
        .await
        .unwrap();
    let before = connections(&url);

    let waits: Vec<_> = added
        .into_iter()
        .map(|job| {
            tokio::spawn(async move { job.wait_for::<Ping>(Duration::from_secs(120)).await })
        })
        .collect();
    wait_until(
        Duration::from_secs(60),
        "every waiter to subscribe",
        || async { (app.watch_stats().watchers == WAITERS as usize).then_some(()) },
    )
    .await;
    let during = connections(&url);
    eprintln!("connections: {before} before the waits, {during} with {WAITERS} waiting");
    assert!(
        during <= before + 2,
        "{WAITERS} waiters on one queue: {before} connections before, {during} during"
    );
    assert_eq!(app.watch_stats().readers, 1);

    // A fifth of the callers leave: their waits end, and leave the reader.
    for wait in &waits[..WAITERS as usize / 5] {
        wait.abort();
    }
    wait_until(
        Duration::from_secs(10),
        "the waits of the callers who left to end",
        || async { (app.watch_stats().watchers == (WAITERS - WAITERS / 5) as usize).then_some(()) },
    )
    .await;

    let workers = app.start_workers().await.unwrap();
    let mut completed = 0;
    for wait in waits.into_iter().skip(WAITERS as usize / 5) {
        if let JobOutcome::Completed(_) = wait.await.unwrap().unwrap() {
            completed += 1;
        }
    }
    assert_eq!(completed, WAITERS - WAITERS / 5);
    assert_eq!(app.watch_stats().watchers, 0, "no waiter left behind");
    wait_until(Duration::from_secs(10), "the reader to stop", || async {
        (app.watch_stats().readers == 0).then_some(())
    })
    .await;
    workers.shutdown(Duration::from_secs(10)).await;
}
