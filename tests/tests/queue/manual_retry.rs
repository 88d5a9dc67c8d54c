//! A failed job retried by hand (one, or every failed job of the queue) starts a new
//! round of its attempts, counted from zero: it never reads `attemptsMade 6 /
//! maxAttempts 5`.

use std::sync::atomic::{AtomicU32, Ordering};

use queue_core::{Job, JobError, JobOptions, JobState, Processor};
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};

static CALLS: AtomicU32 = AtomicU32::new(0);

async fn always_fails(job: Job<String>) -> Result<(), JobError> {
    CALLS.fetch_add(1, Ordering::SeqCst);
    Err(JobError::retry(std::io::Error::other(format!(
        "{} is down",
        job.data
    ))))
}

#[tokio::test]
async fn a_job_retried_by_hand_gets_a_new_round_of_attempts_counted_from_zero() {
    let redis = TestRedis::new("manual-retry");
    let app = redis
        .app(|b| b.processor(Processor::new("retry-by-hand").any_job(always_fails)))
        .await;
    let q = app.queue::<String>("retry-by-hand").unwrap();
    let workers = app.start_workers().await.unwrap();
    let twice = || JobOptions::new().attempts(2);
    q.add("ping", "smtp".into(), twice().job_id("one"))
        .await
        .unwrap();
    q.add("ping", "dns".into(), twice().job_id("two"))
        .await
        .unwrap();
    for id in ["one", "two"] {
        wait_for_state(&q, id, JobState::Failed, SOON).await;
    }
    let counts = |id: &'static str| {
        let q = q.clone();
        async move {
            let job = q.get_job(id).await.unwrap().unwrap();
            (job.attempts_made, job.attempts_started, job.max_attempts)
        }
    };
    assert_eq!(counts("one").await, (2, 2, 2));

    // One job by hand, then every failed job.
    q.retry("one").await.unwrap();
    wait_until(SOON, "job one's second round to fail", || async {
        (CALLS.load(Ordering::SeqCst) == 6
            && q.get_job_state("one").await.unwrap() == Some(JobState::Failed))
        .then_some(())
    })
    .await;
    assert_eq!(counts("one").await, (2, 2, 2), "this round's attempts");
    q.retry_failed().await.unwrap();
    wait_until(SOON, "both jobs' next round to fail", || async {
        (CALLS.load(Ordering::SeqCst) == 10 && q.get_job_counts().await.unwrap().failed == 2)
            .then_some(())
    })
    .await;
    assert_eq!(counts("one").await, (2, 2, 2));
    assert_eq!(counts("two").await, (2, 2, 2));
    workers.shutdown(SOON).await;
    assert_eq!(
        CALLS.load(Ordering::SeqCst),
        10,
        "two full rounds after the first"
    );
}
