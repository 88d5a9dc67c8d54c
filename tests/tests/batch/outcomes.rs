//! What a batch handler says of its jobs: each completes with its own return value,
//! fails alone and retries with its own attempts, or the whole batch fails (an error,
//! a panic, the timeout) as one attempt of each job.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queue_core::metrics::Metrics;
use queue_core::worker::{Batch, BatchResult};
use queue_core::{Dep, JobError, JobOptions, JobState, Processor, WorkerEvent};
use queue_tests::{wait_for_completed, wait_for_state, TestRedis, SOON};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Mail {
    to: String,
}

/// Each call's job ids, in the order the batch gave them.
#[derive(Default)]
struct Calls(Mutex<Vec<Vec<String>>>);

impl Calls {
    fn runs_of(&self, id: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .flatten()
            .filter(|j| *j == id)
            .count()
    }
}

/// Sends each mail; an address without `@` bounces (retryable), `nobody` is refused
/// for good; every sent mail's return value is its receipt.
async fn send(batch: Batch<Mail>, calls: Dep<Calls>) -> Result<BatchResult, JobError> {
    calls
        .0
        .lock()
        .unwrap()
        .push(batch.iter().map(|j| j.id().to_owned()).collect());
    let mut result = BatchResult::new();
    for job in &batch {
        match job.data.to.as_str() {
            "nobody" => result.fail(job, JobError::unrecoverable("no such mailbox")),
            to if !to.contains('@') => result.fail(
                job,
                JobError::retry(format!("bounced on attempt {}", job.attempt())),
            ),
            to => result.complete(job, format!("sent to {to}")),
        };
    }
    Ok(result)
}

fn mail(to: &str) -> Mail {
    Mail { to: to.to_owned() }
}

#[tokio::test]
async fn each_job_of_a_batch_completes_or_fails_as_its_own() {
    let redis = TestRedis::new("batch-outcomes");
    let calls = Arc::new(Calls::default());
    let app = redis
        .app(|b| {
            b.provide_arc(calls.clone())
                .processor(Processor::new("mail").batch(50, Duration::from_millis(200), send))
        })
        .await;
    let q = app.queue::<serde_json::Value>("mail").unwrap();
    let mut events = app.worker_events();
    for n in 0..20 {
        let to = format!("user{n}@example.com");
        q.add(
            "send",
            serde_json::json!(mail(&to)),
            JobOptions::new().job_id(format!("mail-{n}")),
        )
        .await
        .unwrap();
    }
    q.add(
        "send",
        serde_json::json!(mail("nobody")),
        JobOptions::new().job_id("nobody").attempts(3),
    )
    .await
    .unwrap();
    q.add(
        "send",
        serde_json::json!(mail("typo")),
        JobOptions::new().job_id("typo").attempts(2),
    )
    .await
    .unwrap();
    // Not a `Mail`: fails alone, at once, and the batch runs without it.
    q.add(
        "send",
        serde_json::json!({ "to": 42 }),
        JobOptions::new().job_id("misfit").attempts(3),
    )
    .await
    .unwrap();
    let workers = app.start_workers().await.unwrap();

    wait_for_completed(&q, 20, SOON).await;
    for id in ["nobody", "typo", "misfit"] {
        wait_for_state(&q, id, JobState::Failed, SOON).await;
    }
    workers.shutdown(SOON).await;

    let first = calls.0.lock().unwrap()[0].clone();
    assert_eq!(
        first.len(),
        22,
        "one batch of every job that fits: {first:?}"
    );
    let receipt = q.get_job("mail-7").await.unwrap().unwrap();
    assert_eq!(
        receipt.return_value,
        Some(serde_json::json!("sent to user7@example.com"))
    );
    assert_eq!(receipt.attempts_made, 1);

    let nobody = q.get_job("nobody").await.unwrap().unwrap();
    assert_eq!(nobody.failed_reason.as_deref(), Some("no such mailbox"));
    assert_eq!(
        (nobody.attempts_made, calls.runs_of("nobody")),
        (1, 1),
        "unrecoverable: no retry"
    );
    let typo = q.get_job("typo").await.unwrap().unwrap();
    assert_eq!(typo.failed_reason.as_deref(), Some("bounced on attempt 2"));
    assert_eq!(
        (typo.attempts_made, calls.runs_of("typo")),
        (2, 2),
        "its own two attempts"
    );
    assert_eq!(
        calls.runs_of("mail-7"),
        1,
        "a completed job is not run again"
    );
    let misfit = q.get_job("misfit").await.unwrap().unwrap();
    assert!(
        misfit
            .failed_reason
            .as_deref()
            .unwrap_or_default()
            .contains("payload does not fit"),
        "{misfit:?}"
    );
    assert_eq!((misfit.attempts_made, calls.runs_of("misfit")), (1, 0));

    // Every job's own worker events.
    let mut completed = 0;
    for event in received(&mut events).await {
        if matches!(event, WorkerEvent::Completed { .. }) {
            completed += 1;
        }
    }
    assert_eq!(completed, 20);
}

