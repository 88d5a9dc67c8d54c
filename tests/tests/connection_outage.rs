//! Redis dies under load and comes back with its data (issue 27, item 12). A job whose
//! completion was lost with the connection is still this worker's: its lock outlived
//! the outage. The worker sends the completion again with the job's lock token once
//! Redis answers, so every job is finished within seconds of Redis's return, instead of
//! sitting `active` until stalled-job recovery (a minute with BullMQ's defaults) and
//! running a second time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_core::{
    app::Registrations, Job, JobError, JobOptions, JobState, Processor, Queue, QueueApp, Retention,
};
use queue_tests::{wait_until, PrivateRedis};

const RUNS: u64 = 20;
const JOBS_PER_RUN: u64 = 24;
/// What "within seconds of Redis returning" means here. Stalled-job recovery, the
/// fallback for a worker that really died, takes 30 to 60 s (BullMQ's defaults).
const FINISHED_WITHIN: Duration = Duration::from_secs(5);

/// How many times each job's handler ran (each mail sent), by job id.
static SENT: Mutex<BTreeMap<String, u32>> = Mutex::new(BTreeMap::new());
/// Handlers that returned, all runs together.
static RETURNED: AtomicU64 = AtomicU64::new(0);
/// Handlers running now.
static RUNNING: AtomicU64 = AtomicU64::new(0);

async fn send_mail(job: Job<u64>) -> Result<(), JobError> {
    *SENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(job.id().to_owned())
        .or_default() += 1;
    RUNNING.fetch_add(1, Ordering::SeqCst);
    // The call to the mail service.
    tokio::time::sleep(Duration::from_millis(60)).await;
    RUNNING.fetch_sub(1, Ordering::SeqCst);
    RETURNED.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

fn sent_in_run(run: u64) -> usize {
    let prefix = format!("r{run}-");
    SENT.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .keys()
        .filter(|id| id.starts_with(&prefix))
        .count()
}

/// Sign-ups arriving every few milliseconds; an add that fails (Redis is down) is sent
/// again with the same id, which is safe: a second arrival is a duplicate.
async fn sign_ups(queue: Queue<u64>, run: u64) {
    for n in 0..JOBS_PER_RUN {
        let options = JobOptions::new()
            .job_id(format!("r{run}-mail-{n}"))
            .remove_on_complete(Retention::All);
        while queue.add("welcome", n, options.clone()).await.is_err() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn admin(redis: &PrivateRedis) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{}", redis.port()))
        .and_then(|c| c.get_connection())
        .expect("an admin connection")
}

/// Twenty outages, each with sign-ups in flight. Odd runs first hold every write
/// (`CLIENT PAUSE WRITE`, a Redis that stops answering before it dies) until handlers
/// have returned, so completions are surely in flight when Redis is killed; even runs
/// kill it wherever the load happens to be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_finishes_within_seconds_of_redis_returning_in_twenty_outages() {
    // What the worker did about the answers it lost, read from its logs (the engine
    // logs from its own threads too: the subscriber is global).
    let (resent, resumed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (resent_log, resumed_log) = (resent.clone(), resumed.clone());
    tracing::subscriber::set_global_default(queue_tests::logs::recorder(move |event| {
        if event.fields.contains("reached Redis again") {
            resent_log.fetch_add(1, Ordering::Relaxed);
        }
        if event.fields.contains("whose answer was lost had") {
            resumed_log.fetch_add(1, Ordering::Relaxed);
        }
    }))
    .expect("the only subscriber of this test binary");
    let mut redis = PrivateRedis::start_persistent();
    let app = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .registrations(Registrations::None)
        .processor(
            Processor::new("mail")
                .concurrency(8)
                .job("welcome", send_mail),
        )
        .build()
        .await
        .expect("the app connects");
    let queue = app.queue::<u64>("mail").unwrap();
    let workers = app.start_workers().await.unwrap();
    let started = Instant::now();
    let mut slowest = Duration::ZERO;

    for run in 0..RUNS {
        let producing = tokio::spawn(sign_ups(queue.clone(), run));
        wait_until(Duration::from_secs(20), "handlers to be running", || {
            std::future::ready((sent_in_run(run) >= 4).then_some(()))
        })
        .await;
        if run % 2 == 1 {
            wait_until(Duration::from_secs(20), "handlers to be running", || {
                std::future::ready((RUNNING.load(Ordering::SeqCst) >= 2).then_some(()))
            })
            .await;
            redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(10_000)
                .arg("WRITE")
                .query::<()>(&mut admin(&redis))
                .unwrap();
            let returned = RETURNED.load(Ordering::SeqCst);
            wait_until(
                Duration::from_secs(5),
                "handlers to return while paused",
                || std::future::ready((RETURNED.load(Ordering::SeqCst) > returned).then_some(())),
            )
            .await;
        }
        redis.restart();
        let back = Instant::now();

        producing.await.expect("the sign-ups are all sent");
        let expected = (run + 1) * JOBS_PER_RUN;
        loop {
            let counts = queue.get_job_counts().await;
            if counts.as_ref().is_ok_and(|c| c.completed == expected) {
                break;
            }
            if back.elapsed() > FINISHED_WITHIN {
                let sent = SENT
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                let stuck: Vec<String> = queue
                    .get_jobs(&[JobState::Active, JobState::Waiting], 0..100)
                    .await
                    .unwrap_or_default()
                    .into_iter()
                    .map(|job| {
                        format!(
                            "{} (started {} times, its handler ran {} times)",
                            job.id,
                            job.attempts_started,
                            sent.get(&job.id).copied().unwrap_or(0)
                        )
                    })
                    .collect();
                panic!(
                    "run {run}: not every job completed {FINISHED_WITHIN:?} after Redis \
                     returned: {counts:?}; active or waiting: {stuck:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        slowest = slowest.max(back.elapsed());
    }
    let counts = queue.get_job_counts().await.unwrap();
    assert_eq!(counts.unfinished(), 0, "{counts:?}");
    assert_eq!(counts.failed, 0, "{counts:?}");
    let sent = SENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert_eq!(sent.len() as u64, RUNS * JOBS_PER_RUN);
    let twice: Vec<_> = sent.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "every mail sent once: {twice:?}");
    let (resent, resumed) = (
        resent.load(Ordering::Relaxed),
        resumed.load(Ordering::Relaxed),
    );
    println!(
        "{RUNS} outages in {:.1?}; the slowest run finished {slowest:?} after Redis returned; \
         finishing commands sent again: {resent}; jobs of unanswered fetches resumed: {resumed}",
        started.elapsed()
    );
    assert!(
        resent > 0,
        "completions were in flight when Redis died (the paused runs), and sent again"
    );
    assert!(workers.shutdown(Duration::from_secs(10)).await.is_clean());
}
