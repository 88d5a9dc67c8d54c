//! Sealed payloads on the dashboard: a job's page shows a sealed payload and return value
//! as sealed, with the key's id, to a reader who sees payloads; opens them only for one
//! the policy lets reveal them, and audits each opening; says why when one does not
//! open (its key not in this app's keyring) instead of failing; and a payload search
//! never looks into one, and says so. Sealed failure reasons, attempt records and log
//! lines (`encrypt_failures_and_logs`) likewise, on the job's page and in its flow; a
//! listing shows them sealed to every reader.

use std::net::SocketAddr;

use axum::http::request::Parts;
use queue_core::encryption::Keyring;
use queue_core::{Job, JobError, JobOptions, JobState, OnChildFailure, Processor, QueueApp};
use queue_dashboard::{Access, Dashboard};
use queue_tests::http::{request, HttpResponse};
use queue_tests::{wait_for_state, TestRedis, SOON};

use crate::audit::audit_log;
use crate::support::{serve_dashboard as serve, text};

const QUEUE: &str = "dash-sealed";
const JOB: &str = "/admin/queues/dash-sealed/jobs/welcome-1";

/// The handler gives back what it was sent: its return value holds the address too.
async fn echo(job: Job<serde_json::Value>) -> Result<serde_json::Value, JobError> {
    Ok(job.data.clone())
}

/// An address no other test writes, so finding it on a page means the page opened it.
fn address() -> String {
    format!("ada-{}@example.com", uuid::Uuid::new_v4().simple())
}

/// A reader's name no other test uses, to find this test's audit lines.
fn reader(label: &str) -> String {
    format!("{label}-{}", uuid::Uuid::new_v4().simple())
}

/// `x-role: reveal` reveals sealed values, as `who`; any other reader sees payloads
/// only (and is named `payloads-only`).
fn policy(who: String) -> impl Fn(&Parts) -> Access + Send + Sync + 'static {
    move |request: &Parts| match request.headers.get("x-role") {
        Some(role) if role == "reveal" => Access::read_only(who.as_str()).with_reveal(),
        _ => Access::read_only("payloads-only").with_payloads(),
    }
}

async fn get(addr: SocketAddr, path: &str, role: &str) -> HttpResponse {
    request(addr, "GET", path, &[("x-role", role)], b"")
        .await
        .expect("request")
}

/// An app with keyring `k1` whose queue seals, holding job `welcome-1` completed: its
/// payload `{"to": to}`, and its return value the same.
async fn sealed_job(redis: &TestRedis, to: &str) -> QueueApp {
    let app = redis
        .app(|b| {
            b.keyring(Keyring::new("k1", [1; 32]).unwrap())
                .encrypt_queue(QUEUE)
                .processor(Processor::new(QUEUE).any_job(echo))
        })
        .await;
    let q = app.queue::<serde_json::Value>(QUEUE).unwrap();
    let workers = app.start_workers().await.unwrap();
    q.add(
        "welcome",
        serde_json::json!({ "to": to }),
        JobOptions::new().job_id("welcome-1"),
    )
    .await
    .unwrap();
    wait_for_state(&q, "welcome-1", JobState::Completed, SOON).await;
    workers.shutdown(SOON).await;
    assert_eq!(
        redis.keys_holding(to),
        Vec::<String>::new(),
        "sealed in Redis"
    );
    app
}

