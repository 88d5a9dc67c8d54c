//! Sealed payloads across languages (`queue_core::encryption`, with the Node module
//! `tests/node/sealed.mjs` on BullMQ 5.x and 6.x, and the Python one
//! `tests/python/sealed.py`), every side reading one keyring text: jobs a Node or
//! Python producer seals run opened on our worker, which seals its result; jobs we seal
//! run opened on a Node worker, whose sealed result we read opened; an envelope we seal
//! opens on the other side for its queue and field only; and a job sealed with a key
//! our keyring lacks fails once, naming the key. Through all of it, Redis holds no
//! address in clear.

use std::time::Duration;

use queue_core::encryption::Keyring;
use queue_core::{Job, JobError, JobOptions, JobOutcome, JobState, Processor};
use queue_tests::node::Bullmq;
use queue_tests::{python, wait_for_state, TestRedis, SOON};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The keyring every side reads, in its text form (`QUEUE_KEYS`): `k1`, 32 bytes of 1.
const KEYS: &str = "k1=AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
/// A keyring our apps do not hold: `k9`, 32 bytes of 9.
const FOREIGN_KEYS: &str = "k9=CQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk=";
/// The queue each test seals (every test has its own prefix).
const QUEUE: &str = "sealed-mail";
/// As long as `Bullmq::run` and `python::run` give a peer.
const PEER_DEADLINE: Duration = Duration::from_secs(30);

fn keyring() -> Keyring {
    Keyring::parse(KEYS).expect("the shared keyring text parses")
}

