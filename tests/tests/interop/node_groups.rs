//! Fair groups with the real Node `bullmq`, 5.x and 6.x: a Node producer adds to a
//! group by the documented convention (`opts.group = { id, priority? }`, BullMQ Pro's
//! shape), our grouped worker takes those jobs in turn, and Node reads the group of a
//! job we added.
//!
//! A job waiting its group's turn lives in its group (`g:<id>:wait`), in none of
//! BullMQ's lists, as BullMQ Pro keeps it: open-source Bull Board's `BullMQAdapter`
//! neither counts nor lists it. Its `BullMQProAdapter` over `withGroups(queue)`
//! (`tests/node/groups.mjs`) does: a paused group's job under "paused", named with
//! its group.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queue_core::{
    app::Registrations, group::GroupLimits, Dep, Job, JobError, JobOptions, JobState, Processor,
    QueueApp,
};
use queue_tests::node::Bullmq;
use queue_tests::{wait_for_state, wait_until, PrivateRedis, TestRedis, SOON};

/// The ids of the jobs our worker started, in order.
#[derive(Default)]
struct Started(Mutex<Vec<String>>);

async fn run(job: Job<serde_json::Value>, started: Dep<Started>) -> Result<(), JobError> {
    started.0.lock().unwrap().push(job.id().to_owned());
    Ok(())
}

#[tokio::test]
async fn node_bullmq5_adds_to_groups_and_bull_boards_pro_adapter_lists_a_waiting_grouped_job() {
    node_groups(Bullmq::V5).await;
}

#[tokio::test]
async fn node_bullmq6_adds_to_groups_and_bull_boards_pro_adapter_lists_a_waiting_grouped_job() {
    node_groups(Bullmq::V6).await;
}

async fn node_groups(bullmq: Bullmq) {
    let redis = TestRedis::new(&format!("interop-groups-{}", bullmq.major()));
    let started = Arc::new(Started::default());
    let app = redis
        .app(|b| {
            b.provide_arc(started.clone()).processor(
                Processor::new("tenants")
                    .groups(GroupLimits::new().concurrency(1))
                    .any_job(run),
            )
        })
        .await;
    let q = app.queue::<serde_json::Value>("tenants").unwrap();
    q.pause_group("held").await.unwrap();

    // Node adds: a deep group, a small group (behind the deep one in `wait`), a job
    // of a paused group, and two with a priority inside their group.
    let mut jobs: Vec<serde_json::Value> = (0..8)
        .map(|n| {
            serde_json::json!({
                "name": "work", "data": {"n": n},
                "opts": {"jobId": format!("big-{n}"), "group": {"id": "big"}}
            })
        })
        .collect();
    jobs.push(serde_json::json!({
        "name": "work", "data": {}, "opts": {"jobId": "small-0", "group": {"id": "small"}}
    }));
    jobs.push(serde_json::json!({
        "name": "work", "data": {}, "opts": {"jobId": "held-0", "group": {"id": "held"}}
    }));
    for (id, priority) in [("ranked-low", 9), ("ranked-high", 1)] {
        jobs.push(serde_json::json!({
            "name": "work", "data": {},
            "opts": {"jobId": id, "group": {"id": "ranked", "priority": priority}}
        }));
    }
    let jobs = serde_json::to_string(&jobs).unwrap();
    let added = bullmq
        .run(redis.prefix(), &["produce", "tenants", &jobs])
        .await;
    assert_eq!(added.len(), 12, "{added:?}");

    let workers = app.start_workers().await.unwrap();
    wait_for_state(&q, "big-7", JobState::Completed, SOON).await;
    wait_for_state(&q, "small-0", JobState::Completed, SOON).await;
    wait_for_state(&q, "ranked-low", JobState::Completed, SOON).await;
    let order = started.0.lock().unwrap().clone();
    let position = |id: &str| order.iter().position(|o| o == id).unwrap();
    assert!(
        position("small-0") < 3,
        "the small group's job ran in the first turn, not behind the big group's 8: {order:?}"
    );
    assert!(
        position("ranked-high") < position("ranked-low"),
        "{order:?}"
    );
    assert!(!order.iter().any(|id| id == "held-0"));

    // Open-source Bull Board: the paused group's job waits in its group, in none of
    // BullMQ's lists, so no tab counts or lists it (every other job has completed).
    let lines = bullmq
        .run(redis.prefix(), &["board", "tenants", "latest"])
        .await;
    let board = lines.last().expect("Bull Board's view");
    let counts = &board["counts"];
    for status in ["waiting", "prioritized", "paused", "delayed", "active"] {
        // BullMQ 6 counts no "paused" (it dropped the state).
        let count = counts.get(status).map_or(0, |c| c.as_u64().unwrap());
        assert_eq!(count, 0, "{status}: {counts}");
    }
    assert!(
        !ids(&board["jobs"]).contains(&"held-0"),
        "{}",
        board["jobs"]
    );

    // Bull Board's BullMQProAdapter over our groups: the paused group, its job counted
    // and listed under "paused" with its group, and the group's jobs.
    let lines = bullmq
        .run(
            redis.prefix(),
            &["board-groups", "tenants", "paused", "held"],
        )
        .await;
    let [board, groups, held] = &lines[..] else {
        panic!("Bull Board's view, the groups and the group's jobs: {lines:?}")
    };
    assert_eq!(board["counts"]["paused"], 1, "{}", board["counts"]);
    assert_eq!(board["counts"]["waiting"], 0, "{}", board["counts"]);
    assert_eq!(ids(&board["jobs"]), ["held-0"], "{}", board["jobs"]);
    assert_eq!(board["jobs"][0]["groupId"], "held");
    assert_eq!(board["jobs"][0]["name"], "work (group: held)");
    // BullMQ 6 has no paused state, so Bull Board shows no "paused" tab for it: the
    // count is there, the job is listed only when the "paused" status is asked for.
    let tabs = board["statuses"].as_array().unwrap();
    assert_eq!(
        tabs.contains(&serde_json::json!("paused")),
        bullmq == Bullmq::V5,
        "{tabs:?}"
    );
    assert_eq!(
        groups["groups"],
        serde_json::json!({
            "waiting": [], "maxed": [], "limited": [],
            "paused": [{"id": "held", "count": 1}]
        })
    );
    assert_eq!(held["count"], 1, "{held}");
    assert_eq!(ids(&held["jobs"]), ["held-0"], "{held}");

    // Node reads the group of a job we add.
    q.add(
        "work",
        serde_json::json!({}),
        JobOptions::new()
            .group("from-rust")
            .priority(4)
            .job_id("rust-0"),
    )
    .await
    .unwrap();
    let read = bullmq
        .run(redis.prefix(), &["job", "tenants", "rust-0"])
        .await;
    let opts = &read.last().unwrap()["job"]["opts"];
    assert_eq!(opts["group"]["id"], "from-rust", "{opts}");
    assert_eq!(opts["group"]["priority"], 4, "{opts}");
    wait_until(SOON, "our grouped job to run", || async {
        (q.get_job_state("rust-0").await.unwrap() == Some(JobState::Completed)).then_some(())
    })
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());
}

