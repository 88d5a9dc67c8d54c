//! The testing kit as a user's tests use it: `TestApp` on a private prefix of the real
//! Redis (enqueued jobs, one handler run, a drain with retries and delays
//! fast-forwarded, cleanup on drop), and the inline mode without Redis.

use std::sync::Mutex;
use std::time::Duration;

use queue_core::prelude::*;
use queue_core::testing::{inline_jobs, run_handler, DrainOutcome, InlineOutcome, TestApp};
use queue_core::{app::Registrations, AddedJob, Error};
use queue_tests::redis_builder;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Invoice {
    customer: String,
    cents: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Receipt {
    customer: String,
}

#[job_queue("kit-billing")]
enum Billing {
    #[job("invoice", output = String)]
    Invoice(Invoice),
    #[job("receipt")]
    Receipt(Receipt),
}

/// A payment provider that refuses the first charge of each customer.
#[derive(Default)]
struct Payments {
    charged: Mutex<Vec<String>>,
    refused_once: Mutex<Vec<String>>,
}

async fn charge(
    job: Job<Invoice>,
    payments: Dep<Payments>,
    app: Dep<QueueApp>,
) -> Result<String, JobError> {
    if job.data.customer == "broke" {
        return Err(JobError::unrecoverable(std::io::Error::other(
            "card declined",
        )));
    }
    {
        let mut refused = payments.refused_once.lock().unwrap();
        if !refused.contains(&job.data.customer) {
            refused.push(job.data.customer.clone());
            return Err(JobError::retry(std::io::Error::other("provider busy")));
        }
    }
    payments
        .charged
        .lock()
        .unwrap()
        .push(job.data.customer.clone());
    app.add_job(
        Receipt {
            customer: job.data.customer.clone(),
        },
        JobOptions::new(),
    )
    .await
    .map_err(JobError::retry)?;
    Ok(format!("charged {} cents", job.data.cents))
}

async fn send_receipt(_job: Job<Receipt>) -> Result<(), JobError> {
    Ok(())
}

fn billing(builder: queue_core::QueueAppBuilder) -> queue_core::QueueAppBuilder {
    builder
        .registrations(Registrations::None)
        .provide(Payments::default())
        .processor(
            Processor::of::<Billing>()
                .handle(charge)
                .handle(send_receipt),
        )
}

/// What the code under test does: bill a customer tomorrow.
async fn bill_tomorrow(app: &QueueApp, customer: &str) -> queue_core::Result<AddedJob> {
    app.add_job(
        Invoice {
            customer: customer.to_owned(),
            cents: 1250,
        },
        JobOptions::new()
            .job_id(format!("invoice-{customer}"))
            .attempts(3)
            .backoff(Backoff::exponential(Duration::from_secs(60)))
            .delay(Duration::from_secs(24 * 3600)),
    )
    .await
}

#[tokio::test]
async fn a_test_app_tells_what_was_enqueued_and_drains_with_time_fast_forwarded() {
    let kit = TestApp::new(billing(redis_builder())).await.unwrap();
    let prefix = kit.app().prefix().to_owned();
    bill_tomorrow(kit.app(), "ada").await.unwrap();
    bill_tomorrow(kit.app(), "broke").await.unwrap();

    let queued = kit.enqueued::<Invoice>().await.unwrap();
    assert_eq!(queued.len(), 2);
    assert_eq!(
        queued[0].data,
        Invoice {
            customer: "ada".into(),
            cents: 1250
        }
    );
    assert_eq!(queued[0].id, "invoice-ada");
    assert_eq!(queued[0].state, JobState::Delayed);
    assert_eq!(queued[0].delay, Duration::from_secs(24 * 3600));
    assert_eq!(queued[0].options.get_attempts(), Some(3));
    assert!(kit.enqueued::<Receipt>().await.unwrap().is_empty());

    // A day's delay and a minute's backoff, drained at once.
    let started = std::time::Instant::now();
    let drained = kit.drain::<Billing>().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let by_id = |id: &str| drained.iter().find(|d| d.id == id).cloned().unwrap();
    let ada = by_id("invoice-ada");
    assert_eq!(ada.attempts, 2, "{drained:#?}");
    assert_eq!(
        ada.outcome,
        DrainOutcome::Completed(serde_json::json!("charged 1250 cents"))
    );
    let broke = by_id("invoice-broke");
    assert_eq!(
        (broke.attempts, broke.outcome),
        (1, DrainOutcome::Failed("card declined".into()))
    );
    // The receipt the handler added ran in the same drain.
    let receipts: Vec<_> = drained.iter().filter(|d| d.name == "receipt").collect();
    assert_eq!(receipts.len(), 1, "{drained:#?}");
    assert_eq!(
        receipts[0].outcome,
        DrainOutcome::Completed(serde_json::Value::Null)
    );

    // One handler, run with its dependencies, outside Redis.
    let once = kit
        .run(Invoice {
            customer: "lin".into(),
            cents: 5,
        })
        .await;
    assert_eq!(once.unwrap_err().message(), "provider busy");

    drop(kit);
    let mut conn = queue_tests::sync_connection();
    let left: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut *conn)
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn an_inline_app_runs_each_job_when_it_is_added_without_redis() {
    // Nothing listens on port 1: the app never connects.
    let app = billing(QueueApp::builder().redis("redis://127.0.0.1:1"))
        .build_inline()
        .unwrap();
    let added = bill_tomorrow(&app, "ada").await.unwrap();
    // Retried at once (the first charge is refused), then completed; its receipt ran too.
    assert_eq!(added.state, Some(JobState::Completed));
    let jobs = inline_jobs(&app);
    assert_eq!(jobs.len(), 2, "{jobs:#?}");
    let receipt = &jobs[0];
    assert_eq!(
        (receipt.name.as_str(), receipt.queue.as_str()),
        ("receipt", "kit-billing")
    );
    let invoice = &jobs[1];
    assert_eq!(invoice.id, "invoice-ada");
    assert_eq!(invoice.attempts_made, 2);
    assert_eq!(
        invoice.outcome,
        InlineOutcome::Completed {
            value: serde_json::json!("charged 1250 cents")
        }
    );
    assert_eq!(
        invoice.options.get_delay(),
        Some(Duration::from_secs(24 * 3600))
    );

    // The same id again: a duplicate, nothing run.
    let again = bill_tomorrow(&app, "ada").await.unwrap();
    assert!(again.duplicate);
    assert_eq!(again.state, Some(JobState::Completed));
    assert_eq!(inline_jobs(&app).len(), 2);

    // An unrecoverable failure ends it at once; the caller sees the state.
    let broke = bill_tomorrow(&app, "broke").await.unwrap();
    assert_eq!(broke.state, Some(JobState::Failed));
    let last = inline_jobs(&app).pop().unwrap();
    assert_eq!(
        (last.attempts_made, last.outcome),
        (
            1,
            InlineOutcome::Failed {
                reason: "card declined".into()
            }
        )
    );

    // A payload that does not fit its handler fails as in a worker.
    let wrong = app
        .queue::<serde_json::Value>("kit-billing")
        .unwrap()
        .add(
            "invoice",
            serde_json::json!({"customer": 7}),
            JobOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(wrong.state, Some(JobState::Failed));
    match inline_jobs(&app).pop().unwrap().outcome {
        InlineOutcome::Failed { reason } => {
            assert!(reason.contains("payload does not fit"), "{reason}")
        }
        other => panic!("{other:?}"),
    }

    // What needs Redis says so, naming the call.
    let queue = app.queue_of::<Billing>().unwrap();
    let err = queue.get_job("invoice-ada").await.unwrap_err();
    assert!(matches!(err, Error::Inline { .. }), "{err}");
    assert!(err.to_string().contains("runs inline"), "{err}");
    assert!(matches!(
        app.start_workers().await.map(drop),
        Err(Error::Inline { .. })
    ));
}

#[tokio::test]
async fn an_inline_app_still_checks_its_registrations() {
    struct Missing;
    async fn needs(_job: Job<Receipt>, _m: Dep<Missing>) -> Result<(), JobError> {
        Ok(())
    }
    let err = QueueApp::builder()
        .registrations(Registrations::None)
        .processor(Processor::new("kit-other").job("x", needs))
        .build_inline()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("needs Dep<") && err.contains("Missing"),
        "{err}"
    );
}

#[tokio::test]
async fn run_handler_says_when_no_handler_takes_the_job() {
    let app = QueueApp::builder()
        .registrations(Registrations::None)
        .build_inline()
        .unwrap();
    let err = run_handler(
        &app,
        Receipt {
            customer: "x".into(),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.message(),
        "no handler of this app takes job `receipt` on queue `kit-billing`"
    );
}

async fn count(_job: Job<u32>) -> Result<u32, JobError> {
    Ok(1)
}

#[tokio::test]
async fn a_drain_reports_every_job_of_a_large_queue() {
    let kit = TestApp::new(
        redis_builder()
            .registrations(Registrations::None)
            .processor(
                Processor::new("kit-many")
                    .concurrency(20)
                    .job("count", count),
            ),
    )
    .await
    .unwrap();
    let queue = kit.app().queue::<u32>("kit-many").unwrap();
    // More events than the worker-event channel keeps (1,024): three per job.
    let jobs: Vec<_> = (0..600)
        .map(|n| queue_core::queue::BulkJob::new("count", n))
        .collect();
    queue.add_bulk(jobs).await.unwrap();
    let drained = kit.drain_queue("kit-many").await.unwrap();
    assert_eq!(drained.len(), 600);
    assert!(drained
        .iter()
        .all(|d| d.attempts == 1 && d.outcome == DrainOutcome::Completed(serde_json::json!(1))));
}

async fn slow_receipts(_batch: Batch<Receipt>) -> Result<BatchResult, JobError> {
    tokio::time::sleep(Duration::from_secs(30)).await;
    Ok(BatchResult::new())
}

/// A batch handler's job run by the kit is a batch of one under the batch's timeout,
/// as a worker runs it: one timer, the batch's, and its reason.
#[tokio::test]
async fn run_handler_runs_a_batch_handler_under_the_batchs_timeout() {
    let app = QueueApp::builder()
        .registrations(Registrations::None)
        .processor(
            Processor::new("kit-billing")
                .timeout(Duration::from_millis(50))
                .batch(10, Duration::ZERO, slow_receipts),
        )
        .build_inline()
        .unwrap();
    let receipt = Receipt {
        customer: "x".into(),
    };
    let err = run_handler(&app, receipt).await.unwrap_err();
    assert_eq!(err.message(), "the batch timed out after 50ms");
    assert!(err.is_retryable());
}
