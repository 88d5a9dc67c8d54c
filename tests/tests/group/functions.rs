//! The grouped scripts run as Redis functions (`FCALL`, engine change 35) where the
//! server has them: loaded once by the first calls that need them, again after the
//! server lost them, and by `EVALSHA` on a server without functions (Redis 6) or that
//! refuses to load them. Each test has a private `redis-server`, whose functions and
//! statistics it may flush.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use queue_core::prelude::*;
use queue_core::{app::Registrations, group::GroupLimits, queue::BulkJob, JobOptions, QueueApp};
use queue_tests::{command_calls, wait_until, PrivateRedis, SOON};

const QUEUE: &str = "groups-functions";
/// Jobs each round adds: four single adds at once, then a bulk of 16.
const JOBS: u64 = 20;
/// The single adds of a round, sent at once.
const AT_ONCE: u64 = 4;

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

/// Adds `JOBS` jobs over two groups: first `AT_ONCE` single adds sent together (on a
/// server without the library they all find the function missing at once), then a
/// bulk.
async fn add_jobs(app: &QueueApp) {
    let queue = app.queue::<u64>(QUEUE).unwrap();
    let group = |i: u64| if i % 2 == 1 { "globex" } else { "acme" };
    let singles = (0..AT_ONCE).map(|i| {
        let queue = &queue;
        async move {
            queue
                .add("one", i, JobOptions::new().group(group(i)))
                .await
                .unwrap();
        }
    });
    futures::future::join_all(singles).await;
    let bulk = (AT_ONCE..JOBS)
        .map(|i| BulkJob::new("many", i).options(JobOptions::new().group(group(i))))
        .collect();
    queue.add_bulk(bulk).await.unwrap();
}

async fn wait_for_runs(done: &AtomicU64, runs: u64) {
    wait_until(SOON, &format!("{runs} jobs run"), || async {
        (done.load(Ordering::Relaxed) == runs).then_some(())
    })
    .await;
}

fn our_libraries(redis: &mut redis::Connection) -> usize {
    let listed: redis::Value = redis::cmd("FUNCTION").arg("LIST").query(redis).unwrap();
    format!("{listed:?}").matches("queue_engine_").count()
}

#[tokio::test]
async fn grouped_jobs_run_by_fcall_and_a_server_that_lost_the_functions_gets_them_again() {
    let redis = PrivateRedis::start();
    let mut admin = redis.connection();
    let done = Arc::new(AtomicU64::new(0));
    let app = grouped_app(&redis, &done).await;

    // The single adds all find the function missing at once: one of them loads it.
    add_jobs(&app).await;
    assert_eq!(our_libraries(&mut admin), 1);
    assert_eq!(
        command_calls(&mut admin, "function|load"),
        (1, 0),
        "loaded once"
    );
    let (fcalls, failed) = command_calls(&mut admin, "fcall");
    assert_eq!(fcalls - failed, JOBS, "every add went by FCALL");
    assert_eq!(command_calls(&mut admin, "evalsha").0, 0);

    let workers = app.start_workers().await.unwrap();
    wait_for_runs(&done, JOBS).await;
    let (fcalls, failed) = command_calls(&mut admin, "fcall");
    assert!(
        fcalls - failed >= 2 * JOBS,
        "{fcalls} FCALLs ({failed} failed) for {JOBS} adds and {JOBS} finishes"
    );

    // The server loses its functions (a restart without persistence, a flush): the
    // next grouped calls load them again, at most once for the producer's connection
    // and once for the worker's (whichever reaches Redis first), and nothing is lost.
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut admin)
        .unwrap();
    assert_eq!(our_libraries(&mut admin), 0);
    add_jobs(&app).await;
    wait_for_runs(&done, 2 * JOBS).await;
    assert_eq!(our_libraries(&mut admin), 1);
    let (loads, failed_loads) = command_calls(&mut admin, "function|load");
    assert!((2..=3).contains(&loads), "{loads} loads");
    assert_eq!(failed_loads, 0);
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn a_server_without_functions_runs_grouped_jobs_by_evalsha() {
    // As Redis 6 answers: no FCALL, no FUNCTION.
    runs_by_evalsha(&[
        "--rename-command",
        "FCALL",
        "",
        "--rename-command",
        "FUNCTION",
        "",
    ])
    .await;
}

