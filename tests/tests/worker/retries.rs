//! Retries: the real exponential schedule, unrecoverable errors, custom strategies, and
//! the worker events that tell a last failure from a retried one.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_core::{Backoff, Job, JobError, JobOptions, JobState, Processor, WorkerEvent};
use queue_tests::{wait_for_state, TestRedis, SOON};

/// When each attempt of each job started.
#[derive(Default)]
struct Attempts(Mutex<Vec<(String, Instant)>>);

impl Attempts {
    fn record(&self, id: &str) {
        self.0.lock().unwrap().push((id.to_owned(), Instant::now()));
    }

    fn gaps(&self, id: &str) -> Vec<Duration> {
        let starts: Vec<Instant> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(j, _)| j == id)
            .map(|(_, t)| *t)
            .collect();
        starts.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn count(&self, id: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(j, _)| j == id)
            .count()
    }
}

async fn always_fails(
    job: Job<String>,
    attempts: queue_core::Dep<Attempts>,
) -> Result<(), JobError> {
    attempts.record(job.id());
    match job.data.as_str() {
        "fatal" => Err(JobError::unrecoverable(std::io::Error::other(
            "card declined",
        ))),
        "flaky" if job.attempt() == 3 => Ok(()),
        _ => Err(JobError::retry(std::io::Error::other(format!(
            "smtp down (attempt {})",
            job.attempt()
        )))),
    }
}

fn app_with_attempts(redis: &TestRedis, attempts: &Arc<Attempts>) -> queue_core::QueueAppBuilder {
    redis
        .builder()
        .provide_arc(attempts.clone())
        .processor(Processor::new("mail").concurrency(4).any_job(always_fails))
}

#[tokio::test]
async fn exponential_backoff_waits_base_then_doubles() {
    let redis = TestRedis::new("expo");
    let attempts = Arc::new(Attempts::default());
    let app = app_with_attempts(&redis, &attempts).build().await.unwrap();
    let q = app.queue::<String>("mail").unwrap();
    let mut events = app.worker_events();
    let workers = app.start_workers().await.unwrap();

    let base = Duration::from_millis(200);
    q.add(
        "send",
        "always".into(),
        JobOptions::new()
            .job_id("expo-1")
            .attempts(4)
            .backoff(Backoff::exponential(base)),
    )
    .await
    .unwrap();
    wait_for_state(&q, "expo-1", JobState::Failed, SOON).await;

    let gaps = attempts.gaps("expo-1");
    assert_eq!(gaps.len(), 3, "{gaps:?}");
    for (gap, factor) in gaps.iter().zip([1, 2, 4]) {
        let expected = base * factor;
        assert!(*gap >= expected, "gap {gap:?} shorter than {expected:?}");
        assert!(
            *gap < expected + Duration::from_secs(2),
            "gap {gap:?} far beyond {expected:?}"
        );
    }
    let info = q.get_job("expo-1").await.unwrap().unwrap();
    assert_eq!(info.attempts_made, 4);
    assert_eq!(info.failed_reason.as_deref(), Some("smtp down (attempt 4)"));

    // Local events: three retried failures, then a final one.
    let mut finals = Vec::new();
    while finals.len() < 4 {
        if let Some(WorkerEvent::Failed {
            is_final,
            attempt,
            max_attempts,
            name,
            ..
        }) = events.recv().await
        {
            assert_eq!((name.as_str(), max_attempts), ("send", 4));
            finals.push((attempt, is_final));
        }
    }
    assert_eq!(finals, [(1, false), (2, false), (3, false), (4, true)]);
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn unrecoverable_errors_skip_retries_and_flaky_jobs_recover() {
    let redis = TestRedis::new("unrecoverable");
    let attempts = Arc::new(Attempts::default());
    let app = app_with_attempts(&redis, &attempts).build().await.unwrap();
    let q = app.queue::<String>("mail").unwrap();
    let workers = app.start_workers().await.unwrap();
    let opts = |id: &str| {
        JobOptions::new()
            .job_id(id)
            .attempts(5)
            .backoff(Backoff::fixed(Duration::from_millis(50)))
    };

    q.add("send", "fatal".into(), opts("fatal-1"))
        .await
        .unwrap();
    q.add("send", "flaky".into(), opts("flaky-1"))
        .await
        .unwrap();
    wait_for_state(&q, "fatal-1", JobState::Failed, SOON).await;
    wait_for_state(&q, "flaky-1", JobState::Completed, SOON).await;

    let fatal = q.get_job("fatal-1").await.unwrap().unwrap();
    assert_eq!(fatal.failed_reason.as_deref(), Some("card declined"));
    assert_eq!(fatal.attempts_made, 1);
    assert_eq!(attempts.count("fatal-1"), 1);
    assert_eq!(
        q.get_job("flaky-1").await.unwrap().unwrap().attempts_made,
        3
    );
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn custom_backoff_strategies_decide_the_wait_or_stop_retrying() {
    let redis = TestRedis::new("custom-backoff");
    let attempts = Arc::new(Attempts::default());
    let app = app_with_attempts(&redis, &attempts)
        .backoff_strategy("linear", |ctx| {
            Some(Duration::from_millis(150) * ctx.attempt)
        })
        .backoff_strategy("give-up", |ctx| {
            assert!(
                ctx.reason.starts_with("smtp down"),
                "the strategy sees the failure"
            );
            None
        })
        .build()
        .await
        .unwrap();
    let q = app.queue::<String>("mail").unwrap();
    let workers = app.start_workers().await.unwrap();

    q.add(
        "send",
        "x".into(),
        JobOptions::new()
            .job_id("linear-1")
            .attempts(3)
            .backoff(Backoff::custom("linear")),
    )
    .await
    .unwrap();
    q.add(
        "send",
        "x".into(),
        JobOptions::new()
            .job_id("giveup-1")
            .attempts(5)
            .backoff(Backoff::custom("give-up")),
    )
    .await
    .unwrap();
    wait_for_state(&q, "linear-1", JobState::Failed, SOON).await;
    wait_for_state(&q, "giveup-1", JobState::Failed, SOON).await;

    let gaps = attempts.gaps("linear-1");
    assert_eq!(gaps.len(), 2);
    assert!(
        gaps[0] >= Duration::from_millis(150) && gaps[1] >= Duration::from_millis(300),
        "{gaps:?}"
    );
    assert_eq!(attempts.count("giveup-1"), 1, "None stops the retries");
    workers.shutdown(SOON).await;
}
