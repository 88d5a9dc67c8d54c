//! The grouped scripts run as Redis functions (`FCALL`, engine change 35) where the
//! server has them: loaded the first time a call needs them, again after the server
//! lost them, and by `EVALSHA` on a server without functions (Redis 6). Each test
//! has a private `redis-server`, whose functions and statistics it may flush.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use queue_core::prelude::*;
use queue_core::{app::Registrations, group::GroupLimits, queue::BulkJob, JobOptions, QueueApp};
use queue_tests::{wait_until, PrivateRedis, SOON};

const QUEUE: &str = "groups-functions";

async fn count(_: Job<serde_json::Value>, done: Dep<AtomicU64>) -> Result<(), JobError> {
    done.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// An app on `redis` whose worker takes `QUEUE` by groups.
async fn grouped_app(redis: &PrivateRedis, done: &Arc<AtomicU64>) -> QueueApp {
    QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .registrations(Registrations::None)
        .provide_arc(done.clone())
        .processor(
            Processor::new(QUEUE)
                .concurrency(4)
                .groups(GroupLimits::new().concurrency(1))
                .any_job(count),
        )
        .build()
        .await
        .expect("the app connects to its private Redis")
}

/// Adds `n` jobs over two groups, one by one and in bulk, and waits until the workers
/// have run `done_after` jobs in all.
async fn add_and_run(app: &QueueApp, done: &AtomicU64, n: u32, done_after: u64) {
    let queue = app.queue::<u32>(QUEUE).unwrap();
    queue
        .add("one", 0, JobOptions::new().group("acme"))
        .await
        .unwrap();
    let bulk = (1..n)
        .map(|i| {
            let group = if i % 2 == 0 { "acme" } else { "globex" };
            BulkJob::new("many", i).options(JobOptions::new().group(group))
        })
        .collect();
    queue.add_bulk(bulk).await.unwrap();
    wait_until(SOON, &format!("{done_after} jobs run"), || async {
        (done.load(Ordering::Relaxed) == done_after).then_some(())
    })
    .await;
}

/// `(calls of FCALL, calls of EVALSHA)` on a server since its statistics were reset.
fn script_calls(redis: &mut redis::Connection) -> (u64, u64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query(redis).unwrap();
    let calls = |command: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:calls=")))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |calls| calls.parse().unwrap())
    };
    (calls("fcall"), calls("evalsha"))
}

fn connect(redis: &PrivateRedis) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{}", redis.port()))
        .and_then(|client| client.get_connection())
        .expect("a connection to the private Redis")
}

fn our_libraries(redis: &mut redis::Connection) -> usize {
    let listed: redis::Value = redis::cmd("FUNCTION").arg("LIST").query(redis).unwrap();
    format!("{listed:?}").matches("queue_engine_").count()
}

#[tokio::test]
async fn grouped_jobs_run_by_fcall_and_a_server_that_lost_the_functions_gets_them_again() {
    let redis = PrivateRedis::start();
    let mut admin = connect(&redis);
    let done = Arc::new(AtomicU64::new(0));
    let app = grouped_app(&redis, &done).await;
    let workers = app.start_workers().await.unwrap();

    add_and_run(&app, &done, 20, 20).await;
    assert_eq!(our_libraries(&mut admin), 1, "the library is loaded once");
    let (fcalls, _) = script_calls(&mut admin);
    // Every add and every finish went by FCALL (the first calls twice: before and
    // after the load).
    assert!(fcalls >= 40, "{fcalls} FCALLs for 20 adds and 20 finishes");

    // The server loses its functions (a restart without persistence, a flush): the
    // next grouped call loads them again, and nothing is lost.
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut admin)
        .unwrap();
    assert_eq!(our_libraries(&mut admin), 0);
    add_and_run(&app, &done, 20, 40).await;
    assert_eq!(our_libraries(&mut admin), 1);
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn a_server_without_functions_runs_grouped_jobs_by_evalsha() {
    // As Redis 6 answers: no FCALL, no FUNCTION.
    let redis = PrivateRedis::start_with(&[
        "--rename-command",
        "FCALL",
        "",
        "--rename-command",
        "FUNCTION",
        "",
    ]);
    let mut admin = connect(&redis);
    let done = Arc::new(AtomicU64::new(0));
    let app = grouped_app(&redis, &done).await;
    let workers = app.start_workers().await.unwrap();

    add_and_run(&app, &done, 20, 20).await;
    let (fcalls, evalshas) = script_calls(&mut admin);
    assert_eq!(fcalls, 0);
    assert!(
        evalshas >= 40,
        "{evalshas} EVALSHAs for 20 adds and 20 finishes"
    );
    assert!(workers.shutdown(SOON).await.is_clean());
}