#[tokio::test]
async fn a_server_that_refuses_to_load_the_functions_runs_grouped_jobs_by_evalsha() {
    // FCALL is there, FUNCTION is not (as where an ACL allows the one and not the
    // other): the first calls find the function missing and cannot load it; from then
    // on the connection's grouped scripts go by EVALSHA, loading nothing again.
    let first_round = runs_by_evalsha(&["--rename-command", "FUNCTION", ""]).await;
    let (fcalls, failed) = first_round.fcall;
    assert_eq!(fcalls, failed, "no FCALL ran");
}

/// What a first round of jobs cost a server, by command.
struct FirstRound {
    fcall: (u64, u64),
}

/// Runs two rounds of grouped jobs on a private Redis started with `server_args`, and
/// checks that the second goes by EVALSHA only; returns what the first cost.
async fn runs_by_evalsha(server_args: &[&str]) -> FirstRound {
    let redis = PrivateRedis::start_with(server_args);
    let mut admin = redis.connection();
    let done = Arc::new(AtomicU64::new(0));
    let app = grouped_app(&redis, &done).await;
    let workers = app.start_workers().await.unwrap();
    add_jobs(&app).await;
    wait_for_runs(&done, JOBS).await;
    let first_round = FirstRound {
        fcall: command_calls(&mut admin, "fcall"),
    };
    assert_second_round_goes_by_evalsha(&app, &done, &mut admin).await;
    assert!(workers.shutdown(SOON).await.is_clean());
    first_round
}

/// Once a connection has learned that its server runs no functions of ours, its
/// grouped scripts go straight by EVALSHA: a second round sends no FCALL at all.
async fn assert_second_round_goes_by_evalsha(
    app: &QueueApp,
    done: &AtomicU64,
    admin: &mut redis::Connection,
) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(admin)
        .unwrap();
    add_jobs(app).await;
    wait_for_runs(done, 2 * JOBS).await;
    assert_eq!(command_calls(admin, "fcall"), (0, 0));
    let evalshas = command_calls(admin, "evalsha").0;
    assert!(
        evalshas >= 2 * JOBS,
        "{evalshas} EVALSHAs for {JOBS} adds and {JOBS} finishes"
    );
}

#[tokio::test]
async fn a_function_that_fails_midway_is_not_run_again_by_evalsha() {
    // A user whose ACL refuses ZADD: a grouped add stores its job, then fails at its
    // first ZADD, inside the function. That error says the function ran: it must
    // reach the caller as it is, and the add must not be sent again by EVALSHA, which
    // would take a second id and store the job twice.
    let redis = PrivateRedis::start();
    let mut admin = redis.connection();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER", "producer", "on", ">secret", "~*", "&*", "+@all", "-zadd",
        ])
        .query(&mut admin)
        .unwrap();
    let app = QueueApp::builder()
        .redis(format!(
            "redis://producer:secret@127.0.0.1:{}",
            redis.port()
        ))
        .registrations(Registrations::None)
        .build()
        .await
        .expect("the producer connects");
    let queue = app.queue::<u64>(QUEUE).unwrap();
    let refused = queue
        .add("one", 1, JobOptions::new().group("acme"))
        .await
        .expect_err("ZADD is refused to this user");
    // Redis names the function that failed, and where.
    assert!(
        refused.to_string().contains("groupAdd_"),
        "the ACL's refusal inside the function reaches the caller: {refused}"
    );
    let ids: Option<u64> = redis::cmd("GET")
        .arg(format!("bull:{QUEUE}:id"))
        .query(&mut admin)
        .unwrap();
    assert_eq!(ids, Some(1), "the add ran once");
    assert_eq!(command_calls(&mut admin, "evalsha").0, 0);
}
