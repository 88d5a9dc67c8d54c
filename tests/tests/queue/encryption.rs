//! Sealed payloads: a queue that encrypts keeps no payload or result in clear in Redis,
//! its handlers see both opened, every way in (add, add_bulk, flows) seals, every way
//! out (a wait, a watcher, `open`) opens, and a ciphertext that does not open fails its
//! job once, for good, saying why.

use queue_core::encryption::Keyring;
use queue_core::{
    ChildResults, Job, JobError, JobOptions, JobOutcome, JobState, OnChildFailure, Processor,
    QueueEvent,
};
use queue_tests::{wait_for_state, TestRedis, SOON};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Welcome {
    to: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Sent {
    to: String,
    attempt: u32,
}

async fn send(job: Job<Welcome>) -> Result<Sent, JobError> {
    Ok(Sent {
        to: job.data.to.clone(),
        attempt: job.attempt(),
    })
}

async fn digest(job: Job<Welcome>, sent: ChildResults<Sent>) -> Result<Vec<String>, JobError> {
    let mut all: Vec<String> = sent.values().map(|s| s.to.clone()).collect();
    all.push(job.data.to.clone());
    Ok(all)
}

fn key(byte: u8) -> [u8; 32] {
    [byte; 32]
}

fn keyring_k1() -> Keyring {
    Keyring::new("k1", key(1)).unwrap()
}

/// An address no other test writes, so that finding it in Redis means this test's job
/// left it in clear.
fn address(label: &str) -> String {
    format!("{label}-{}@example.com", uuid::Uuid::new_v4().simple())
}

#[tokio::test]
async fn a_sealed_queue_keeps_no_address_in_clear_and_its_handler_and_its_waiter_see_it() {
    let redis = TestRedis::new("sealed-queue");
    let app = redis
        .app(|b| {
            b.keyring(keyring_k1())
                .encrypt_queue("sealed-mail")
                .processor(Processor::new("sealed-mail").job("welcome", send))
        })
        .await;
    let mail = app.queue::<Welcome>("sealed-mail").unwrap();
    let workers = app.start_workers().await.unwrap();
    let ada = address("ada");
    let added = mail
        .add(
            "welcome",
            Welcome { to: ada.clone() },
            JobOptions::new().job_id("welcome-1"),
        )
        .await
        .unwrap();
    let outcome = added.wait(SOON).await.unwrap();
    assert_eq!(
        outcome,
        JobOutcome::Completed(serde_json::json!({"to": ada, "attempt": 1})),
        "the waiter reads the return value opened"
    );

    // What a reader of Redis finds: the envelope, no address anywhere.
    assert_eq!(redis.keys_holding(&ada), Vec::<String>::new());
    let stored: serde_json::Value =
        serde_json::from_str(&redis.job_field("sealed-mail", "welcome-1", "data").unwrap())
            .unwrap();
    assert_eq!(stored["sealed"], "aes-256-gcm/1");
    assert_eq!(stored["key"], "k1");

    // A read answers what Redis holds; `open` opens it.
    let info = mail.get_job("welcome-1").await.unwrap().unwrap();
    assert_eq!(info.sealed_with(), Some("k1"));
    let refused = info.data_as::<Welcome>().unwrap_err().to_string();
    assert!(refused.contains("sealed"), "{refused}");
    let opened = mail.open(info).unwrap();
    assert_eq!(
        opened.data_as::<Welcome>().unwrap(),
        Welcome { to: ada.clone() }
    );
    assert_eq!(
        opened.return_value,
        Some(serde_json::json!({"to": ada, "attempt": 1}))
    );
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn bulk_adds_flows_and_watchers_seal_and_open_too() {
    let redis = TestRedis::new("sealed-paths");
    let app = redis
        .app(|b| {
            b.keyring(keyring_k1())
                .encrypt_queue("sealed-bulk")
                .encrypt_queue("sealed-digest")
                .processor(Processor::new("sealed-bulk").job("welcome", send))
                .processor(Processor::new("sealed-digest").job("digest", digest))
        })
        .await;
    let bulk = app.queue::<Welcome>("sealed-bulk").unwrap();
    let digests = app.queue::<Welcome>("sealed-digest").unwrap();
    let (ada, lin, root) = (address("ada"), address("lin"), address("root"));

    // A watcher made before the job runs reads its completion opened.
    let mut watcher = bulk.watch_job("bulk-ada").await.unwrap();
    bulk.add_bulk(vec![
        queue_core::queue::BulkJob::new("welcome", Welcome { to: ada.clone() })
            .options(JobOptions::new().job_id("bulk-ada")),
        queue_core::queue::BulkJob::new("welcome", Welcome { to: lin.clone() })
            .options(JobOptions::new().job_id("bulk-lin")),
    ])
    .await
    .unwrap();
    let flow = digests
        .flow_job("digest", Welcome { to: root.clone() })
        .options(JobOptions::new().job_id("digest-1"))
        .child(
            OnChildFailure::FailParent,
            bulk.flow_job("welcome", Welcome { to: ada.clone() })
                .options(JobOptions::new().job_id("flow-ada")),
        );
    let added = app.add_flow(flow).await.unwrap();
    for address in [&ada, &lin, &root] {
        assert_eq!(
            redis.keys_holding(address),
            Vec::<String>::new(),
            "nothing added holds {address} in clear"
        );
    }

    let workers = app.start_workers().await.unwrap();
    let completed = tokio::time::timeout(SOON, async {
        loop {
            match watcher.next().await {
                Some(QueueEvent::Completed { return_value, .. }) => break return_value,
                Some(_) => {}
                None => panic!("the watch ended before the job completed"),
            }
        }
    })
    .await
    .expect("bulk-ada completed in time");
    assert_eq!(completed["to"], ada.as_str());

    // The parent read its child's sealed result, opened, and sealed its own.
    let outcome = added.job.wait(SOON).await.unwrap();
    assert_eq!(
        outcome,
        JobOutcome::Completed(serde_json::json!([ada, root])),
        "the parent's handler read the child's result"
    );
    wait_for_state(&bulk, "bulk-lin", JobState::Completed, SOON).await;
    let children = digests.get_children("digest-1", 10).await.unwrap();
    assert_eq!(
        children.processed[0].return_value.as_ref().unwrap()["sealed"],
        "aes-256-gcm/1",
        "a child's result is read as stored"
    );
    let children = digests.open_children(children).unwrap();
    assert_eq!(
        children.processed[0].return_value.as_ref().unwrap()["to"],
        ada.as_str()
    );
    for address in [&ada, &lin, &root] {
        assert_eq!(redis.keys_holding(address), Vec::<String>::new());
    }
    workers.shutdown(SOON).await;
}

/// Flips one byte of the ciphertext in a job's stored data, as a reader with write
/// access to Redis (or a disk fault) would.
fn tamper(redis: &TestRedis, queue: &str, id: &str) {
    let mut data: serde_json::Value =
        serde_json::from_str(&redis.job_field(queue, id, "data").unwrap()).unwrap();
    let text = data["data"].as_str().unwrap().to_owned();
    let first = if text.starts_with('A') { "B" } else { "A" };
    data["data"] = serde_json::Value::from(format!("{first}{}", &text[1..]));
    let mut conn = queue_tests::sync_connection();
    let _: () = redis::cmd("HSET")
        .arg(format!("{}:{queue}:{id}", redis.prefix()))
        .arg("data")
        .arg(data.to_string())
        .query(&mut *conn)
        .unwrap();
}

#[tokio::test]
async fn an_altered_ciphertext_or_a_missing_key_fails_the_job_once_saying_why() {
    let redis = TestRedis::new("sealed-faults");
    let producer = |keyring: Keyring| {
        redis.app(move |b| {
            b.keyring(keyring)
                .external_queue("sealed-faults")
                .encrypt_queue("sealed-faults")
        })
    };
    let five = || JobOptions::new().attempts(5);
    let k1 = producer(keyring_k1()).await;
    let queue = k1.queue::<Welcome>("sealed-faults").unwrap();
    queue
        .add(
            "welcome",
            Welcome {
                to: address("altered"),
            },
            five().job_id("altered"),
        )
        .await
        .unwrap();
    tamper(&redis, "sealed-faults", "altered");
    // Sealed with a key that was dropped from the keyring too early.
    let k0 = producer(Keyring::new("k0", key(0)).unwrap()).await;
    k0.queue::<Welcome>("sealed-faults")
        .unwrap()
        .add(
            "welcome",
            Welcome {
                to: address("lost"),
            },
            five().job_id("lost-key"),
        )
        .await
        .unwrap();

    let worker = redis
        .app(|b| {
            b.keyring(
                Keyring::new("k2", key(2))
                    .unwrap()
                    .with_older("k1", key(1))
                    .unwrap(),
            )
            .processor(Processor::new("sealed-faults").job("welcome", send))
        })
        .await;
    let workers = worker.start_workers().await.unwrap();
    for (id, reason) in [
        ("altered", "does not open with key `k1`"),
        (
            "lost-key",
            "sealed with key `k0`, which the keyring does not hold",
        ),
    ] {
        wait_for_state(&queue, id, JobState::Failed, SOON).await;
        let info = queue.get_job(id).await.unwrap().unwrap();
        let failed = info.failed_reason.unwrap_or_default();
        assert!(failed.contains(reason), "{id}: {failed}");
        assert_eq!(info.attempts_made, 1, "{id}: no retry can open it");
    }
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_rotated_keyring_seals_with_the_new_key_and_still_opens_the_old() {
    let redis = TestRedis::new("sealed-rotation");
    let old = redis
        .app(|b| {
            b.keyring(keyring_k1())
                .external_queue("sealed-rotation")
                .encrypt_queue("sealed-rotation")
        })
        .await;
    let before = address("before");
    old.queue::<Welcome>("sealed-rotation")
        .unwrap()
        .add(
            "welcome",
            Welcome { to: before.clone() },
            JobOptions::new().job_id("before"),
        )
        .await
        .unwrap();

    // The rotation: k2 current, k1 kept to open what it sealed.
    let rotated = || {
        Keyring::new("k2", key(2))
            .unwrap()
            .with_older("k1", key(1))
            .unwrap()
    };
    let app = redis
        .app(|b| {
            b.keyring(rotated())
                .encrypt_queue("sealed-rotation")
                .processor(Processor::new("sealed-rotation").job("welcome", send))
        })
        .await;
    let queue = app.queue::<Welcome>("sealed-rotation").unwrap();
    let after = queue
        .add(
            "welcome",
            Welcome {
                to: address("after"),
            },
            JobOptions::new().job_id("after"),
        )
        .await
        .unwrap();
    let sealed_key = |id: &str| {
        let data: serde_json::Value =
            serde_json::from_str(&redis.job_field("sealed-rotation", id, "data").unwrap()).unwrap();
        data["key"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        (sealed_key("before"), sealed_key("after")),
        ("k1".into(), "k2".into())
    );
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&queue, "before", JobState::Completed, SOON).await;
    assert!(matches!(
        after.wait(SOON).await.unwrap(),
        JobOutcome::Completed(_)
    ));
    let result = queue
        .open(queue.get_job("before").await.unwrap().unwrap())
        .unwrap();
    assert_eq!(result.return_value.unwrap()["to"], before.as_str());

    // Rotation while running: the app's next add seals with k3.
    app.replace_keyring(
        Keyring::new("k3", key(3))
            .unwrap()
            .with_older("k2", key(2))
            .unwrap(),
    );
    queue
        .add(
            "welcome",
            Welcome {
                to: address("later"),
            },
            JobOptions::new().job_id("later"),
        )
        .await
        .unwrap();
    assert_eq!(sealed_key("later"), "k3");
    wait_for_state(&queue, "later", JobState::Completed, SOON).await;
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn an_encrypted_queue_without_a_keyring_is_refused_at_start_up() {
    let err = queue_tests::redis_builder()
        .external_queue("sealed-mail")
        .encrypt_queue("sealed-mail")
        .check()
        .unwrap_err()
        .to_string();
    assert!(err.contains("queue `sealed-mail` is encrypted"), "{err}");
    assert!(err.contains("keyring"), "{err}");
    // A misspelled queue is a queue the app does not know.
    let err = queue_tests::redis_builder()
        .keyring(keyring_k1())
        .external_queue("sealed-mail")
        .encrypt_queue("sealed-mial")
        .check()
        .unwrap_err()
        .to_string();
    assert!(err.contains("sealed-mial"), "{err}");
}

#[tokio::test]
async fn inline_mode_and_the_testing_kit_run_a_sealed_queue_as_production_does() {
    let app = queue_core::QueueApp::builder()
        .keyring(keyring_k1())
        .encrypt_queue("sealed-inline")
        .processor(Processor::new("sealed-inline").job("welcome", send))
        .build_inline()
        .unwrap();
    let added = app
        .queue::<Welcome>("sealed-inline")
        .unwrap()
        .add(
            "welcome",
            Welcome {
                to: "ada@example.com".into(),
            },
            JobOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(added.state, Some(JobState::Completed));
    let jobs = queue_core::testing::inline_jobs(&app);
    assert_eq!(
        jobs[0].data["sealed"], "aes-256-gcm/1",
        "the payload as Redis would hold it"
    );
    assert_eq!(
        jobs[0].outcome,
        queue_core::testing::InlineOutcome::Completed {
            value: serde_json::json!({"to": "ada@example.com", "attempt": 1})
        },
        "the outcome as the handler returned it"
    );

    // A declared queue that says `encrypted`: the testing kit seals the payload as an
    // add would, and the handler opens it.
    let app = queue_core::QueueApp::builder()
        .registrations(queue_core::app::Registrations::of::<SealedKit>())
        .keyring(keyring_k1())
        .processor(Processor::new("sealed-kit").job("welcome", kit_send))
        .build_inline()
        .unwrap();
    let sent = queue_core::testing::run_handler(
        &app,
        KitWelcome {
            to: "lin@example.com".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(sent, "sent to lin@example.com");
    let added = app
        .queue_of::<SealedKit>()
        .unwrap()
        .add_job(
            KitWelcome {
                to: "kim@example.com".into(),
            },
            JobOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(added.state, Some(JobState::Completed));
    let jobs = queue_core::testing::inline_jobs(&app);
    assert_eq!(
        jobs[0].data["sealed"], "aes-256-gcm/1",
        "the declaration seals"
    );

    // Without a keyring, the app that processes it does not start.
    let err = queue_core::QueueApp::builder()
        .registrations(queue_core::app::Registrations::of::<SealedKit>())
        .processor(Processor::new("sealed-kit").job("welcome", kit_send))
        .check()
        .unwrap_err()
        .to_string();
    assert!(err.contains("queue `sealed-kit` is encrypted"), "{err}");
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct KitWelcome {
    to: String,
}

#[queue_core::job_queue("sealed-kit", encrypted)]
enum SealedKit {
    #[job("welcome", output = String)]
    Welcome(KitWelcome),
}

async fn kit_send(job: Job<KitWelcome>) -> Result<String, JobError> {
    Ok(format!("sent to {}", job.data.to))
}

async fn takes_a_number(_job: Job<u32>) -> Result<(), JobError> {
    Ok(())
}

#[tokio::test]
async fn a_sealed_payload_that_does_not_fit_fails_without_quoting_it() {
    let redis = TestRedis::new("sealed-misfit");
    let app = redis
        .app(|b| {
            b.keyring(keyring_k1())
                .encrypt_queue("sealed-misfit")
                .processor(Processor::new("sealed-misfit").job("count", takes_a_number))
        })
        .await;
    let queue = app.queue::<String>("sealed-misfit").unwrap();
    let ada = address("ada");
    queue
        .add("count", ada.clone(), JobOptions::new().job_id("misfit"))
        .await
        .unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&queue, "misfit", JobState::Failed, SOON).await;
    let reason = queue
        .get_job("misfit")
        .await
        .unwrap()
        .unwrap()
        .failed_reason
        .unwrap_or_default();
    // serde would say `invalid type: string "ada-…@example.com", expected u32`.
    assert!(reason.contains("payload does not fit u32"), "{reason}");
    assert!(reason.contains("withheld"), "{reason}");
    assert_eq!(redis.keys_holding(&ada), Vec::<String>::new());
    workers.shutdown(SOON).await;
}

/// A handler whose error and log line quote the payload, as an upstream's message can.
async fn quotes_its_payload(job: Job<Welcome>) -> Result<(), JobError> {
    job.log(format!("sending to {}", job.data.to)).await?;
    Err(JobError::retry(std::io::Error::other(format!(
        "the mail server refused {}",
        job.data.to
    ))))
}

#[tokio::test]
async fn failure_reasons_and_log_lines_are_sealed_by_choice_and_opened_for_the_app() {
    let redis = TestRedis::new("sealed-notes");
    let app = redis
        .app(|b| {
            b.keyring(keyring_k1())
                .encrypt_queue("sealed-notes")
                .encrypt_failures_and_logs(true)
                .processor(Processor::new("sealed-notes").job("welcome", quotes_its_payload))
        })
        .await;
    let queue = app.queue::<Welcome>("sealed-notes").unwrap();
    let ada = address("ada");
    let added = queue
        .add(
            "welcome",
            Welcome { to: ada.clone() },
            JobOptions::new().job_id("notes").attempts(2),
        )
        .await
        .unwrap();
    let workers = app.start_workers().await.unwrap();
    // The wait reads the final failure opened.
    match added.wait(SOON).await.unwrap() {
        JobOutcome::Failed { reason } => {
            assert_eq!(reason, format!("the mail server refused {ada}"))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        redis.keys_holding(&ada),
        Vec::<String>::new(),
        "no reason, record or log line holds the address in clear"
    );
    let stored = queue.get_job("notes").await.unwrap().unwrap();
    assert!(stored
        .failed_reason
        .as_deref()
        .unwrap_or_default()
        .contains("aes-256-gcm/1"));
    let opened = queue.open(stored).unwrap();
    assert_eq!(
        opened.failed_reason,
        Some(format!("the mail server refused {ada}"))
    );
    assert_eq!(opened.stacktrace.len(), 2, "one record per attempt");
    assert!(
        opened.stacktrace.iter().all(|entry| entry.contains(&ada)),
        "{:?}",
        opened.stacktrace
    );
    let logs = queue.get_job_logs("notes", 0..10).await.unwrap();
    assert_eq!(logs.lines.len(), 2);
    assert!(logs.lines.iter().all(|line| !line.contains(&ada)));
    let logs = queue.open_logs(logs).unwrap();
    assert_eq!(logs.lines, vec![format!("sending to {ada}"); 2]);
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn worker_events_carry_the_payload_and_the_result_opened() {
    let redis = TestRedis::new("sealed-events");
    let app = redis
        .app(|b| {
            b.keyring(keyring_k1())
                .encrypt_queue("sealed-events")
                .processor(Processor::new("sealed-events").job("welcome", send))
        })
        .await;
    let mut events = app.worker_events();
    let workers = app.start_workers().await.unwrap();
    let ada = address("ada");
    app.queue::<Welcome>("sealed-events")
        .unwrap()
        .add("welcome", Welcome { to: ada.clone() }, JobOptions::new())
        .await
        .unwrap();
    let (data, return_value) = tokio::time::timeout(SOON, async {
        loop {
            if let Some(queue_core::WorkerEvent::Completed {
                data, return_value, ..
            }) = events.recv().await
            {
                break (data, return_value);
            }
        }
    })
    .await
    .expect("the completion in time");
    assert_eq!(data.as_deref(), Some(&serde_json::json!({ "to": ada })));
    assert_eq!(return_value, serde_json::json!({"to": ada, "attempt": 1}));
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_declared_encrypted_queue_seals_in_an_app_that_registers_other_queues() {
    let redis = TestRedis::new("sealed-elsewhere");
    // `Registrations::None` picks no record of this binary; the declaration still
    // binds every producer of its queue.
    let app = redis.app(|b| b.keyring(keyring_k1())).await;
    let added = app
        .queue_of::<SealedKit>()
        .unwrap()
        .add_job(KitWelcome { to: address("kim") }, JobOptions::new())
        .await
        .unwrap();
    let stored: serde_json::Value =
        serde_json::from_str(&redis.job_field("sealed-kit", &added.id, "data").unwrap()).unwrap();
    assert_eq!(stored["sealed"], "aes-256-gcm/1");
}
