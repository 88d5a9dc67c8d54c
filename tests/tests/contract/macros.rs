//! Processors, producers and listeners registered only by their attributes, running
//! real jobs on Redis. Each test keeps to its own queues with `Registrations::Queues`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use queue_core::prelude::*;
use queue_core::{
    app::Registrations, inject_queue, on_queue_event, on_worker_event, processor, QueueEvent,
};
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Welcome {
    to: String,
}

#[derive(Default)]
struct Outbox {
    sent: Mutex<Vec<String>>,
}

#[processor("macro-email", concurrency = 2, job = "welcome", timeout = "5s")]
async fn send_welcome(job: Job<Welcome>, outbox: Dep<Outbox>) -> Result<String, JobError> {
    if job.data.to == "bounce" {
        return Err(JobError::unrecoverable(std::io::Error::other(
            "mailbox does not exist",
        )));
    }
    outbox.sent.lock().unwrap().push(job.data.to.clone());
    Ok(format!("sent to {}", job.data.to))
}

#[inject_queue]
struct SignupService {
    #[queue("macro-email")]
    email: Queue<Welcome>,
}

static FAILED: Mutex<Vec<String>> = Mutex::new(Vec::new());
static COMPLETED_IN_STREAM: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[on_worker_event("macro-email", failed)]
async fn alert_on_failure(event: WorkerEvent) {
    if let WorkerEvent::Failed {
        job_id,
        reason,
        is_final,
        ..
    } = event
    {
        FAILED
            .lock()
            .unwrap()
            .push(format!("{job_id}: {reason} (final: {is_final})"));
    }
}

#[on_queue_event("macro-email", completed)]
async fn audit_completion(event: QueueEvent) {
    COMPLETED_IN_STREAM
        .lock()
        .unwrap()
        .push(event.job_id().unwrap_or_default().to_owned());
}

fn email_queues() -> Registrations {
    Registrations::Queues(vec!["macro-email".into()])
}

