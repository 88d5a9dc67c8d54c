//! Job ids that reach the dashboard from a client: every route that takes one, read or
//! write, refuses an id that cannot name a job (one of the queue's own keys, a `:` that
//! reaches other keys, a control character, an id too long to look up) with a 4xx and
//! touches nothing in Redis; the add form refuses the ids and delays it could not add
//! faithfully, beside the field, and adds nothing.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::support::{post_form, text};
use axum::http::request::Parts;
use axum::Router;
use queue_core::{options::Schedule, Job, JobError, JobOptions, Processor, QueueApp};
use queue_dashboard::{Access, Dashboard};
use queue_tests::http::{listener, request};
use queue_tests::TestRedis;

const QUEUE: &str = "dash-ids";

fn operator(_: &Parts) -> Access {
    Access::operator("olga").with_payloads()
}

async fn serve(app: &QueueApp) -> SocketAddr {
    let (listener, addr) = listener().await;
    let router = Router::new().nest("/admin/queues", Dashboard::new(app, operator).router());
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

async fn ok(_: Job<serde_json::Value>) -> Result<(), JobError> {
    Ok(())
}

/// Every key under the test's prefix with its serialized value (`DUMP`): equal
/// snapshots mean nothing was written, deleted or changed.
fn snapshot(redis: &TestRedis) -> BTreeMap<String, Vec<u8>> {
    let mut conn = queue_tests::sync_connection();
    redis
        .keys()
        .into_iter()
        .map(|key| {
            let dumped: Vec<u8> = redis::cmd("DUMP")
                .arg(&key)
                .query(&mut *conn)
                .expect("DUMP");
            (key, dumped)
        })
        .collect()
}

/// A paused queue with one waiting job and an hourly scheduler (its definition, its
/// entry in the `repeat` set and its next, delayed, job).
async fn paused_queue_with_a_scheduler(redis: &TestRedis) -> QueueApp {
    let app = redis
        .app(|b| b.processor(Processor::new(QUEUE).any_job(ok)))
        .await;
    let q = app.queue::<serde_json::Value>(QUEUE).unwrap();
    q.add(
        "n",
        serde_json::json!({}),
        JobOptions::new().job_id("job-1"),
    )
    .await
    .unwrap();
    q.upsert_scheduler(
        "hourly",
        Schedule::every(Duration::from_secs(3600)),
        "tick",
        serde_json::json!({}),
        JobOptions::new(),
    )
    .await
    .unwrap();
    q.pause().await.unwrap();
    app
}

/// Ids that are no job's, percent-encoded as they travel in a path.
fn hostile_ids() -> Vec<String> {
    let mut ids: Vec<String> = [
        "meta",
        "id",
        "events",
        "wait",
        "paused",
        "delayed",
        "marker",
        "stalled-check",
        "repeat",
        "de",
        "metrics",
        "repeat%3Ahourly",
        "job-1%3Alogs",
        "a%3Ab",
        "a%07b",
    ]
    .map(str::to_owned)
    .to_vec();
    ids.push("x".repeat(600));
    ids
}

#[tokio::test]
async fn job_actions_with_ids_that_are_no_job_answer_4xx_and_touch_nothing() {
    let redis = TestRedis::new("dash-ids-act");
    let app = paused_queue_with_a_scheduler(&redis).await;
    let q = app.queue::<serde_json::Value>(QUEUE).unwrap();
    let addr = serve(&app).await;
    let before = snapshot(&redis);
    assert!(
        before.contains_key(&format!("{}:{QUEUE}:repeat:hourly", redis.prefix())),
        "the scheduler's definition: {:?}",
        before.keys()
    );

    for id in hostile_ids() {
        for action in ["remove", "retry", "promote"] {
            let path = format!("/admin/queues/{QUEUE}/jobs/{id}/{action}");
            let response = post_form(addr, &path, &[], "").await;
            assert!(
                (400..500).contains(&response.status),
                "{action} {id:.40}: {} {}",
                response.status,
                text(&response)
            );
        }
        // A scheduler's actions take a scheduler's id: these name no scheduler.
        for action in ["remove", "run"] {
            let path = format!("/admin/queues/{QUEUE}/schedulers/{id}/{action}");
            let response = post_form(addr, &path, &[], "").await;
            assert!(
                (400..500).contains(&response.status),
                "scheduler {action} {id:.40}: {} {}",
                response.status,
                text(&response)
            );
        }
        let page = request(
            addr,
            "GET",
            &format!("/admin/queues/{QUEUE}/jobs/{id}"),
            &[],
            b"",
        )
        .await
        .unwrap();
        assert_eq!(page.status, 404, "page of {id:.40}");
        assert_eq!(
            snapshot(&redis),
            before,
            "after the requests on {id:.40}, Redis changed"
        );
    }
    // The queue is still paused, the scheduler whole, the job there.
    assert!(q.is_paused().await.unwrap());
    let scheduler = q.get_scheduler("hourly").await.unwrap().expect("scheduler");
    assert!(scheduler.next_job_id().is_some());
    assert!(q.get_job("job-1").await.unwrap().is_some());

    // The same ids through the library: nothing removed, nothing found.
    for id in ["meta", "id", "repeat:hourly", "a:b", "a\u{7}b"] {
        assert!(q.remove(id).await.unwrap(), "{id}: nothing to remove");
        assert!(q.get_job_logs(id, 0..10).await.unwrap().lines.is_empty());
        assert_eq!(
            q.cancel(id).await.unwrap(),
            queue_core::queue::CancelOutcome::NotFound,
            "{id}"
        );
    }
    assert_eq!(snapshot(&redis), before);

    // A real job is still removed.
    let removed = post_form(
        addr,
        &format!("/admin/queues/{QUEUE}/jobs/job-1/remove"),
        &[],
        "confirm=yes",
    )
    .await;
    assert_eq!(removed.status, 303, "{}", text(&removed));
    assert!(q.get_job("job-1").await.unwrap().is_none());
}

#[tokio::test]
async fn the_add_form_refuses_ids_and_delays_it_could_not_add_faithfully() {
    let redis = TestRedis::new("dash-ids-add");
    let app = paused_queue_with_a_scheduler(&redis).await;
    let q = app.queue::<serde_json::Value>(QUEUE).unwrap();
    let addr = serve(&app).await;
    let before = snapshot(&redis);
    let long = "y".repeat(513);
    let cases = [
        // A control character: listed on the queue page, then "no such job".
        ("job_id=a%07b", "job_id"),
        ("job_id=a%0Ab", "job_id"),
        // Over 512 bytes: the lookups refuse it, so its page would be a 404.
        (&*format!("job_id={long}"), "job_id"),
        // u64::MAX milliseconds was stored as a delay of -1.
        ("delay_ms=18446744073709551615", "delay_ms"),
        ("delay_ms=9223372036854775808", "delay_ms"),
    ];
    for (field, at) in cases {
        let form = format!("name=n&data=%7B%7D&{field}");
        let response = post_form(addr, &format!("/admin/queues/{QUEUE}/add"), &[], &form).await;
        let page = text(&response);
        assert_eq!(response.status, 400, "{field:.40}: {page}");
        // The complaint sits beside the field at fault.
        let beside = page
            .split(&format!("name=\"{at}\""))
            .nth(1)
            .and_then(|rest| rest.split("</dd>").next())
            .unwrap_or_default();
        assert!(beside.contains("field-error"), "{field:.40}: {page}");
        assert_eq!(snapshot(&redis), before, "{field:.40} wrote to Redis");
    }
    // A delay that fits, and an ordinary id, are added.
    let fine = post_form(
        addr,
        &format!("/admin/queues/{QUEUE}/add"),
        &[],
        "name=n&data=%7B%7D&job_id=fine-1&delay_ms=60000",
    )
    .await;
    assert_eq!(fine.status, 303, "{}", text(&fine));
    let info = q.get_job("fine-1").await.unwrap().expect("added");
    assert_eq!(info.delay, Duration::from_secs(60));
}