/// The audit lines that name `who`.
fn audited(who: &str) -> Vec<String> {
    let events = audit_log();
    let lines = events.lock().unwrap();
    lines
        .iter()
        .filter(|line| line.contains(&format!("who={who} ")))
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_sealed_job_shows_as_sealed_unless_the_policy_reveals_it_and_each_opening_is_audited() {
    audit_log();
    let redis = TestRedis::new("dash-sealed-page");
    let ada = address();
    let app = sealed_job(&redis, &ada).await;
    let rita = reader("rita");
    let addr = serve(Dashboard::new(&app, policy(rita.clone()))).await;
    let stored: serde_json::Value =
        serde_json::from_str(&redis.job_field(QUEUE, "welcome-1", "data").unwrap()).unwrap();
    let ciphertext = stored["data"].as_str().expect("an envelope").to_owned();

    // Payloads, but no reveal: sealed, with the key, and neither the address nor the
    // envelope's base64 dressed as the payload.
    let page = get(addr, JOB, "payloads").await;
    assert_eq!(page.status, 200, "{}", text(&page));
    let page = text(&page);
    assert!(page.contains("sealed"), "{page}");
    assert!(page.contains("<code class=\"key\">k1</code>"), "{page}");
    assert!(!page.contains(&ada), "{page}");
    assert!(!page.contains(&ciphertext), "{page}");
    assert!(!page.contains("aes-256-gcm"), "{page}");
    assert!(
        audited("payloads-only")
            .iter()
            .all(|line| !line.contains("welcome-1")),
        "nothing opened, nothing audited"
    );

    // With reveal: opened, the payload and the return value, and each opening audited
    // with who, queue, job, field and key, never the value.
    let page = get(addr, JOB, "reveal").await;
    assert_eq!(page.status, 200, "{}", text(&page));
    let page = text(&page);
    assert_eq!(
        page.matches(&ada).count(),
        2,
        "payload and return value: {page}"
    );
    assert!(page.contains("audited"), "the reader is told: {page}");
    let lines = audited(&rita);
    for field in ["data", "returnvalue"] {
        assert!(
            lines.iter().any(|line| line.contains("action=reveal ")
                && line.contains(&format!("queue={QUEUE} "))
                && line.contains("job_id=welcome-1 ")
                && line.contains(&format!("field={field} "))
                && line.contains("key=k1 ")),
            "{field} opened and audited: {lines:?}"
        );
    }
    assert!(lines.iter().all(|line| !line.contains(&ada)), "{lines:?}");
}

#[tokio::test]
async fn a_payload_search_does_not_look_into_sealed_jobs_and_says_so() {
    audit_log();
    let redis = TestRedis::new("dash-sealed-search");
    let ada = address();
    let app = sealed_job(&redis, &ada).await;
    let rita = reader("rita");
    let addr = serve(Dashboard::new(&app, policy(rita.clone())).payload_search(true)).await;
    let search = |q: &str| {
        let q = q
            .replace(' ', "%20")
            .replace('=', "%3D")
            .replace('@', "%40");
        format!("/admin/queues/{QUEUE}?state=completed&q={q}")
    };

    // Not even for a reader who may reveal: a match would tell the value.
    for role in ["payloads", "reveal"] {
        let found = get(addr, &search(&format!("data.to = {ada}")), role).await;
        assert_eq!(found.status, 200, "{}", text(&found));
        let found = text(&found);
        assert!(!found.contains("data-job=\"welcome-1\""), "{role}: {found}");
        assert!(found.contains("0 matches"), "{role}: {found}");
        assert!(
            found.contains("Sealed jobs are not searched"),
            "{role}: {found}"
        );
        // The address once: in the search box, as the reader typed it.
        assert_eq!(found.matches(&ada).count(), 1, "{role}: {found}");
    }
    // The envelope's own fields are no payload either: its match is left out, and counted.
    let envelope = get(addr, &search("data.key = k1"), "payloads").await;
    assert_eq!(envelope.status, 200, "{}", text(&envelope));
    let envelope = text(&envelope);
    assert!(!envelope.contains("data-job=\"welcome-1\""), "{envelope}");
    assert!(
        envelope.contains("1 sealed job matched by the envelope alone"),
        "{envelope}"
    );
    assert!(
        audited(&rita)
            .iter()
            .all(|line| !line.contains("welcome-1")),
        "a search opens nothing"
    );
}

#[tokio::test]
async fn a_sealed_job_whose_key_is_not_in_the_keyring_shows_why_not_a_500() {
    audit_log();
    let redis = TestRedis::new("dash-sealed-unknown-key");
    let ada = address();
    sealed_job(&redis, &ada).await;
    // Another app on the same Redis, whose keyring holds k2 only.
    let other = redis
        .app(|b| {
            b.keyring(Keyring::new("k2", [2; 32]).unwrap())
                .external_queue(QUEUE)
        })
        .await;
    let rita = reader("rita");
    let addr = serve(Dashboard::new(&other, policy(rita.clone()))).await;

    let page = get(addr, JOB, "reveal").await;
    assert_eq!(page.status, 200, "{}", text(&page));
    let page = text(&page);
    assert!(
        page.contains("sealed with key `k1`, which the keyring does not hold"),
        "the typed error's words: {page}"
    );
    assert!(page.contains("<code class=\"key\">k1</code>"), "{page}");
    assert!(!page.contains(&ada), "{page}");
    // The attempt is audited too, as one that did not open.
    let lines = audited(&rita);
    assert!(
        lines.iter().any(|line| line.contains("action=reveal ")
            && line.contains("job_id=welcome-1 ")
            && line.contains("key=k1 ")
            && line.contains("did not open")),
        "{lines:?}"
    );
}

const NOTES: &str = "dash-sealed-notes";

/// A handler whose log line and error quote the address it was sent, as an upstream's
/// message can; the error long enough that a listing's cut (480 bytes) cuts its sealed
/// form.
async fn refuses(job: Job<serde_json::Value>) -> Result<(), JobError> {
    let to = job.data["to"].as_str().unwrap_or_default().to_owned();
    job.log(format!("sending to {to}")).await?;
    Err(JobError::retry(std::io::Error::other(format!(
        "the mail server refused {to}: {}",
        "550 5.1.1 mailbox unavailable; ".repeat(16)
    ))))
}

/// An app with keyring `k1` whose queue `NOTES` seals its payloads, failure reasons and
/// log lines, its handler [`refuses`].
async fn notes_app(redis: &TestRedis) -> QueueApp {
    redis
        .app(|b| {
            b.keyring(Keyring::new("k1", [1; 32]).unwrap())
                .encrypt_queue(NOTES)
                .encrypt_failures_and_logs(true)
                .processor(Processor::new(NOTES).any_job(refuses))
        })
        .await
}

/// The audit lines of `who` that record an opening of `field` of job `job` of `NOTES`
/// with key `k1`.
fn openings(who: &str, field: &str, job: &str) -> usize {
    audited(who)
        .iter()
        .filter(|line| {
            line.contains("action=reveal ")
                && line.contains(&format!("queue={NOTES} "))
                && line.contains(&format!("job_id={job} "))
                && line.contains(&format!("field={field} "))
                && line.contains("key=k1 ")
        })
        .count()
}

#[tokio::test]
async fn sealed_failures_and_log_lines_show_as_sealed_unless_revealed_and_each_opening_is_audited()
{
    audit_log();
    let redis = TestRedis::new("dash-sealed-notes");
    let app = notes_app(&redis).await;
    let q = app.queue::<serde_json::Value>(NOTES).unwrap();
    let ada = address();
    q.add(
        "welcome",
        serde_json::json!({ "to": ada }),
        JobOptions::new().job_id("notes-1").attempts(2),
    )
    .await
    .unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&q, "notes-1", JobState::Failed, SOON).await;
    workers.shutdown(SOON).await;
    assert_eq!(
        redis.keys_holding(&ada),
        Vec::<String>::new(),
        "no payload, reason, record or log line in clear"
    );
    let stored = redis.job_field(NOTES, "notes-1", "failedReason").unwrap();
    let envelope: serde_json::Value = serde_json::from_str(&stored).expect("an envelope");
    let ciphertext = envelope["data"].as_str().unwrap()[..40].to_owned();

    let rita = reader("rita");
    let addr = serve(Dashboard::new(&app, policy(rita.clone()))).await;
    let job = format!("/admin/queues/{NOTES}/jobs/notes-1");

    // Payloads, but no reveal: each record and log line sealed, with the key; neither
    // the address nor the envelope.
    let page = get(addr, &job, "payloads").await;
    assert_eq!(page.status, 200, "{}", text(&page));
    let page = text(&page);
    assert!(page.contains("Failures, oldest first"), "{page}");
    assert!(page.contains("sealed"), "{page}");
    // The payload, two records and two log lines.
    assert_eq!(
        page.matches("<code class=\"key\">k1</code>").count(),
        5,
        "{page}"
    );
    assert!(!page.contains(&ada), "{page}");
    assert!(!page.contains("aes-256-gcm"), "{page}");
    assert!(!page.contains(&ciphertext), "{page}");
    assert!(!page.contains("sending to"), "{page}");

    // With reveal: the payload, both attempts' records (each its reason) and both log
    // lines, opened; each opening audited, never the text.
    let page = get(addr, &job, "reveal").await;
    assert_eq!(page.status, 200, "{}", text(&page));
    let page = text(&page);
    assert_eq!(
        page.matches(&format!("the mail server refused {ada}"))
            .count(),
        2,
        "both attempts' records: {page}"
    );
    assert_eq!(
        page.matches(&format!("sending to {ada}")).count(),
        2,
        "both log lines: {page}"
    );
    assert!(!page.contains("aes-256-gcm"), "{page}");
    assert!(page.contains("audited"), "the reader is told: {page}");
    assert_eq!(openings(&rita, "stacktrace", "notes-1"), 2);
    assert_eq!(openings(&rita, "log", "notes-1"), 2);
    assert_eq!(openings(&rita, "data", "notes-1"), 1);
    // The reason is each record's first line: not read again on its own.
    assert_eq!(openings(&rita, "failedReason", "notes-1"), 0);
    let lines = audited(&rita);
    assert!(lines.iter().all(|line| !line.contains(&ada)), "{lines:?}");

    // The failed listing: sealed, to either reader, and nothing opened for it (the cut
    // sealed text included: its key is past the cut, its base64 shown nowhere).
    let before = audited(&rita).len();
    for role in ["payloads", "reveal"] {
        let listing = get(addr, &format!("/admin/queues/{NOTES}?state=failed"), role).await;
        assert_eq!(listing.status, 200, "{}", text(&listing));
        let listing = text(&listing);
        assert!(
            listing.contains("data-job=\"notes-1\""),
            "{role}: {listing}"
        );
        assert!(listing.contains(">sealed<"), "{role}: {listing}");
        assert!(!listing.contains(&ada), "{role}: {listing}");
        assert!(!listing.contains("aes-256-gcm"), "{role}: {listing}");
        assert!(!listing.contains(&ciphertext), "{role}: {listing}");
        assert!(!listing.contains("{&quot;"), "{role}: {listing}");
    }
    assert_eq!(audited(&rita).len(), before, "a listing opens nothing");

    // An app whose keyring does not hold k1: each text says why it does not open, the
    // page is no 500, and each attempt is audited.
    let other = redis
        .app(|b| {
            b.keyring(Keyring::new("k2", [2; 32]).unwrap())
                .external_queue(NOTES)
        })
        .await;
    let vera = reader("vera");
    let addr = serve(Dashboard::new(&other, policy(vera.clone()))).await;
    let page = get(addr, &job, "reveal").await;
    assert_eq!(page.status, 200, "{}", text(&page));
    let page = text(&page);
    assert_eq!(
        page.matches("sealed with key `k1`, which the keyring does not hold")
            .count(),
        5,
        "the payload, two records, two log lines: {page}"
    );
    assert!(!page.contains(&ada), "{page}");
    assert!(!page.contains("aes-256-gcm"), "{page}");
    for field in ["stacktrace", "log"] {
        assert_eq!(
            audited(&vera)
                .iter()
                .filter(|line| line.contains(&format!("field={field} "))
                    && line.contains("did not open"))
                .count(),
            2,
            "{field}"
        );
    }
}