/// An address no other test writes, so that finding it in Redis means this test's job
/// left it in clear.
fn address(label: &str) -> String {
    format!("{label}-{}@example.com", uuid::Uuid::new_v4().simple())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Welcome {
    to: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Sent {
    to: String,
    by: String,
}

async fn send(job: Job<Welcome>) -> Result<Sent, JobError> {
    Ok(Sent {
        to: job.data.to.clone(),
        by: "rust".into(),
    })
}

/// An app that seals `QUEUE` and runs it with `send`.
async fn sealing_worker(redis: &TestRedis) -> queue_core::QueueApp {
    redis
        .app(|b| {
            b.keyring(keyring())
                .encrypt_queue(QUEUE)
                .processor(Processor::new(QUEUE).job("welcome", send))
        })
        .await
}

/// A field of job `id` of `QUEUE` as Redis holds it, which must be an envelope sealed
/// with `k1`.
fn envelope(redis: &TestRedis, id: &str, field: &str) -> Value {
    let stored = redis
        .job_field(QUEUE, id, field)
        .unwrap_or_else(|| panic!("job {id} has a {field}"));
    let value: Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(value["sealed"], "aes-256-gcm/1", "{id}'s {field}: {value}");
    assert_eq!(value["key"], "k1", "{id}'s {field}: {value}");
    value
}

fn assert_nowhere_in_clear(redis: &TestRedis, addresses: &[&str]) {
    for address in addresses {
        assert_eq!(
            redis.keys_holding(address),
            Vec::<String>::new(),
            "{address} in clear"
        );
    }
}

/// Another BullMQ client that seals with its module and the keyring text it is given.
#[derive(Debug, Clone, Copy)]
enum Peer {
    Node(Bullmq),
    Python,
}

impl Peer {
    fn label(self) -> String {
        match self {
            Peer::Node(bullmq) => format!("node{}", bullmq.major()),
            Peer::Python => "python".into(),
        }
    }

    /// Runs a peer command to completion with `keys` in `QUEUE_KEYS`; its lines.
    async fn run(self, prefix: &str, args: &[&str], keys: &str) -> Vec<Value> {
        match self {
            Peer::Node(bullmq) => {
                let child = bullmq.spawn_with_keys(prefix, args, keys);
                queue_tests::node::output(child, PEER_DEADLINE).await
            }
            Peer::Python => python::run_with_keys(prefix, args, keys).await,
        }
    }

    /// What the peer's `open-sealed` says of `value` as `field` of `queue`.
    async fn open(self, prefix: &str, queue: &str, field: &str, value: &Value) -> Value {
        let value = value.to_string();
        let mut lines = self
            .run(prefix, &["open-sealed", queue, field, &value], KEYS)
            .await;
        assert_eq!(lines.len(), 1, "{lines:?}");
        lines.remove(0)
    }
}

#[tokio::test]
async fn jobs_node_seals_run_opened_on_our_worker_and_no_address_is_in_clear() {
    peer_sealed_jobs_run_here(Peer::Node(Bullmq::V5)).await;
}

#[tokio::test]
async fn jobs_node6_seals_run_opened_on_our_worker_and_no_address_is_in_clear() {
    peer_sealed_jobs_run_here(Peer::Node(Bullmq::V6)).await;
}

#[tokio::test]
async fn jobs_python_seals_run_opened_on_our_worker_and_no_address_is_in_clear() {
    peer_sealed_jobs_run_here(Peer::Python).await;
}

/// The peer's producer seals two jobs (one with an id it chose, one without); our typed
/// handler reads them opened and returns a result we seal.
async fn peer_sealed_jobs_run_here(peer: Peer) {
    let redis = TestRedis::new(&format!("sealed-from-{}", peer.label()));
    let (ada, lin) = (address("ada"), address("lin"));
    let jobs = json!([
        {"name": "welcome", "data": {"to": ada}, "opts": {"jobId": "peer-ada"}},
        {"name": "welcome", "data": {"to": lin}}
    ]);
    let added = peer
        .run(
            redis.prefix(),
            &["produce-sealed", QUEUE, &jobs.to_string()],
            KEYS,
        )
        .await;
    assert_eq!(added[0]["added"], "peer-ada", "{added:?}");
    let auto_id = added[1]["added"].as_str().unwrap().to_owned();
    assert_nowhere_in_clear(&redis, &[&ada, &lin]);
    envelope(&redis, "peer-ada", "data");

    let app = sealing_worker(&redis).await;
    let q = app.queue::<Welcome>(QUEUE).unwrap();
    let workers = app.start_workers().await.unwrap();
    for id in ["peer-ada", auto_id.as_str()] {
        wait_for_state(&q, id, JobState::Completed, SOON).await;
    }
    workers.shutdown(SOON).await;

    assert_nowhere_in_clear(&redis, &[&ada, &lin]);
    for (id, to) in [("peer-ada", &ada), (auto_id.as_str(), &lin)] {
        envelope(&redis, id, "returnvalue");
        let stored = q.get_job(id).await.unwrap().unwrap();
        assert_eq!(stored.sealed_with(), Some("k1"));
        let opened = q.open(stored).unwrap();
        assert_eq!(
            opened.data_as::<Welcome>().unwrap(),
            Welcome { to: to.clone() }
        );
        assert_eq!(
            opened.return_value,
            Some(json!({"to": to, "by": "rust"})),
            "our handler read {id}'s data opened"
        );
        assert_eq!(opened.attempts_made, 1);
    }
}

#[tokio::test]
async fn jobs_we_seal_run_opened_on_a_node_worker_whose_sealed_result_we_read() {
    our_sealed_jobs_run_on_node(Bullmq::V5).await;
}

#[tokio::test]
async fn jobs_we_seal_run_opened_on_a_node6_worker_whose_sealed_result_we_read() {
    our_sealed_jobs_run_on_node(Bullmq::V6).await;
}

async fn our_sealed_jobs_run_on_node(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("sealed-to-node{}", bullmq.major()));
    // No processor of ours: the queue's workers are Node's.
    let app = redis
        .app(|b| {
            b.keyring(keyring())
                .external_queue(QUEUE)
                .encrypt_queue(QUEUE)
        })
        .await;
    let q = app.queue::<Welcome>(QUEUE).unwrap();
    let (ada, lin) = (address("ada"), address("lin"));
    let mut added = Vec::new();
    for (id, to) in [("rust-ada", &ada), ("rust-lin", &lin)] {
        let job = q
            .add(
                "welcome",
                Welcome { to: to.clone() },
                JobOptions::new().job_id(id),
            )
            .await
            .unwrap();
        added.push(job);
    }
    assert_nowhere_in_clear(&redis, &[&ada, &lin]);

    let worker = bullmq.spawn_with_keys(redis.prefix(), &["work-sealed", QUEUE, "2"], KEYS);
    // Waiting while Node works: the outcome comes from the completed event, opened.
    for (job, to) in added.iter().zip([&ada, &lin]) {
        assert_eq!(
            job.wait(SOON).await.unwrap(),
            JobOutcome::Completed(json!({"handledBy": "node", "echo": {"to": to}})),
            "{}",
            job.id
        );
    }
    let seen = queue_tests::node::output(worker, PEER_DEADLINE).await;
    for (id, to) in [("rust-ada", &ada), ("rust-lin", &lin)] {
        let opened = seen
            .iter()
            .find(|l| l["opened"]["id"] == id)
            .unwrap_or_else(|| panic!("node opened {id}: {seen:?}"));
        assert_eq!(
            opened["opened"],
            json!({"id": id, "name": "welcome", "data": {"to": to}})
        );
        envelope(&redis, id, "returnvalue");
    }
    assert_nowhere_in_clear(&redis, &[&ada, &lin]);
    let done = q
        .open(q.get_job("rust-ada").await.unwrap().unwrap())
        .unwrap();
    assert_eq!(
        done.return_value,
        Some(json!({"handledBy": "node", "echo": {"to": ada}}))
    );
}

#[tokio::test]
async fn node_opens_what_we_seal_for_its_queue_and_field_only() {
    peer_opens_what_we_seal(Peer::Node(Bullmq::V5)).await;
}

#[tokio::test]
async fn node6_opens_what_we_seal_for_its_queue_and_field_only() {
    peer_opens_what_we_seal(Peer::Node(Bullmq::V6)).await;
}

#[tokio::test]
async fn python_opens_what_we_seal_for_its_queue_and_field_only() {
    peer_opens_what_we_seal(Peer::Python).await;
}

/// Our job's data and our handler's result, as Redis holds them, through the peer's
/// `open-sealed`: each opens as what it is, and neither as the other nor for another
/// queue.
async fn peer_opens_what_we_seal(peer: Peer) {
    let redis = TestRedis::new(&format!("sealed-cross-{}", peer.label()));
    let app = sealing_worker(&redis).await;
    let q = app.queue::<Welcome>(QUEUE).unwrap();
    let workers = app.start_workers().await.unwrap();
    let ada = address("ada");
    let added = q
        .add(
            "welcome",
            Welcome { to: ada.clone() },
            JobOptions::new().job_id("ours"),
        )
        .await
        .unwrap();
    assert!(matches!(
        added.wait(SOON).await.unwrap(),
        JobOutcome::Completed(_)
    ));
    workers.shutdown(SOON).await;
    let data = envelope(&redis, "ours", "data");
    let result = envelope(&redis, "ours", "returnvalue");

    let prefix = redis.prefix();
    assert_eq!(
        peer.open(prefix, QUEUE, "data", &data).await,
        json!({"opened": {"to": ada}})
    );
    assert_eq!(
        peer.open(prefix, QUEUE, "returnvalue", &result).await,
        json!({"opened": {"to": ada, "by": "rust"}})
    );
    for (queue, field, value) in [
        (QUEUE, "returnvalue", &data),
        (QUEUE, "data", &result),
        ("sealed-other", "data", &data),
    ] {
        let refused = peer.open(prefix, queue, field, value).await;
        let error = refused["error"].as_str().unwrap_or_else(|| {
            panic!(
                "{} opened a {field} of {queue} it should not: {refused}",
                peer.label()
            )
        });
        assert!(error.contains("does not open"), "{error}");
        assert!(error.contains("k1"), "{error}");
    }
}

#[tokio::test]
async fn a_job_node_seals_with_a_key_we_lack_fails_once_naming_the_key() {
    foreign_key_fails_here(Bullmq::V5).await;
}

#[tokio::test]
async fn a_job_node6_seals_with_a_key_we_lack_fails_once_naming_the_key() {
    foreign_key_fails_here(Bullmq::V6).await;
}

async fn foreign_key_fails_here(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("sealed-foreign-node{}", bullmq.major()));
    let ada = address("ada");
    let jobs = json!([
        {"name": "welcome", "data": {"to": ada}, "opts": {"jobId": "foreign", "attempts": 3}}
    ]);
    Peer::Node(bullmq)
        .run(
            redis.prefix(),
            &["produce-sealed", QUEUE, &jobs.to_string()],
            FOREIGN_KEYS,
        )
        .await;

    let app = sealing_worker(&redis).await;
    let q = app.queue::<Welcome>(QUEUE).unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&q, "foreign", JobState::Failed, SOON).await;
    workers.shutdown(SOON).await;
    let failed = q.get_job("foreign").await.unwrap().unwrap();
    assert_eq!(failed.sealed_with(), Some("k9"));
    let reason = failed.failed_reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("sealed with key `k9`, which the keyring does not hold"),
        "{reason}"
    );
    assert_eq!(
        (failed.attempts_made, failed.max_attempts),
        (1, 3),
        "no retry can open it"
    );
    assert_eq!(failed.return_value, None);
    assert_nowhere_in_clear(&redis, &[&ada]);
}
