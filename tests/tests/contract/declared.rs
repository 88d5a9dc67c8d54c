//! Typed job contracts: `#[job_queue]` declarations, producers and processors matched
//! by payload type, the start-up checks around them, JSON Schemas, renamed queues,
//! processors of several queues and listeners with dependencies, on a real Redis.

use std::sync::Mutex;

use queue_core::prelude::*;
use queue_core::{app::Registrations, error::PayloadError, JobOptions as Options};
use queue_tests::logs::Logs;
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct WelcomeEmail {
    to: String,
    user_id: u64,
}

/// What sending a welcome returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Delivery {
    accepted: bool,
    to: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct WeeklyDigest {
    week: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Unsubscribe {
    user_id: u64,
}

/// The mail queue's contract.
#[job_queue("contract-mail")]
enum Mail {
    /// A new user's welcome.
    #[job("welcome", output = Delivery)]
    Welcome(WelcomeEmail),
    #[job("digest", output = u32)]
    Digest(WeeklyDigest),
    /// Declared, and handled by no processor of this binary.
    #[job("unsubscribe")]
    Unsubscribe(Unsubscribe),
}

#[processor(Mail, concurrency = 2)]
async fn send_welcome(job: Job<WelcomeEmail>) -> Result<Delivery, JobError> {
    Ok(Delivery {
        accepted: true,
        to: job.data.to.clone(),
    })
}

#[derive(Default)]
struct DigestJobs;

#[processor(Mail)]
impl DigestJobs {
    #[job]
    async fn digest(&self, job: Job<WeeklyDigest>) -> Result<u32, JobError> {
        Ok(job.data.week * 2)
    }
}

#[inject_queue]
struct SignupService {
    mail: Queue<Mail>,
}

/// Waits for job `id` to complete; its return value.
async fn completed<T>(queue: &Queue<T>, id: &str) -> Option<serde_json::Value> {
    wait_for_state(queue, id, JobState::Completed, SOON).await;
    queue.get_job(id).await.unwrap().unwrap().return_value
}

/// The mail queue's registrations, with what its listener needs.
fn mail_app(builder: queue_core::QueueAppBuilder) -> queue_core::QueueAppBuilder {
    builder.registrations(mail_only()).provide(Audit::default())
}

fn mail_only() -> Registrations {
    Registrations::Queues(vec!["contract-mail".into()])
}

#[tokio::test]
async fn declared_jobs_are_added_by_payload_and_handled_by_type() {
    let redis = TestRedis::new("contracts");
    let app = redis.app(mail_app).await;
    let workers = app.start_workers().await.unwrap();

    // Added through the app: the queue and the name come from the declaration.
    let welcome = app
        .add_job(
            WelcomeEmail {
                to: "ada@example.com".into(),
                user_id: 42,
            },
            Options::new().job_id("welcome-42"),
        )
        .await
        .unwrap();
    assert_eq!(
        (welcome.queue.as_str(), welcome.name.as_str()),
        ("contract-mail", "welcome")
    );
    // Added through an injected, typed handle.
    let service = SignupService::from_app(&app).unwrap();
    let digest = service
        .mail
        .add_job(WeeklyDigest { week: 21 }, Options::new())
        .await
        .unwrap();
    assert_eq!(digest.name, "digest");

    let mail = app.queue_of::<Mail>().unwrap();
    assert_eq!(
        completed(&mail, &welcome.id).await,
        Some(serde_json::json!({"accepted": true, "to": "ada@example.com"}))
    );
    assert_eq!(
        completed(&mail, &digest.id).await,
        Some(serde_json::json!(42))
    );
    // The name is BullMQ's, as a Node worker reads it.
    assert_eq!(
        redis
            .job_field("contract-mail", &welcome.id, "name")
            .as_deref(),
        Some("welcome")
    );

    // Several of one type in one round trip.
    let added = mail
        .add_jobs([
            (WeeklyDigest { week: 1 }, Options::new()),
            (WeeklyDigest { week: 2 }, Options::new()),
        ])
        .await
        .unwrap();
    for job in &added {
        assert_eq!(job.name, "digest");
        wait_for_state(&mail, &job.id, JobState::Completed, SOON).await;
    }
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn the_app_reports_what_is_declared_and_what_no_processor_handles() {
    let redis = TestRedis::new("contracts-declared");
    let logs = Logs::default();
    let app = {
        let _capture = logs.capture();
        redis.app(mail_app).await
    };
    let declared: Vec<(&str, &str, bool)> = app
        .declared_jobs()
        .iter()
        .map(|j| (j.queue.as_str(), j.name.as_str(), j.handled))
        .collect();
    assert_eq!(
        declared,
        [
            ("contract-mail", "digest", true),
            ("contract-mail", "unsubscribe", false),
            ("contract-mail", "welcome", true),
        ]
    );
    let warnings = logs.at(tracing::Level::WARN);
    let unhandled: Vec<&str> = warnings
        .iter()
        .filter(|e| e.fields.contains("no processor of this app handles"))
        .map(|e| e.fields.as_str())
        .collect();
    assert_eq!(unhandled.len(), 1, "{warnings:#?}");
    assert!(
        unhandled[0].contains("contract-mail/unsubscribe"),
        "{}",
        unhandled[0]
    );
    assert!(
        !unhandled[0].contains("contract-mail/welcome"),
        "{}",
        unhandled[0]
    );
}

#[tokio::test]
async fn a_handler_by_name_with_another_payload_than_declared_is_refused_at_build() {
    async fn wrong(_job: Job<WeeklyDigest>) -> Result<Delivery, JobError> {
        Err(JobError::unrecoverable(std::io::Error::other("never runs")))
    }
    let redis = TestRedis::new("contracts-wrong");
    let err = redis
        .builder()
        .registrations(Registrations::None)
        .processor(Processor::new("contract-mail").job("welcome", wrong))
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("job `welcome` on queue `contract-mail` is declared with payload")
            && err.contains("WelcomeEmail")
            && err.contains("WeeklyDigest")
            && err.contains("take `Job<WelcomeEmail>`"),
        "{err}"
    );
}

#[tokio::test]
async fn the_explicit_typed_processor_matches_handlers_by_payload() {
    async fn welcome(job: Job<WelcomeEmail>) -> Result<Delivery, JobError> {
        Ok(Delivery {
            accepted: false,
            to: job.data.to.clone(),
        })
    }
    let redis = TestRedis::new("contracts-explicit");
    let app = redis
        .app(|b| {
            b.registrations(Registrations::None)
                .processor(Processor::of::<Mail>().handle(welcome))
        })
        .await;
    assert_eq!(app.job_names("contract-mail"), (vec!["welcome"], false));
    let workers = app.start_workers().await.unwrap();
    let added = app
        .add_job(
            WelcomeEmail {
                to: "lin@example.com".into(),
                user_id: 7,
            },
            Options::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        completed(&app.queue_of::<Mail>().unwrap(), &added.id).await,
        Some(serde_json::json!({"accepted": false, "to": "lin@example.com"}))
    );
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn declared_payloads_export_their_json_schema_and_untyped_input_is_checked_against_it() {
    let redis = TestRedis::new("contracts-schema");
    let app = redis.app(mail_app).await;
    let schemas = app.job_schemas();
    let welcome = &schemas["queues"]["contract-mail"]["welcome"];
    assert_eq!(welcome["payload"]["type"], "object");
    assert_eq!(
        welcome["payload"]["required"],
        serde_json::json!(["to", "user_id"])
    );
    assert_eq!(
        welcome["output"]["properties"]["accepted"]["type"],
        "boolean"
    );
    // A payload without `JsonSchema` has none, and says so.
    assert!(schemas["queues"]["contract-mail"]["digest"]["payload"].is_null());

    let fits = serde_json::json!({"to": "a@b.c", "user_id": 1});
    app.check_payload("contract-mail", "welcome", &fits)
        .unwrap();
    let wrong = serde_json::json!({"to": "a@b.c", "user_id": "one"});
    match app.check_payload("contract-mail", "welcome", &wrong) {
        Err(PayloadError::SchemaMismatch { at, reason, .. }) => {
            assert_eq!(at, "/user_id");
            assert!(
                reason.contains("expected integer, found string"),
                "{reason}"
            );
        }
        other => panic!("expected a schema mismatch, got {other:?}"),
    }
    let extra = serde_json::json!({"to": "a@b.c", "user_id": 1, "cc": "x"});
    assert!(matches!(
        app.check_payload("contract-mail", "welcome", &extra),
        Err(PayloadError::SchemaMismatch { at, .. }) if at == "/cc"
    ));
}

#[tokio::test]
async fn a_renamed_queue_is_used_by_processors_producers_and_lookups() {
    let redis = TestRedis::new("contracts-rename");
    let app = redis
        .app(|b| mail_app(b).rename_queue("contract-mail", "contract-mail-eu"))
        .await;
    assert_eq!(app.processor_queues(), ["contract-mail-eu"]);
    let workers = app.start_workers().await.unwrap();
    let added = app
        .add_job(WeeklyDigest { week: 5 }, Options::new())
        .await
        .unwrap();
    assert_eq!(added.queue, "contract-mail-eu");
    // The string API and the typed one reach the same queue.
    let by_name = app.queue::<WeeklyDigest>("contract-mail").unwrap();
    assert_eq!(by_name.name(), "contract-mail-eu");
    wait_for_state(&by_name, &added.id, JobState::Completed, SOON).await;
    // Its keys are the renamed queue's, as another client sees them.
    assert_eq!(
        redis
            .job_field("contract-mail-eu", &added.id, "name")
            .as_deref(),
        Some("digest")
    );
    assert!(redis.keys().iter().all(|k| !k.contains(":contract-mail:")));
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn a_rename_to_a_bad_name_is_refused_at_build() {
    let redis = TestRedis::new("contracts-rename-bad");
    let err = redis
        .builder()
        .registrations(mail_only())
        .rename_queue("contract-mail", "mail:eu")
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("rename_queue(`contract-mail`, `mail:eu`)"),
        "{err}"
    );
}

#[tokio::test]
async fn one_processor_serves_several_queues() {
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    async fn record(job: Job<String>) -> Result<(), JobError> {
        SEEN.lock().unwrap().push(job.data.clone());
        Ok(())
    }
    let redis = TestRedis::new("contracts-several");
    let app = redis
        .app(|b| {
            b.registrations(Registrations::None).processor(
                Processor::new("several-a")
                    .also_serve("several-b")
                    .job("note", record),
            )
        })
        .await;
    assert_eq!(app.processor_queues(), ["several-a", "several-b"]);
    let workers = app.start_workers().await.unwrap();
    for queue in ["several-a", "several-b"] {
        app.queue::<String>(queue)
            .unwrap()
            .add("note", format!("from {queue}"), Options::new())
            .await
            .unwrap();
    }
    wait_until(SOON, "both queues' jobs ran", || async {
        let mut seen = SEEN.lock().unwrap().clone();
        seen.sort();
        (seen == ["from several-a", "from several-b"]).then_some(())
    })
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());
}

static NOTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[processor("contract-notes-a", also_serve = ["contract-notes-b"], job = "note")]
async fn note(job: Job<String>) -> Result<(), JobError> {
    NOTED
        .lock()
        .unwrap()
        .push(format!("{}: {}", job.queue(), job.data));
    Ok(())
}

#[tokio::test]
async fn a_macro_processor_serves_the_queues_it_lists_and_renamed_ones_follow() {
    let redis = TestRedis::new("contracts-notes");
    let app = redis
        .app(|b| {
            b.registrations(Registrations::Queues(vec!["contract-notes-a".into()]))
                .rename_queue("contract-notes-b", "contract-notes-eu")
        })
        .await;
    assert_eq!(
        app.processor_queues(),
        ["contract-notes-a", "contract-notes-eu"]
    );
    let workers = app.start_workers().await.unwrap();
    for queue in ["contract-notes-a", "contract-notes-b"] {
        app.queue::<String>(queue)
            .unwrap()
            .add("note", queue.to_owned(), Options::new())
            .await
            .unwrap();
    }
    wait_until(SOON, "both notes", || async {
        let mut seen = NOTED.lock().unwrap().clone();
        seen.sort();
        (seen
            == [
                "contract-notes-a: contract-notes-a",
                "contract-notes-eu: contract-notes-b",
            ])
        .then_some(())
    })
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());
}

