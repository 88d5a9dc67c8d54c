//! The engine's batch worker (PATCHES.md change 36): many jobs taken and completed per
//! script call, each an ordinary BullMQ job with its own lock, events and record.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bullmq::batch::{BatchOptions, BatchProcessorFn};
use bullmq::options::RedisConnectionOptions;
use bullmq::{BulkJob, QueueOptions, Worker, WorkerOptions};
use queue_tests::{wait_until, PrivateRedis};

/// The sizes of the batches the processor was handed, and each job's id.
type Seen = Arc<Mutex<Vec<Vec<String>>>>;

/// Completes every job with `{"id": ..}`, but fails the ids in `fail`.
fn recording(seen: Seen, fail: &'static [&'static str]) -> BatchProcessorFn {
    Arc::new(move |jobs| {
        let seen = seen.clone();
        Box::pin(async move {
            let ids: Vec<String> = jobs.iter().map(|(job, _)| job.id().to_owned()).collect();
            seen.lock().unwrap().push(ids.clone());
            ids.iter()
                .map(|id| {
                    if fail.contains(&id.as_str()) {
                        Err(bullmq::Error::ProcessingError(format!("{id} bounced")))
                    } else {
                        Ok(serde_json::json!({ "id": id }))
                    }
                })
                .collect()
        })
    })
}

fn options_of(url: &str, batch: BatchOptions) -> WorkerOptions {
    WorkerOptions {
        connection: RedisConnectionOptions::new().url(url),
        concurrency: 2,
        batch: Some(batch),
        ..Default::default()
    }
}

async fn queue(url: &str, name: &str, jobs: usize, attempts: u32) -> bullmq::Queue {
    let options = QueueOptions::new().connection(RedisConnectionOptions::new().url(url));
    let queue = bullmq::Queue::with_options(name, options).await.unwrap();
    let bulk = (0..jobs)
        .map(|n| {
            BulkJob::new("email", serde_json::json!({ "n": n })).options(
                bullmq::JobOptions::new()
                    .job_id(format!("mail-{n}"))
                    .attempts(attempts),
            )
        })
        .collect();
    queue.add_bulk(bulk).await.unwrap();
    queue
}

/// A Redis of the test's own, its URL and a connection to it.
fn private_redis() -> (PrivateRedis, String, redis::Connection) {
    let redis = PrivateRedis::start();
    let url = format!("redis://127.0.0.1:{}", redis.port());
    let conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    (redis, url, conn)
}

fn zcard(conn: &mut redis::Connection, key: &str) -> u64 {
    redis::cmd("ZCARD").arg(key).query(conn).unwrap()
}

#[tokio::test]
async fn a_batch_worker_completes_each_job_as_bullmq_records_one() {
    let (_redis, url, mut conn) = private_redis();
    let _queue = queue(&url, "mail", 250, 1).await;
    // The order BullMQ's worker would take them in: from the right of `wait` (an
    // `add_bulk` sends its chunks at once, so not always in the order of the ids).
    let waiting: Vec<String> = redis::cmd("LRANGE")
        .arg("bull:mail:wait")
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    let first_taken: Vec<String> = waiting.iter().rev().take(100).cloned().collect();
    let seen = Seen::default();
    let worker = Worker::with_options(
        "mail",
        BatchOptions::unused_processor(),
        options_of(
            &url,
            BatchOptions::new(100, 0, recording(seen.clone(), &[])),
        ),
    )
    .await
    .unwrap();
    wait_until(Duration::from_secs(20), "250 jobs completed", || {
        let done = zcard(&mut conn, "bull:mail:completed");
        std::future::ready((done == 250).then_some(()))
    })
    .await;
    worker.close(5_000).await.unwrap();

    let batches = seen.lock().unwrap().clone();
    let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 250, "each job once: {sizes:?}");
    assert_eq!(sizes[0], 100, "a full batch first: {sizes:?}");
    assert!(sizes.iter().all(|&s| s <= 100), "{sizes:?}");
    // In the order BullMQ's worker takes them.
    assert_eq!(batches[0], first_taken);
    for n in [0, 137, 249] {
        let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(format!("bull:mail:mail-{n}"))
            .query(&mut conn)
            .unwrap();
        assert_eq!(fields["returnvalue"], format!("{{\"id\":\"mail-{n}\"}}"));
        assert_eq!(fields["atm"], "1", "{fields:?}");
        assert_eq!(fields["ats"], "1", "{fields:?}");
        assert!(fields.contains_key("processedOn") && fields.contains_key("finishedOn"));
        let lock: Option<String> = redis::cmd("GET")
            .arg(format!("bull:mail:mail-{n}:lock"))
            .query(&mut conn)
            .unwrap();
        assert_eq!(lock, None, "the lock is released");
    }
    let active: u64 = redis::cmd("LLEN")
        .arg("bull:mail:active")
        .query(&mut conn)
        .unwrap();
    assert_eq!(active, 0);
    // Every job's own "active" and "completed" events, as a single job's.
    let events: Vec<(String, BTreeMap<String, String>)> = redis::cmd("XRANGE")
        .arg("bull:mail:events")
        .arg("-")
        .arg("+")
        .query(&mut conn)
        .unwrap();
    let count = |kind: &str| events.iter().filter(|(_, e)| e["event"] == kind).count();
    assert_eq!((count("active"), count("completed")), (250, 250));
    let drained = events.iter().rposition(|(_, e)| e["event"] == "drained");
    assert!(
        drained.is_some(),
        "the last batch's finish says the queue drained"
    );
}

