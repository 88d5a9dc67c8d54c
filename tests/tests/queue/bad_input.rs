//! Bad input, in one place: each kind gets a clear, typed error or failure reason, loses
//! nothing else, and the worker keeps going.
//!
//! - At `add` (nothing is written): a malformed or reserved job id, invalid options, an
//!   oversized payload.
//! - In a job's data, as another producer might write it: text that is not JSON, JSON of
//!   the wrong shape, a job name nobody handles, a missing data field, options that are
//!   not JSON. Each fails only its own job, once, without pointless retries.
//! - Over HTTP: an unknown queue or job on the status routes (`http/layer.rs`), and non-UTF-8
//!   or oversized bodies on the example's routes (`examples/welcome-app/tests/service.rs`).

use std::time::Duration;

use queue_core::{Backoff, Error, Job, JobError, JobOptions, JobState, Processor};
use queue_tests::fixtures::{welcome, WelcomeEmail};
use queue_tests::{wait_for_state, TestRedis, SOON};

async fn send(job: Job<WelcomeEmail>) -> Result<String, JobError> {
    Ok(format!("sent to {}", job.data.to))
}

#[tokio::test]
async fn bad_options_ids_and_payloads_are_refused_at_add_and_nothing_is_written() {
    let redis = TestRedis::new("refuse");
    let app = redis.app(|b| b.max_payload_bytes(1024)).await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();

    let cases: Vec<(JobOptions, &str, &str)> = vec![
        (
            JobOptions::new().job_id("welcome:42"),
            "job_id",
            "`welcome-42`",
        ),
        (JobOptions::new().job_id("42"), "job_id", "integer"),
        (JobOptions::new().job_id(""), "job_id", "empty"),
        (JobOptions::new().job_id("meta"), "job_id", "own Redis keys"),
        (JobOptions::new().attempts(0), "attempts", "at least 1"),
        (
            JobOptions::new().priority(3_000_000),
            "priority",
            "out of range",
        ),
        (
            JobOptions::new().timeout(Duration::ZERO),
            "timeout",
            "longer than zero",
        ),
        (
            JobOptions::new().backoff(Backoff::custom("jitter")),
            "backoff",
            "no custom backoff strategy `jitter`",
        ),
    ];
    for (opts, expected_option, expected_text) in cases {
        match email.add("welcome", welcome(1), opts.clone()).await {
            Err(Error::InvalidOption { option, reason }) => {
                assert_eq!(option, expected_option, "{opts:?}");
                assert!(reason.contains(expected_text), "{reason}");
            }
            other => panic!("{opts:?} should be refused, got {other:?}"),
        }
    }

    let huge = WelcomeEmail {
        user_id: 1,
        to: "x".repeat(2000),
    };
    match email.add("welcome", huge, JobOptions::new()).await {
        Err(Error::InvalidOption {
            option: "payload",
            reason,
        }) => assert!(reason.contains("1024-byte limit"), "{reason}"),
        other => panic!("an oversized payload should be refused, got {other:?}"),
    }

    assert!(
        redis
            .keys()
            .iter()
            .all(|k| !k.contains(":email:") || k.ends_with(":meta")),
        "{:?}",
        redis.keys()
    );
    assert_eq!(email.get_job_counts().await.unwrap().unfinished(), 0);
}

/// Overwrites one field of a job's hash, as a foreign producer or a hand edit would.
fn corrupt(redis: &TestRedis, queue: &str, id: &str, field: &str, value: Option<&str>) {
    let mut conn = queue_tests::sync_connection();
    let key = format!("{}:{queue}:{id}", redis.prefix());
    let cmd = match value {
        Some(value) => {
            let mut cmd = redis::cmd("HSET");
            cmd.arg(&key).arg(field).arg(value);
            cmd
        }
        None => {
            let mut cmd = redis::cmd("HDEL");
            cmd.arg(&key).arg(field);
            cmd
        }
    };
    let _: i64 = cmd.query(&mut *conn).expect("the job hash is written");
}