/// The ids of the jobs Bull Board lists.
fn ids(jobs: &serde_json::Value) -> Vec<&str> {
    jobs.as_array()
        .unwrap()
        .iter()
        .filter_map(|j| j["id"].as_str())
        .collect()
}

async fn count(_: Job<serde_json::Value>, done: Dep<AtomicU64>) -> Result<(), JobError> {
    done.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// A grouped job Node BullMQ added (into `wait`, with `{ group: { id } }`) costs our
/// grouped worker at most 28 Redis commands a job (30.1 by this test before the batch's
/// one command each): every command the private Redis ran (`INFO commandstats`) while
/// the worker started, processed the jobs and shut down, over the jobs. One take in a
/// few adopts up to 500 such jobs into their groups,
/// reading each one's fields and filing it in its group's set, then adding the whole
/// batch to the set of grouped jobs waiting and their groups to the ring and the known
/// groups in one command each; then it is taken as any grouped job (about 25.6 commands).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grouped_job_node_bullmq_added_costs_at_most_28_commands() {
    const JOBS: usize = 4_000;
    const GROUPS: usize = 2_000;
    let redis = PrivateRedis::start();
    let jobs: Vec<serde_json::Value> = (0..JOBS)
        .map(|n| {
            let group = format!("tenant-{}", n % GROUPS);
            serde_json::json!({
                "name": "work", "data": n,
                "opts": {"group": {"id": group}, "removeOnComplete": true}
            })
        })
        .collect();
    // A command line's argument is bounded (128 KB): a thousand jobs a call.
    for chunk in jobs.chunks(1_000) {
        let chunk = serde_json::to_string(chunk).unwrap();
        let added = Bullmq::V6
            .run_on(&redis.url(), "adopted", &["produce", "adopted", &chunk])
            .await;
        assert_eq!(added.len(), 1_000);
    }
    let done = Arc::new(AtomicU64::new(0));
    let app = QueueApp::builder()
        .redis(redis.url())
        .prefix("adopted")
        .registrations(Registrations::None)
        .provide_arc(done.clone())
        .processor(
            Processor::new("adopted")
                .concurrency(10)
                .groups(GroupLimits::new())
                .any_job(count),
        )
        .build()
        .await
        .expect("the app builds");
    redis.reset_stats();
    let workers = app.start_workers().await.unwrap();
    wait_until(Duration::from_secs(60), "every job processed", || async {
        (done.load(Ordering::Relaxed) >= JOBS as u64).then_some(())
    })
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());
    let per_job = redis.commands_run() as f64 / JOBS as f64;
    println!("commands per job Node BullMQ added, {GROUPS} groups of two: {per_job:.1}");
    assert!(
        per_job <= MOST_PER_ADOPTED_JOB,
        "{per_job:.1} commands a job Node added"
    );
}

/// The most Redis commands a grouped job Node BullMQ added may cost our worker.
const MOST_PER_ADOPTED_JOB: f64 = 28.0;