#[tokio::test]
async fn a_failed_job_of_a_batch_retries_alone_with_its_own_attempts() {
    let (_redis, url, mut conn) = private_redis();
    let _queue = queue(&url, "mail", 10, 2).await;
    let seen = Seen::default();
    let worker = Worker::with_options(
        "mail",
        BatchOptions::unused_processor(),
        options_of(
            &url,
            BatchOptions::new(10, 0, recording(seen.clone(), &["mail-3"])),
        ),
    )
    .await
    .unwrap();
    wait_until(Duration::from_secs(20), "9 completed and 1 failed", || {
        let done = (
            zcard(&mut conn, "bull:mail:completed"),
            zcard(&mut conn, "bull:mail:failed"),
        );
        std::future::ready((done == (9, 1)).then_some(()))
    })
    .await;
    worker.close(5_000).await.unwrap();
    let batches = seen.lock().unwrap().clone();
    let runs_of_3 = batches
        .iter()
        .flatten()
        .filter(|id| *id == "mail-3")
        .count();
    let runs_of_4 = batches
        .iter()
        .flatten()
        .filter(|id| *id == "mail-4")
        .count();
    assert_eq!(
        (runs_of_3, runs_of_4),
        (2, 1),
        "its two attempts, the others once: {batches:?}"
    );
    let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg("bull:mail:mail-3")
        .query(&mut conn)
        .unwrap();
    assert_eq!(fields["failedReason"], "mail-3 bounced");
    assert_eq!(fields["atm"], "2");
}

/// A worker of `batch` on queue `mail`, `concurrency` batches at once.
async fn batch_worker(url: &str, concurrency: usize, batch: BatchOptions) -> Worker {
    let options = WorkerOptions {
        concurrency,
        ..options_of(url, batch)
    };
    Worker::with_options("mail", BatchOptions::unused_processor(), options)
        .await
        .unwrap()
}

/// A worker of batches of 100, one at a time, on queue `mail`, completing every job;
/// `more` gives the options not set here.
async fn one_batch_at_a_time(url: &str, more: WorkerOptions) -> Worker {
    let options = WorkerOptions {
        concurrency: 1,
        ..options_of(
            url,
            BatchOptions::new(100, 0, recording(Seen::default(), &[])),
        )
    };
    let options = WorkerOptions {
        metrics: more.metrics,
        ..options
    };
    Worker::with_options("mail", BatchOptions::unused_processor(), options)
        .await
        .unwrap()
}