#[tokio::test]
async fn attribute_registered_processor_producer_and_listeners_work_together() {
    let redis = TestRedis::new("macros");
    let app = redis
        .app(|b| b.registrations(email_queues()).provide(Outbox::default()))
        .await;
    assert_eq!(app.processor_queues(), ["macro-email"]);
    let workers = app.start_workers().await.unwrap();

    let signup = SignupService::from_app(&app).unwrap();
    signup
        .email
        .add(
            "welcome",
            Welcome { to: "ada".into() },
            JobOptions::new().job_id("welcome-ada"),
        )
        .await
        .unwrap();
    signup
        .email
        .add(
            "welcome",
            Welcome {
                to: "bounce".into(),
            },
            JobOptions::new().job_id("welcome-bounce"),
        )
        .await
        .unwrap();
    wait_for_state(&signup.email, "welcome-ada", JobState::Completed, SOON).await;
    wait_for_state(&signup.email, "welcome-bounce", JobState::Failed, SOON).await;
    let done = signup.email.get_job("welcome-ada").await.unwrap().unwrap();
    assert_eq!(done.return_value, Some(serde_json::json!("sent to ada")));

    wait_until(SOON, "the failure listener", || async {
        FAILED.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(
        *FAILED.lock().unwrap(),
        ["welcome-bounce: mailbox does not exist (final: true)"]
    );
    wait_until(SOON, "the completion listener", || async {
        COMPLETED_IN_STREAM
            .lock()
            .unwrap()
            .contains(&"welcome-ada".to_owned())
            .then_some(())
    })
    .await;
    workers.shutdown(SOON).await;
}

#[derive(Debug, Serialize, Deserialize)]
struct Open {
    account: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct Close {
    account: u32,
    reason: String,
}

/// Built from `Default`: nobody provides it.
#[derive(Default)]
struct Accounts {
    opened: AtomicUsize,
}

struct Audit(Mutex<Vec<String>>);

#[processor("macro-accounts", concurrency = 3)]
impl Accounts {
    #[job("open")]
    async fn open(&self, job: Job<Open>, audit: Dep<Audit>) -> Result<u32, JobError> {
        self.opened.fetch_add(1, Ordering::SeqCst);
        audit
            .0
            .lock()
            .unwrap()
            .push(format!("open {}", job.data.account));
        Ok(job.data.account)
    }

    #[job("close")]
    async fn close(&self, job: Job<Close>) -> Result<(), JobError> {
        job.log(format!("closing {}: {}", job.data.account, job.data.reason))
            .await?;
        Ok(())
    }

    /// Not a job: left alone.
    #[allow(dead_code)]
    fn helper(&self) -> usize {
        self.opened.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn an_impl_processor_handles_each_job_name_with_its_own_payload() {
    let redis = TestRedis::new("macro-impl");
    let app = redis
        .app(|b| {
            b.registrations(Registrations::Queues(vec!["macro-accounts".into()]))
                .provide(Audit(Mutex::new(Vec::new())))
        })
        .await;
    let workers = app.start_workers().await.unwrap();
    let raw = app.queue::<serde_json::Value>("macro-accounts").unwrap();
    raw.add(
        "open",
        serde_json::json!({"account": 7}),
        JobOptions::new().job_id("open-7"),
    )
    .await
    .unwrap();
    raw.add(
        "close",
        serde_json::json!({"account": 7, "reason": "moved"}),
        JobOptions::new().job_id("close-7"),
    )
    .await
    .unwrap();
    raw.add(
        "open",
        serde_json::json!({"account": "x"}),
        JobOptions::new().job_id("open-bad"),
    )
    .await
    .unwrap();
    wait_for_state(&raw, "open-7", JobState::Completed, SOON).await;
    wait_for_state(&raw, "close-7", JobState::Completed, SOON).await;
    wait_for_state(&raw, "open-bad", JobState::Failed, SOON).await;
    assert_eq!(
        raw.get_job("open-7").await.unwrap().unwrap().return_value,
        Some(serde_json::json!(7))
    );
    assert_eq!(
        raw.get_job_logs("close-7", 0..5).await.unwrap().lines,
        ["closing 7: moved"]
    );
    let reason = raw
        .get_job("open-bad")
        .await
        .unwrap()
        .unwrap()
        .failed_reason
        .unwrap();
    assert!(
        reason.starts_with("payload does not fit contract::macros::Open"),
        "{reason}"
    );
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn attribute_handlers_stay_plain_functions_for_unit_tests() {
    let job = Job::for_test(Welcome { to: "grace".into() });
    let outbox = Dep::from(Outbox::default());
    let out = send_welcome(job, outbox.clone()).await.unwrap();
    assert_eq!(out, "sent to grace");
    assert_eq!(*outbox.sent.lock().unwrap(), ["grace"]);

    let accounts = Accounts::default();
    let audit = Dep::from(Audit(Mutex::new(Vec::new())));
    assert_eq!(
        accounts
            .open(Job::for_test(Open { account: 3 }), audit)
            .await
            .unwrap(),
        3
    );
    assert_eq!(accounts.helper(), 1);
}

#[tokio::test]
async fn registrations_can_be_switched_off() {
    let redis = TestRedis::new("macro-none");
    let app = redis.app(|b| b.registrations(Registrations::None)).await;
    assert!(app.processor_queues().is_empty());
    let _ = Duration::ZERO;
}

#[processor("macro-flow", job = "part")]
async fn macro_flow_part(job: Job<u32>) -> Result<u32, JobError> {
    Ok(job.data * 10)
}

/// A flow parent declared by its signature: what its children return comes typed.
#[processor("macro-flow", job = "total")]
async fn macro_flow_total(job: Job<String>, parts: ChildResults<u32>) -> Result<String, JobError> {
    Ok(format!("{}: {}", job.data, parts.values().sum::<u32>()))
}

#[tokio::test]
async fn a_processor_declared_as_a_flow_parent_reads_its_children_typed() {
    let redis = TestRedis::new("macro-flow");
    let app = redis
        .app(|b| b.registrations(Registrations::Queues(vec!["macro-flow".into()])))
        .await;
    let totals = app.queue::<String>("macro-flow").unwrap();
    let parts = app.queue::<u32>("macro-flow").unwrap();
    let flow = (1..=3).fold(
        totals
            .flow_job("total", "sum".into())
            .options(JobOptions::new().job_id("total-1")),
        |flow, n| flow.child(OnChildFailure::FailParent, parts.flow_job("part", n)),
    );
    app.add_flow(flow).await.unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&totals, "total-1", JobState::Completed, SOON).await;
    assert_eq!(
        totals
            .get_job("total-1")
            .await
            .unwrap()
            .unwrap()
            .return_value,
        Some(serde_json::json!("sum: 60"))
    );
    workers.shutdown(SOON).await;
}
