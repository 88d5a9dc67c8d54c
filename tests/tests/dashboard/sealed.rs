//! Sealed payloads on the dashboard: a job's page shows a sealed payload and return value
//! as sealed, with the key's id, to a reader who sees payloads; opens them only for one
//! the policy lets reveal them, and audits each opening; says why when one does not
//! open (its key not in this app's keyring) instead of failing; and a payload search
//! never looks into one, and says so.

use std::net::SocketAddr;

use axum::http::request::Parts;
use queue_core::encryption::Keyring;
use queue_core::{Job, JobError, JobOptions, JobState, Processor, QueueApp};
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