#[tokio::test]
async fn bad_job_data_fails_only_its_own_job_with_a_reason_and_the_worker_goes_on() {
    let redis = TestRedis::new("bad-data");
    let app = redis
        // Strict about unknown job names: here they are bad input, not a deploy in
        // progress (worker/attempt.rs has the default, retryable).
        .app(|b| {
            b.processor(
                Processor::new("email")
                    .fail_unknown_job_names(true)
                    .job("welcome", send),
            )
        })
        .await;
    let typed = app.queue::<WelcomeEmail>("email").unwrap();
    let raw = app.queue::<serde_json::Value>("email").unwrap();
    let three = || JobOptions::new().attempts(3);

    // Added before any worker runs, then spoiled where needed.
    for id in ["not-json", "no-data", "bad-opts"] {
        typed
            .add("welcome", welcome(1), three().job_id(id))
            .await
            .unwrap();
    }
    corrupt(&redis, "email", "not-json", "data", Some("{not json"));
    corrupt(&redis, "email", "no-data", "data", None);
    corrupt(&redis, "email", "bad-opts", "opts", Some("{also not json"));
    let wrong_shapes = [
        ("missing-field", serde_json::json!({"userId": 1})),
        (
            "wrong-type",
            serde_json::json!({"userId": "one", "to": "a@b.c"}),
        ),
        ("not-an-object", serde_json::json!("hello")),
    ];
    for (id, data) in &wrong_shapes {
        raw.add("welcome", data.clone(), three().job_id(*id))
            .await
            .unwrap();
    }
    raw.add(
        "farewell",
        serde_json::json!({}),
        three().job_id("unknown-name"),
    )
    .await
    .unwrap();
    typed
        .add("welcome", welcome(2), JobOptions::new().job_id("good"))
        .await
        .unwrap();

    let workers = app.start_workers().await.unwrap();
    wait_for_state(&typed, "good", JobState::Completed, SOON).await;

    let expectations: [(&str, &str); 7] = [
        (
            "not-json",
            "the job's data is not JSON (key must be a string at line 1 column 2): \"{not json\"",
        ),
        ("no-data", "the job has no `data` field"),
        // BullMQ falls back to default options, as Node's worker does; the job runs.
        ("bad-opts", "sent to user1@example.com"),
        (
            "missing-field",
            "payload does not fit queue_tests::fixtures::WelcomeEmail: missing field `to`",
        ),
        (
            "wrong-type",
            "payload does not fit queue_tests::fixtures::WelcomeEmail: invalid type: string \"one\"",
        ),
        (
            "not-an-object",
            "payload does not fit queue_tests::fixtures::WelcomeEmail: invalid type: string \"hello\"",
        ),
        (
            "unknown-name",
            "no handler for job name `farewell` on queue `email`; this worker handles: welcome",
        ),
    ];
    for (id, expected) in expectations {
        let state = wait_for_finished(&typed, id).await;
        let info = typed.get_job(id).await.unwrap().unwrap();
        let outcome = match state {
            JobState::Failed => info.failed_reason.clone().unwrap_or_default(),
            _ => info
                .return_value
                .as_ref()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
        };
        assert!(
            outcome.starts_with(expected),
            "{id}: {state:?} with {outcome:?}"
        );
        assert_eq!(info.attempts_made, 1, "{id}: no pointless retries");
    }
    assert!(workers.shutdown(SOON).await.is_clean());
}

/// Waits until `id` is completed or failed, and says which.
async fn wait_for_finished<T>(q: &queue_core::Queue<T>, id: &str) -> JobState {
    queue_tests::wait_until(SOON, &format!("job {id} to finish"), || async {
        q.get_job_state(id)
            .await
            .ok()
            .flatten()
            .filter(|s| s.is_finished())
    })
    .await
}