/// What the listener below was given.
#[derive(Default)]
struct Audit {
    lines: Mutex<Vec<String>>,
}

#[on_worker_event(Mail, completed)]
async fn audit_completed(event: WorkerEvent, audit: Dep<Audit>) {
    audit
        .lines
        .lock()
        .unwrap()
        .push(event.job_id().unwrap_or_default().to_owned());
}

#[tokio::test]
async fn event_listeners_take_dependencies_as_processors_do() {
    let redis = TestRedis::new("contracts-listener");
    let audit = std::sync::Arc::new(Audit::default());
    let app = redis.app(|b| mail_app(b).provide_arc(audit.clone())).await;
    let workers = app.start_workers().await.unwrap();
    let added = app
        .add_job(WeeklyDigest { week: 3 }, Options::new().job_id("digest-3"))
        .await
        .unwrap();
    wait_until(SOON, "the listener saw the job", || async {
        audit
            .lines
            .lock()
            .unwrap()
            .contains(&added.id)
            .then_some(())
    })
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());

    // Without the dependency, the app does not start, and says which listener needs what.
    let err = redis
        .builder()
        .registrations(mail_only())
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("audit_completed needs Dep<") && err.contains("Audit"),
        "{err}"
    );
}

#[tokio::test]
async fn a_node_producer_validates_what_it_adds_with_the_exported_schemas() {
    let redis = TestRedis::new("contracts-node");
    let app = redis.app(mail_app).await;
    let workers = app.start_workers().await.unwrap();
    let request = serde_json::json!({
        "schemas": app.job_schemas(),
        "jobs": [
            {"name": "welcome", "data": {"to": "ada@example.com", "user_id": 9}, "opts": {"jobId": "welcome-9"}},
            {"name": "welcome", "data": {"to": "ada@example.com", "user_id": "nine"}, "opts": {}},
            {"name": "welcome", "data": {"to": "ada@example.com"}, "opts": {}},
        ],
    })
    .to_string();
    let lines = queue_tests::node::run(
        redis.prefix(),
        &["produce-validated", "contract-mail", &request],
    )
    .await;
    assert_eq!(lines[0], serde_json::json!({"added": "welcome-9"}));
    assert_eq!(lines[1]["refused"], "welcome");
    assert_eq!(lines[1]["errors"][0]["instancePath"], "/user_id");
    assert_eq!(lines[2]["refused"], "welcome");
    assert!(
        lines[2]["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("user_id"),
        "{}",
        lines[2]
    );
    // What passed runs here, typed.
    let mail = app.queue_of::<Mail>().unwrap();
    assert_eq!(
        completed(&mail, "welcome-9").await,
        Some(serde_json::json!({"accepted": true, "to": "ada@example.com"}))
    );
    assert_eq!(mail.get_job_counts().await.unwrap().total(), 1);
    assert!(workers.shutdown(SOON).await.is_clean());
}
