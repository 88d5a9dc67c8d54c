//! A long run with default options stays bounded: Redis holds the same keys and bytes
//! for the queue after 16,000 jobs as after 4,000 (default retention keeps the last
//! 1,000 completed jobs), and the worker's resident memory does not grow with the
//! number of jobs. Alone in its test binary, so the process's RSS is this test's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queue_core::{queue::BulkJob, Dep, Job, JobError, JobOptions, Processor, Queue, Retention};
use queue_tests::{wait_until, TestRedis};

const ROUND: u64 = 2_000;
const ROUNDS: u64 = 8;
/// After this many rounds retention has reached its limit: the baseline.
const WARM_ROUNDS: u64 = 2;

struct Done(AtomicU64);

async fn work(job: Job<serde_json::Value>, done: Dep<Done>) -> Result<u64, JobError> {
    done.0.fetch_add(1, Ordering::SeqCst);
    Ok(job.data["n"].as_u64().unwrap_or_default())
}

/// Keys under the prefix that do not expire, and the bytes Redis says they use. A key
/// with a time to live (the stalled-job check's marker, a process's record in the
/// registry) comes and goes with the clock, not with the jobs, and bounds itself: which
/// of them happen to exist at the moment of a count is no growth.
fn footprint(redis: &TestRedis) -> (usize, u64) {
    let mut conn = redis::Client::open(queue_tests::redis_url())
        .and_then(|c| c.get_connection())
        .expect("the test Redis answers");
    let keys: Vec<String> = redis
        .keys()
        .into_iter()
        .filter(|key| {
            redis::cmd("PTTL")
                .arg(key)
                .query::<i64>(&mut conn)
                .is_ok_and(|ttl| ttl == -1)
        })
        .collect();
    let bytes = keys
        .iter()
        .map(|key| {
            redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .query::<Option<u64>>(&mut conn)
                .ok()
                .flatten()
                .unwrap_or(0)
        })
        .sum();
    (keys.len(), bytes)
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

async fn run_round(q: &Queue<serde_json::Value>, done: &Done, round: u64) {
    for batch in 0..(ROUND / 500) {
        let jobs = (0..500)
            .map(|i| {
                let n = round * ROUND + batch * 500 + i;
                // A per-job timeout also exercises the options each job carries.
                BulkJob::new(
                    "work",
                    serde_json::json!({ "n": n, "pad": "x".repeat(200) }),
                )
                .options(JobOptions::new().timeout(Duration::from_secs(30)))
            })
            .collect();
        q.add_bulk(jobs).await.unwrap();
    }
    let target = (round + 1) * ROUND;
    wait_until(
        Duration::from_secs(60),
        "the round to be processed",
        || async {
            let counts = q.get_job_counts().await.ok()?;
            (done.0.load(Ordering::SeqCst) >= target && counts.unfinished() == 0).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_memory_and_worker_rss_stay_flat_over_a_long_run_with_default_options() {
    let redis = TestRedis::new("memory");
    let done = Arc::new(Done(AtomicU64::new(0)));
    let app = redis
        .app(|b| {
            b.provide_arc(done.clone())
                .processor(Processor::new("mem").concurrency(20).any_job(work))
        })
        .await;
    let q = app.queue::<serde_json::Value>("mem").unwrap();
    let workers = app.start_workers().await.unwrap();

    let mut baseline = None;
    for round in 0..ROUNDS {
        run_round(&q, &done, round).await;
        if round + 1 == WARM_ROUNDS {
            baseline = Some((footprint(&redis), rss_bytes()));
        }
    }
    let ((keys_then, bytes_then), rss_then) = baseline.unwrap();
    let ((keys_now, bytes_now), rss_now) = (footprint(&redis), rss_bytes());
    println!(
        "after {} jobs: {keys_then} keys, {bytes_then} B in Redis, RSS {} KiB; \
         after {} jobs: {keys_now} keys, {bytes_now} B, RSS {} KiB",
        WARM_ROUNDS * ROUND,
        rss_then / 1024,
        ROUNDS * ROUND,
        rss_now / 1024
    );

    let counts = q.get_job_counts().await.unwrap();
    let Retention::Last(kept) = Retention::DEFAULT_COMPLETED else {
        unreachable!("the default keeps a count")
    };
    assert_eq!(counts.completed, kept as u64, "default retention holds");
    // Job hashes and their logs: the same number after 4x the jobs. The events stream
    // is trimmed approximately, hence a little slack in bytes.
    assert!(keys_now <= keys_then, "{keys_then} keys, then {keys_now}");
    assert!(
        bytes_now <= bytes_then + bytes_then / 10,
        "Redis bytes grew from {bytes_then} to {bytes_now}"
    );
    // 12,000 more jobs: a leak of even 1 KiB a job would add 12 MiB.
    assert!(
        rss_now <= rss_then + 6 * 1024 * 1024,
        "RSS grew from {} KiB to {} KiB",
        rss_then / 1024,
        rss_now / 1024
    );
    assert!(workers.shutdown(Duration::from_secs(10)).await.is_clean());
}
