//! The chaos run: jobs across three worker *processes* while workers are SIGKILLed and
//! restarted and every Redis connection is killed now and then. At the end every job
//! is completed, none is lost or left active, and the side-effect table holds exactly
//! one row per job.
//!
//! CI-sized by default. A bigger run:
//! `CHAOS_JOBS=50000 cargo test --release -p queue-tests --test worker -- chaos:: --nocapture`
//! (`CHAOS_DEADLINE_SECS` bounds it; 180 by default).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use queue_core::testing::unique_prefix;
use queue_core::{app::Registrations, JobOptions, Queue, QueueApp, Retention};
use queue_tests::chaos::{self, Grant, QUEUE};
use queue_tests::PrivateRedis;
use tokio::process::{Child, Command};

const WORKERS: usize = 3;
const KILL_EVERY: Duration = Duration::from_millis(1_000);
const CONNECTIONS_KILLED_EVERY: Duration = Duration::from_millis(1_500);
const ADDS_IN_FLIGHT: usize = 50;
/// Jobs arrive over the run, as a service's traffic would, so that connection kills
/// also hit the producer: one every 2 ms, 500 a second.
const ARRIVAL_GAP: Duration = Duration::from_millis(2);

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Run {
    redis_url: String,
    prefix: String,
    db: PathBuf,
}

impl Run {
    fn spawn_worker(&self) -> Child {
        Command::new(env!("CARGO_BIN_EXE_chaos-worker"))
            .env("REDIS_URL", &self.redis_url)
            .env("PREFIX", &self.prefix)
            .env("CHAOS_DB", &self.db)
            .env("RUST_LOG", "off")
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("a chaos worker starts")
    }
}

/// What the producer saw.
#[derive(Default)]
struct Enqueued {
    add_errors: u64,
    duplicates: u64,
}

