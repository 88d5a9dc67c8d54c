//! An idle worker is woken when a group can start again: a worker that found nothing it
//! could start waits for a marker in `BZPOPMIN`, or until its wait ends (5 s), and
//! whatever gives a group its turn from outside a worker's own take adds the marker, as
//! an add does: a resumed group, a group's raised limit, a resumed queue whose waiting
//! jobs are all grouped, a slot given back by a worker that is closing.
//!
//! Each test runs on a private Redis, so that the only clients blocked in `BZPOPMIN`
//! are its own workers, and waits for a job well within the 5 s a worker that was not
//! woken would take.

use std::sync::Arc;
use std::time::Duration;

use queue_core::{
    app::Registrations, group::GroupLimits, Dep, Job, JobError, Processor, Queue, QueueApp,
};
use queue_tests::{command_calls, wait_until, PrivateRedis, SOON};

use crate::support::{add, Gate};

/// Well within the 5 s an idle worker waits before it looks again.
const AT_ONCE: Duration = Duration::from_millis(2_500);

/// Holds the job numbered 0 at the gate; the others run at once.
async fn run(job: Job<u32>, gate: Dep<Gate>) -> Result<(), JobError> {
    if job.data == 0 {
        gate.pass().await;
    }
    Ok(())
}

/// An app on the private Redis whose one processor takes `queue`'s jobs by group,
/// `concurrency` at once.
async fn app(
    redis: &PrivateRedis,
    queue: &str,
    concurrency: usize,
    limits: GroupLimits,
    gate: &Arc<Gate>,
) -> QueueApp {
    QueueApp::builder()
        .redis(redis.url())
        .prefix("wake")
        .registrations(Registrations::None)
        .provide_arc(gate.clone())
        .processor(
            Processor::new(queue)
                .concurrency(concurrency)
                .groups(limits)
                .any_job(run),
        )
        .build()
        .await
        .expect("the app builds")
}

async fn completed(queue: &Queue<u32>) -> u64 {
    queue.get_job_counts().await.expect("counts").completed
}

async fn until_completed(queue: &Queue<u32>, within: Duration, what: &str, count: u64) {
    wait_until(within, what, || async {
        (completed(queue).await == count).then_some(())
    })
    .await;
}

/// How many clients of `redis` are blocked in `BZPOPMIN`: workers waiting for a marker.
fn waiting_for_a_marker(redis: &PrivateRedis) -> usize {
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut redis.connection())
        .expect("CLIENT LIST");
    clients
        .lines()
        .filter(|client| {
            let field = |name: &str| {
                client
                    .split(' ')
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap_or("")
            };
            field("cmd=") == "bzpopmin" && field("flags=").contains('b')
        })
        .count()
}

/// Whether the queue's marker holds anything.
fn marked(redis: &PrivateRedis, queue: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(format!("wake:{queue}:marker"))
        .query::<u32>(&mut redis.connection())
        .expect("EXISTS")
        == 1
}

async fn until_idle(redis: &PrivateRedis, what: &str) {
    wait_until(SOON, what, || async {
        (waiting_for_a_marker(redis) > 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn resuming_a_group_or_raising_its_limit_wakes_an_idle_worker() {
    let redis = PrivateRedis::start();
    let app = app(
        &redis,
        "group",
        2,
        GroupLimits::new(),
        &Arc::new(Gate::shut()),
    )
    .await;
    let q = app.queue::<u32>("group").unwrap();
    q.pause_group("held").await.unwrap();
    add(&q, "held", 1..2).await;
    let workers = app.start_workers().await.unwrap();
    until_idle(&redis, "the worker idle, the group paused").await;
    q.resume_group("held").await.unwrap();
    until_completed(&q, AT_ONCE, "the resumed group's job", 1).await;

    // One start an hour: of two jobs added, one starts and the other waits out the
    // window; a limit of two lets it start.
    let hourly = |max| GroupLimits::new().rate(max, Duration::from_secs(3600));
    q.set_group_limits("held", hourly(1)).await.unwrap();
    add(&q, "held", 2..4).await;
    until_completed(&q, SOON, "the window's one start", 2).await;
    until_idle(&redis, "the worker idle, the group at its limit").await;
    q.set_group_limits("held", hourly(2)).await.unwrap();
    until_completed(&q, AT_ONCE, "the start the raised limit allows", 3).await;
    assert!(workers.shutdown(SOON).await.is_clean());
}

/// BullMQ's resume adds the marker when `wait` or `prioritized` holds jobs; grouped
/// jobs wait in their groups.
#[tokio::test]
async fn resuming_the_queue_wakes_an_idle_worker_for_its_grouped_jobs() {
    let redis = PrivateRedis::start();
    let app = app(
        &redis,
        "queue",
        2,
        GroupLimits::new(),
        &Arc::new(Gate::shut()),
    )
    .await;
    let q = app.queue::<u32>("queue").unwrap();
    q.pause().await.unwrap();
    add(&q, "a", 1..3).await;
    let workers = app.start_workers().await.unwrap();
    until_idle(&redis, "the worker idle, the queue paused").await;
    assert_eq!(completed(&q).await, 0, "a paused queue starts nothing");
    q.resume().await.unwrap();
    until_completed(&q, AT_ONCE, "the resumed queue's grouped jobs", 2).await;
    assert!(workers.shutdown(SOON).await.is_clean());
}

/// A worker that is closing gives its last slot back without taking a job: the group
/// that waited at its concurrency is another worker's to start, now.
#[tokio::test]
async fn a_slot_given_back_by_a_closing_worker_wakes_another() {
    let redis = PrivateRedis::start();
    let one_at_once = GroupLimits::new().concurrency(1);
    let gate = Arc::new(Gate::shut());
    // One job at once: while job 0 runs, this worker does not wait for a marker.
    let closing = app(&redis, "slot", 1, one_at_once, &gate).await;
    let staying = app(&redis, "slot", 2, one_at_once, &gate).await;
    let q = closing.queue::<u32>("slot").unwrap();
    add(&q, "g", 0..2).await;
    let closing_workers = closing.start_workers().await.unwrap();
    // Job 0 runs, held at the gate; the group waits at its concurrency with job 1.
    wait_until(SOON, "job 0 running", || async {
        (q.get_job_counts().await.expect("counts").active == 1).then_some(())
    })
    .await;
    let staying_workers = staying.start_workers().await.unwrap();
    until_idle(&redis, "the staying worker idle, the group full").await;
    // Closing writes a marker of its own (to wake its own worker, were it waiting):
    // the staying worker takes it, finds the group still full and waits again, before
    // job 0 ends and gives its slot back.
    let before = command_calls(&mut redis.connection(), "zadd").0;
    let closed = tokio::spawn(async move { closing_workers.shutdown(SOON).await.is_clean() });
    wait_until(SOON, "the closing worker's marker taken", || async {
        let taken =
            command_calls(&mut redis.connection(), "zadd").0 > before && !marked(&redis, "slot");
        (taken && waiting_for_a_marker(&redis) == 1).then_some(())
    })
    .await;
    gate.open_for(1);
    until_completed(&q, AT_ONCE, "job 1, on the staying worker", 2).await;
    assert!(closed.await.unwrap(), "the closing worker stopped cleanly");
    assert!(staying_workers.shutdown(SOON).await.is_clean());
}