/// Every command Redis ran (those scripts ran included), per `INFO commandstats`.
fn commands_run(conn: &mut redis::Connection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.split(',').find_map(|p| p.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// Jobs that set their own retention are completed by the batch's script too, one call
/// per retention: the cost per job holds.
#[tokio::test]
async fn jobs_with_a_retention_of_their_own_are_completed_by_the_batch() {
    const JOBS: u64 = 200;
    let (_redis, url, mut conn) = private_redis();
    let options = QueueOptions::new().connection(RedisConnectionOptions::new().url(&url));
    let queue = bullmq::Queue::with_options("mail", options).await.unwrap();
    let bulk = (0..JOBS)
        .map(|n| {
            // Half keep every job, half none: two retentions in every batch. Ids of
            // their own, which say which job is which.
            let keep = bullmq::types::RemoveOnFinish::Bool(n % 2 == 1);
            BulkJob::new("email", serde_json::json!({ "n": n })).options(
                bullmq::JobOptions::new()
                    .job_id(format!("mail-{n}"))
                    .remove_on_complete(keep),
            )
        })
        .collect();
    queue.add_bulk(bulk).await.unwrap();
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(&mut conn)
        .unwrap();
    let worker = one_batch_at_a_time(&url, WorkerOptions::default()).await;
    wait_until(Duration::from_secs(20), "every job finished", || {
        let active: u64 = redis::cmd("LLEN")
            .arg("bull:mail:active")
            .query(&mut conn)
            .unwrap();
        let wait: u64 = redis::cmd("LLEN")
            .arg("bull:mail:wait")
            .query(&mut conn)
            .unwrap();
        let done = zcard(&mut conn, "bull:mail:completed");
        std::future::ready((active == 0 && wait == 0 && done == JOBS / 2).then_some(()))
    })
    .await;
    worker.close(5_000).await.unwrap();
    let counted = commands_run(&mut conn);
    // moveToFinished would run one EVALSHA a job: the batch's script runs a few.
    let scripts = counted.get("evalsha").copied().unwrap_or(0);
    assert!(
        scripts < JOBS / 10,
        "{scripts} scripts for {JOBS} jobs: {counted:?}"
    );
    // `RemoveOnFinish::Bool(true)` removes the job, `false` keeps it.
    let mut wrong = Vec::new();
    for n in 0..JOBS {
        let exists: u64 = redis::cmd("EXISTS")
            .arg(format!("bull:mail:mail-{n}"))
            .query(&mut conn)
            .unwrap();
        if (exists == 1) != (n % 2 == 0) {
            wrong.push(n);
        }
    }
    assert!(
        wrong.is_empty(),
        "each job's own retention applied, not to {wrong:?}"
    );
}

/// Issue #46's target: a batch of 100 costs Redis at most 8 commands a job (a single
/// job's take and finish cost 24), counted by Redis itself. The test's own polls and
/// the worker's start, idle waits and checks are left out by name.
#[tokio::test]
async fn a_batch_of_100_costs_redis_at_most_8_commands_a_job() {
    const JOBS: u64 = 1_000;
    let (_redis, url, mut conn) = private_redis();
    let _queue = queue(&url, "mail", JOBS as usize, 1).await;
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(&mut conn)
        .unwrap();
    let worker = one_batch_at_a_time(&url, WorkerOptions::default()).await;
    let mut polls = 0;
    wait_until(Duration::from_secs(20), "every job completed", || {
        polls += 1;
        let done = zcard(&mut conn, "bull:mail:completed");
        std::future::ready((done == JOBS).then_some(()))
    })
    .await;
    worker.close(5_000).await.unwrap();
    let mut counted = commands_run(&mut conn);
    *counted.entry("zcard".to_owned()).or_default() -= polls;
    let not_per_job = [
        "info",
        "config|resetstat",
        "client|setname",
        "client|setinfo",
        "bzpopmin",
        "hello",
        "ping",
        "script|load",
    ];
    counted.retain(|name, _| !not_per_job.contains(&name.as_str()));
    let total: u64 = counted.values().sum();
    let per_job = total as f64 / JOBS as f64;
    assert!(per_job <= 8.0, "{per_job:.2} commands a job: {counted:?}");
    // Four a job in the take (HGETALL, HSET, SET, XADD), three in the finish (LREM,
    // HSET, XADD): a count under seven would mean a job's step was skipped.
    assert!(per_job >= 7.0, "{per_job:.2} commands a job: {counted:?}");
}

/// BullMQ's per-minute metrics count a batch's jobs as its per-job finishes would: the
/// first closes the last minute (its point is the jobs before the batch), the batch
/// counts in the new one.
#[tokio::test]
async fn a_batch_counts_in_the_minute_its_jobs_finish() {
    let (_redis, url, mut conn) = private_redis();
    let _queue = queue(&url, "mail", 5, 1).await;
    // Ten jobs counted so far, seven of them when the last minute's point was made.
    let a_minute_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        - 60_000;
    redis::cmd("HSET")
        .arg("bull:mail:metrics:completed")
        .arg(&["count", "10", "prevCount", "7"])
        .arg("prevTS")
        .arg(a_minute_ago)
        .query::<()>(&mut conn)
        .unwrap();
    let metrics = Some(bullmq::MetricsOptions {
        max_data_points: 60,
    });
    let worker = one_batch_at_a_time(
        &url,
        WorkerOptions {
            metrics,
            ..Default::default()
        },
    )
    .await;
    wait_until(Duration::from_secs(20), "5 jobs completed", || {
        let done = zcard(&mut conn, "bull:mail:completed");
        std::future::ready((done == 5).then_some(()))
    })
    .await;
    worker.close(5_000).await.unwrap();
    let points: Vec<i64> = redis::cmd("LRANGE")
        .arg("bull:mail:metrics:completed:data")
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    let meta: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg("bull:mail:metrics:completed")
        .query(&mut conn)
        .unwrap();
    assert_eq!(points, vec![3], "the last minute's point: {meta:?}");
    assert_eq!(
        (meta["count"].as_str(), meta["prevCount"].as_str()),
        ("15", "10")
    );
}

/// A batch that ends takes the next one itself only when it is full: the batch after
/// it still waits up to `wait` to fill, as the first did.
#[tokio::test]
async fn the_batch_after_another_still_waits_to_fill() {
    let (_redis, url, mut conn) = private_redis();
    let queue = queue(&url, "mail", 10, 1).await;
    let add = |prefix: &'static str| {
        let queue = &queue;
        async move {
            let bulk = (0..5)
                .map(|n| {
                    BulkJob::new("email", serde_json::json!({ "n": n }))
                        .options(bullmq::JobOptions::new().job_id(format!("{prefix}-{n}")))
                })
                .collect();
            queue.add_bulk(bulk).await.unwrap();
        }
    };
    // The first batch holds until the test lets it go.
    let seen = Seen::default();
    let (release, released) = tokio::sync::watch::channel(false);
    let recorded = recording(seen.clone(), &[]);
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let starts = started.clone();
    let gated: BatchProcessorFn = Arc::new(move |jobs| {
        let (recorded, mut released) = (recorded.clone(), released.clone());
        starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            let _ = released.wait_for(|go| *go).await;
            recorded(jobs).await
        })
    });
    let worker = batch_worker(&url, 1, BatchOptions::new(10, 5_000, gated)).await;
    wait_until(Duration::from_secs(20), "the first batch running", || {
        let batches = started.load(std::sync::atomic::Ordering::SeqCst);
        std::future::ready((batches == 1).then_some(()))
    })
    .await;
    add("early").await;
    release.send(true).unwrap();
    // The five taken as the next batch's first jobs; five more arrive within its wait.
    wait_until(
        Duration::from_secs(20),
        "the next batch's first 5 taken",
        || {
            let active: u64 = redis::cmd("LLEN")
                .arg("bull:mail:active")
                .query(&mut conn)
                .unwrap();
            let done = zcard(&mut conn, "bull:mail:completed");
            std::future::ready((done == 10 && active == 5).then_some(()))
        },
    )
    .await;
    add("late").await;
    wait_until(Duration::from_secs(20), "20 jobs completed", || {
        let done = zcard(&mut conn, "bull:mail:completed");
        std::future::ready((done == 20).then_some(()))
    })
    .await;
    worker.close(5_000).await.unwrap();
    let batches = seen.lock().unwrap().clone();
    let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![10, 10], "{batches:?}");
}