/// Adds every job at `ARRIVAL_GAP`, at most `ADDS_IN_FLIGHT` at a time; an add that fails (its connection was
/// killed) is sent again with the same id, which is safe: a second arrival is a duplicate.
async fn enqueue_all(q: Queue<Grant>, jobs: u64) -> Enqueued {
    let mut seen = Enqueued::default();
    let start = tokio::time::Instant::now();
    let outcomes: Vec<(u64, bool)> = stream::iter(0..jobs)
        .map(|n| {
            let q = q.clone();
            async move {
                tokio::time::sleep_until(
                    start + ARRIVAL_GAP * u32::try_from(n).unwrap_or(u32::MAX),
                )
                .await;
                let grant = Grant {
                    n,
                    account: format!("acct-{}", n % 97),
                    amount: i64::try_from(n % 10 + 1).unwrap_or(1),
                    fail_first: n % 3 == 0,
                };
                let options = JobOptions::new()
                    .job_id(format!("grant-{n}"))
                    // Every job stays, so that the end can account for each one.
                    .remove_on_complete(Retention::All)
                    .attempts(5)
                    .backoff(queue_core::Backoff::fixed(Duration::from_millis(100)));
                let mut errors = 0;
                loop {
                    match q.add("grant", grant.clone(), options.clone()).await {
                        Ok(added) => return (errors, added.duplicate),
                        Err(_) => {
                            errors += 1;
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
            }
        })
        .buffer_unordered(ADDS_IN_FLIGHT)
        .collect()
        .await;
    for (errors, duplicate) in outcomes {
        seen.add_errors += errors;
        seen.duplicates += u64::from(duplicate);
    }
    seen
}

/// Kills every normal and pub/sub connection but our own; returns how many died.
fn kill_connections(admin: &mut redis::Connection) -> u64 {
    ["normal", "pubsub"]
        .iter()
        .map(|kind| {
            redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg(kind)
                .arg("SKIPME")
                .arg("yes")
                .query::<u64>(admin)
                .unwrap_or(0)
        })
        .sum()
}

async fn scalar(db: &sqlx::SqlitePool, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(db)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_run_loses_nothing_and_applies_each_effect_exactly_once() {
    let jobs = setting("CHAOS_JOBS", 5_000);
    let deadline = Duration::from_secs(setting("CHAOS_DEADLINE_SECS", 180));
    let redis = PrivateRedis::start();
    let prefix = unique_prefix("chaos");
    let run = Run {
        redis_url: format!("redis://127.0.0.1:{}", redis.port()),
        db: std::env::temp_dir().join(format!("{prefix}.sqlite")),
        prefix,
    };
    let db = chaos::open_db(&run.db)
        .await
        .expect("the effects database opens");
    let producer = QueueApp::builder()
        .redis(run.redis_url.clone())
        .prefix(run.prefix.clone())
        .registrations(Registrations::None)
        .build()
        .await
        .expect("the producer connects");
    let q = producer.queue::<Grant>(QUEUE).unwrap();
    let mut admin = redis::Client::open(run.redis_url.as_str())
        .and_then(|c| c.get_connection())
        .expect("an admin connection");

    let started = Instant::now();
    let mut workers: Vec<Child> = (0..WORKERS).map(|_| run.spawn_worker()).collect();
    let producing = tokio::spawn(enqueue_all(q.clone(), jobs));

    let (mut worker_kills, mut connections_killed) = (0u64, 0u64);
    let (mut next_kill, mut next_connection_kill) =
        (started + KILL_EVERY, started + CONNECTIONS_KILLED_EVERY);
    loop {
        let counts = q.get_job_counts().await;
        if let Ok(counts) = &counts {
            if counts.completed + counts.failed == jobs {
                break;
            }
        }
        assert!(
            started.elapsed() < deadline,
            "not done after {deadline:?}: {counts:?}"
        );
        let now = Instant::now();
        if now >= next_kill {
            let victim = usize::try_from(worker_kills).unwrap_or(0) % WORKERS;
            let _ = workers[victim].start_kill();
            let _ = workers[victim].wait().await;
            workers[victim] = run.spawn_worker();
            worker_kills += 1;
            next_kill = now + KILL_EVERY;
        }
        if now >= next_connection_kill {
            connections_killed += kill_connections(&mut admin);
            next_connection_kill = now + CONNECTIONS_KILLED_EVERY;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let wall = started.elapsed();
    for worker in &mut workers {
        let _ = worker.start_kill();
        let _ = worker.wait().await;
    }
    let enqueued = producing.await.expect("the producer finishes");

    let counts = q.get_job_counts().await.unwrap();
    let effects = scalar(&db, "SELECT COUNT(*) FROM effects").await;
    let distinct = scalar(&db, "SELECT COUNT(DISTINCT job_id) FROM effects").await;
    let attempts = scalar(&db, "SELECT COUNT(*) FROM attempts").await;
    let retries = scalar(&db, "SELECT COUNT(*) FROM attempts WHERE attempt > 1").await;
    let recovered = scalar(&db, "SELECT COUNT(*) FROM attempts WHERE recovered = 1").await;
    let duplicates = scalar(&db, "SELECT COUNT(*) FROM attempts WHERE duplicate = 1").await;
    let amount = scalar(&db, "SELECT COALESCE(SUM(amount), 0) FROM effects").await;
    let expected_amount: u64 = (0..jobs).map(|n| n % 10 + 1).sum();

    println!(
        "chaos run: {jobs} jobs, {WORKERS} worker processes, {wall:.1?} wall\n\
         worker kills (SIGKILL + restart): {worker_kills}\n\
         connections killed (CLIENT KILL): {connections_killed}; producer adds retried: {}\n\
         attempts: {attempts}; retries: {retries}; stalls recovered: {recovered}\n\
         duplicates prevented: {duplicates} effects, {} enqueues\n\
         final counts: {counts:?}",
        enqueued.add_errors, enqueued.duplicates,
    );

    assert_eq!(counts.completed, jobs, "every job completed: {counts:?}");
    assert_eq!(counts.unfinished(), 0, "nothing left behind: {counts:?}");
    assert_eq!(counts.failed, 0, "nothing failed: {counts:?}");
    let jobs_i64 = i64::try_from(jobs).unwrap();
    assert_eq!(effects, jobs_i64, "one effect per job");
    assert_eq!(distinct, jobs_i64);
    assert_eq!(
        amount,
        i64::try_from(expected_amount).unwrap(),
        "no effect applied twice"
    );
    assert!(
        retries >= jobs_i64 / 3,
        "a third of the jobs failed their first attempt and were retried ({retries} retries)"
    );
    assert!(
        worker_kills > 0 && connections_killed > 0,
        "the chaos happened"
    );

    drop(db);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", run.db.display()));
    }
}
