//! What a job costs Redis: the commands of an `add` and of processing a job, ours against
//! the engine's own (BullMQ's scripts, the commands Node BullMQ sends too), as a private
//! Redis's `INFO commandstats` counts them. An extra command of ours would be a cost
//! every user pays on every job (issue #34; the bench's `commands` suite compares Node).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bullmq::options::RedisConnectionOptions;
use bullmq::{BulkJob, QueueOptions, Worker, WorkerOptions};
use queue_core::{app::Registrations, Job, JobError, JobOptions, Processor, QueueApp, Retention};
use queue_tests::{wait_until, PrivateRedis};

/// Calls per command since the last reset, without the test's own reset and reads.
fn calls(conn: &mut redis::Connection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.split(',').find_map(|p| p.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .filter(|(name, _)| !["info", "config|resetstat"].contains(&name.as_str()))
        .collect()
}

fn reset(conn: &mut redis::Connection) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(conn)
        .unwrap();
}

fn engine_connection(url: &str) -> RedisConnectionOptions {
    RedisConnectionOptions::new().url(url)
}

const JOBS: u64 = 50;

#[tokio::test]
async fn an_add_sends_redis_what_the_engines_add_sends() {
    let redis = PrivateRedis::start();
    let url = format!("redis://127.0.0.1:{}", redis.port());
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let app = QueueApp::builder()
        .redis(url.as_str())
        .registrations(Registrations::None)
        .build()
        .await
        .unwrap();
    let ours = app.queue::<serde_json::Value>("ours").unwrap();
    let options = QueueOptions::new().connection(engine_connection(&url));
    let raw = bullmq::Queue::with_options("raw", options).await.unwrap();
    // Each queue opened first: loading scripts and connecting is not a job's cost.
    ours.add("email", serde_json::json!({"n": 0}), JobOptions::new())
        .await
        .unwrap();
    raw.add("email", serde_json::json!({"n": 0})).await.unwrap();

    reset(&mut conn);
    for n in 1..=JOBS {
        ours.add("email", serde_json::json!({ "n": n }), JobOptions::new())
            .await
            .unwrap();
    }
    let ours_calls = calls(&mut conn);
    reset(&mut conn);
    for n in 1..=JOBS {
        raw.add("email", serde_json::json!({ "n": n }))
            .await
            .unwrap();
    }
    let raw_calls = calls(&mut conn);

    assert_eq!(ours_calls, raw_calls, "ours (left) against the engine's");
    assert_eq!(
        raw_calls.get("evalsha"),
        Some(&JOBS),
        "one script a job: {raw_calls:?}"
    );
}

static STARTED: AtomicU64 = AtomicU64::new(0);

async fn noop(_job: Job<serde_json::Value>) -> Result<(), JobError> {
    STARTED.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Waits until `queue` has `JOBS` completed jobs, by `ZCARD`s the caller takes out.
async fn completed(url: &str, queue: &str) -> u64 {
    let client = redis::Client::open(url).unwrap();
    let conn = client.get_multiplexed_async_connection().await.unwrap();
    let key = format!("bull:{queue}:completed");
    let mut polls = 0;
    wait_until(Duration::from_secs(30), "every job completed", || {
        polls += 1;
        let (mut conn, key) = (conn.clone(), key.clone());
        async move {
            let done: u64 = redis::cmd("ZCARD")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            (done >= JOBS).then_some(())
        }
    })
    .await;
    polls
}

/// Commands per command name while a worker processes `JOBS` waiting jobs, less what a
/// worker sends once (its start and stop) or by the clock (idle waits, stalled checks,
/// lock renewals): those are not a job's cost.
const NOT_PER_JOB: [&str; 6] = [
    "client|setname",
    "client|setinfo",
    "bzpopmin",
    "hello",
    "ping",
    "subscribe",
];

fn per_job_commands(mut counted: BTreeMap<String, u64>, polls: u64) -> BTreeMap<String, u64> {
    if let Some(zcard) = counted.get_mut("zcard") {
        *zcard -= polls;
    }
    counted.retain(|name, calls| !NOT_PER_JOB.contains(&name.as_str()) && *calls >= JOBS / 2);
    counted
}

#[tokio::test]
async fn processing_a_job_sends_redis_what_the_engines_worker_sends() {
    let redis = PrivateRedis::start();
    let url = format!("redis://127.0.0.1:{}", redis.port());
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let options = QueueOptions::new().connection(engine_connection(&url));
    for queue in ["ours", "raw"] {
        let q = bullmq::Queue::with_options(queue, options.clone())
            .await
            .unwrap();
        let jobs = (0..JOBS)
            .map(|n| BulkJob::new("email", serde_json::json!({ "n": n })))
            .collect();
        q.add_bulk(jobs).await.unwrap();
    }

    reset(&mut conn);
    let app = QueueApp::builder()
        .redis(url.as_str())
        .registrations(Registrations::None)
        // Kept, as the engine's worker keeps them by default: same scripts, same work.
        .default_job_options(JobOptions::new().remove_on_complete(Retention::All))
        .processor(Processor::new("ours").concurrency(1).any_job(noop))
        .build()
        .await
        .unwrap();
    let workers = app.start_workers().await.unwrap();
    let polls = completed(&url, "ours").await;
    workers.shutdown(Duration::from_secs(5)).await;
    let ours_calls = per_job_commands(calls(&mut conn), polls);

    reset(&mut conn);
    let worker = Worker::with_options(
        "raw",
        |_job: bullmq::Job, _token| async { Ok(serde_json::Value::Null) },
        WorkerOptions {
            connection: engine_connection(&url),
            concurrency: 1,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let polls = completed(&url, "raw").await;
    worker.close(5_000).await.unwrap();
    let raw_calls = per_job_commands(calls(&mut conn), polls);

    assert_eq!(STARTED.load(Ordering::Relaxed), JOBS);
    // A worker's once-only scripts (a stalled-jobs check at start, say) may run once
    // more in one run than the other; a command per job would be `JOBS` more.
    let names: std::collections::BTreeSet<&String> =
        ours_calls.keys().chain(raw_calls.keys()).collect();
    for name in names {
        let (ours, raw) = (ours_calls.get(name), raw_calls.get(name));
        let (o, r) = (ours.copied().unwrap_or(0), raw.copied().unwrap_or(0));
        assert!(
            o.abs_diff(r) <= 3,
            "{name}: ours {o}, the engine's {r} for {JOBS} jobs\nours: {ours_calls:?}\nengine: {raw_calls:?}"
        );
    }
    // One script a job, and the few a worker runs once (its first fetch, a stalled
    // check when idle).
    assert!(
        raw_calls
            .get("evalsha")
            .is_some_and(|n| (JOBS..=JOBS + 5).contains(n)),
        "one script a job: {raw_calls:?}"
    );
}