/// A lower concurrency holds for batches too: a batch that ends gives its slot back
/// rather than take the next one past the new limit.
#[tokio::test]
async fn a_lowered_concurrency_stops_batches_taking_the_next_past_it() {
    let (_redis, url, mut conn) = private_redis();
    let _queue = queue(&url, "mail", 400, 1).await;
    // When each batch started and ended.
    let spans: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::default();
    let recorded = spans.clone();
    let timed: BatchProcessorFn = Arc::new(move |jobs| {
        let recorded = recorded.clone();
        Box::pin(async move {
            let started = Instant::now();
            tokio::time::sleep(Duration::from_millis(20)).await;
            recorded.lock().unwrap().push((started, Instant::now()));
            jobs.iter().map(|_| Ok(serde_json::Value::Null)).collect()
        })
    });
    let worker = batch_worker(&url, 2, BatchOptions::new(10, 0, timed)).await;
    wait_until(Duration::from_secs(20), "two batches done", || {
        std::future::ready((spans.lock().unwrap().len() >= 2).then_some(()))
    })
    .await;
    worker.set_concurrency(1);
    // The batches running when it was lowered end within their 20 ms.
    let settled = Instant::now() + Duration::from_millis(200);
    wait_until(Duration::from_secs(30), "400 jobs completed", || {
        let done = zcard(&mut conn, "bull:mail:completed");
        std::future::ready((done == 400).then_some(()))
    })
    .await;
    worker.close(5_000).await.unwrap();
    let mut later: Vec<(Instant, Instant)> = spans
        .lock()
        .unwrap()
        .iter()
        .copied()
        .filter(|(started, _)| *started > settled)
        .collect();
    later.sort();
    assert!(later.len() >= 5, "{} batches after the change", later.len());
    for pair in later.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1,
            "two batches at once after concurrency went to 1"
        );
    }
}