#[tokio::test]
async fn a_flows_sealed_failure_reason_shows_as_sealed_unless_revealed_and_is_audited() {
    audit_log();
    let redis = TestRedis::new("dash-sealed-flow");
    let app = notes_app(&redis).await;
    let parents = app
        .queue::<serde_json::Value>("dash-sealed-parents")
        .unwrap();
    let q = app.queue::<serde_json::Value>(NOTES).unwrap();
    let ada = address();
    let flow = parents
        .flow_job("report", serde_json::json!({}))
        .options(JobOptions::new().job_id("report-1"))
        .child(
            OnChildFailure::IgnoreDependency,
            q.flow_job("welcome", serde_json::json!({ "to": ada }))
                .options(JobOptions::new().job_id("render-1")),
        );
    app.add_flow(flow).await.unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&q, "render-1", JobState::Failed, SOON).await;
    workers.shutdown(SOON).await;
    assert_eq!(redis.keys_holding(&ada), Vec::<String>::new());

    let rita = reader("rita");
    let addr = serve(Dashboard::new(&app, policy(rita.clone()))).await;
    let parent = "/admin/queues/dash-sealed-parents/jobs/report-1";
    let node = |page: &str| {
        page.split("<li>")
            .skip(1)
            .find(|li| li.contains("render-1"))
            .unwrap_or_else(|| panic!("render-1 in {page}"))
            .to_owned()
    };

    // The parent's page: the failed child sealed, with its key.
    let page = get(addr, parent, "payloads").await;
    assert_eq!(page.status, 200, "{}", text(&page));
    let page = text(&page);
    let child = node(&page);
    assert!(child.contains(">failed<"), "{child}");
    assert!(child.contains(">sealed<"), "{child}");
    assert!(child.contains("<code class=\"key\">k1</code>"), "{child}");
    assert!(!page.contains(&ada), "{page}");
    assert!(!page.contains("aes-256-gcm"), "{page}");

    // With reveal: opened, and audited as the child's.
    let page = text(&get(addr, parent, "reveal").await);
    let child = node(&page);
    assert!(
        child.contains(&format!("the mail server refused {ada}")),
        "{child}"
    );
    assert!(!page.contains("aes-256-gcm"), "{page}");
    assert_eq!(openings(&rita, "failedReason", "render-1"), 1);

    // The child's own page: its record, and its reason beside it in the flow, read and
    // opened once for both.
    let page = get(
        addr,
        &format!("/admin/queues/{NOTES}/jobs/render-1"),
        "reveal",
    )
    .await;
    assert_eq!(page.status, 200, "{}", text(&page));
    let page = text(&page);
    assert!(
        node(&page).contains(&format!("the mail server refused {ada}")),
        "{page}"
    );
    assert_eq!(
        page.matches(&format!("the mail server refused {ada}"))
            .count(),
        2,
        "its record and its node: {page}"
    );
    assert_eq!(openings(&rita, "failedReason", "render-1"), 2);
    assert_eq!(openings(&rita, "stacktrace", "render-1"), 1);
    assert_eq!(openings(&rita, "log", "render-1"), 1);
    let lines = audited(&rita);
    assert!(lines.iter().all(|line| !line.contains(&ada)), "{lines:?}");
}