/// Fails the first attempt of every batch as a whole, as `how` says.
async fn whole_batch(batch: Batch<Mail>, calls: Dep<Calls>) -> Result<BatchResult, JobError> {
    calls
        .0
        .lock()
        .unwrap()
        .push(batch.iter().map(|j| j.id().to_owned()).collect());
    let first = batch.iter().all(|job| job.attempt() == 1);
    match batch.jobs()[0].data.to.as_str() {
        "error" if first => Err(JobError::retry(
            anyhow::anyhow!("connection refused").context("the provider is down"),
        )),
        "panic" if first => panic!("the provider's client panicked"),
        "slow" if first => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(BatchResult::new())
        }
        _ => Ok(BatchResult::new()),
    }
}

#[tokio::test]
async fn an_error_a_panic_or_the_timeout_fails_each_job_of_the_batch_once() {
    for (how, reason) in [
        ("error", "the provider is down: connection refused"),
        (
            "panic",
            "batch handler panicked: the provider's client panicked",
        ),
        ("slow", "the batch timed out after 300ms"),
    ] {
        let redis = TestRedis::new("batch-whole");
        let calls = Arc::new(Calls::default());
        let app = redis
            .app(|b| {
                b.provide_arc(calls.clone())
                    .metrics(Metrics::new())
                    .processor(
                        Processor::new("mail")
                            .timeout(Duration::from_millis(300))
                            .batch(10, Duration::from_millis(100), whole_batch),
                    )
            })
            .await;
        let q = app.queue::<Mail>("mail").unwrap();
        let mut events = app.worker_events();
        for n in 0..3 {
            let options = JobOptions::new().job_id(format!("{how}-{n}")).attempts(2);
            q.add("send", mail(how), options).await.unwrap();
        }
        let workers = app.start_workers().await.unwrap();
        wait_for_completed(&q, 3, SOON).await;
        workers.shutdown(SOON).await;

        for n in 0..3 {
            let id = format!("{how}-{n}");
            assert_eq!(
                calls.runs_of(&id),
                2,
                "{how}: one failed attempt, then done"
            );
            let job = q.get_job(&id).await.unwrap().unwrap();
            assert_eq!(job.attempts_made, 2, "{how}: {job:?}");
            // The error's chain, or where the panic was, as a single job's record says.
            if how == "error" {
                let stack = job.stacktrace.first().map(String::as_str).unwrap_or("");
                assert!(
                    stack.contains("Caused by:") && stack.contains("0: connection refused"),
                    "{stack:?}"
                );
            }
            if how == "panic" {
                let stack = job.stacktrace.first().map(String::as_str).unwrap_or("");
                assert!(
                    stack.starts_with("batch handler panicked at ")
                        && stack.contains("outcomes.rs")
                        && stack.ends_with("the provider's client panicked"),
                    "{stack:?}"
                );
            }
        }
        // Each job's attempt counts as timed out, as a single job's at its timeout.
        let metrics = app.metrics().unwrap().render(&app).await.unwrap();
        // (Named `*`: a batch handler of a string queue takes every name.)
        let timed_out: f64 = metrics
            .lines()
            .filter(|line| line.starts_with("queue_jobs_timed_out_total{queue=\"mail\""))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        let expected = if how == "slow" { 3.0 } else { 0.0 };
        assert_eq!(timed_out, expected, "{how}: {metrics}");
        let mut failed_reasons = Vec::new();
        for event in received(&mut events).await {
            if let WorkerEvent::Failed {
                reason, is_final, ..
            } = event
            {
                assert!(!is_final, "{how}: retried");
                failed_reasons.push(reason);
            }
        }
        assert_eq!(failed_reasons, vec![reason.to_owned(); 3], "{how}");
    }
}

/// The worker events received so far (those already sent: each wait is short).
async fn received(events: &mut queue_core::events::WorkerEvents) -> Vec<WorkerEvent> {
    let mut all = Vec::new();
    while let Ok(Some(event)) =
        tokio::time::timeout(Duration::from_millis(200), events.recv()).await
    {
        all.push(event);
    }
    all
}
