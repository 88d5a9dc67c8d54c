//! Fair groups in one process: round robin across groups, per-group concurrency and
//! rate limits over several workers, pausing a group, delayed jobs holding no slot,
//! listing groups, and many groups. The multi-process chaos case is in
//! `group/chaos.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_core::{
    group::GroupLimits, queue::BulkJob, Dep, Job, JobError, JobOptions, JobState, Processor, Queue,
};
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};
use serde::{Deserialize, Serialize};

/// A job's payload names its group, so that the handler can count by group.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Work {
    group: String,
    sleep_ms: u64,
}

/// What the handlers saw: the order of starts, and per group the jobs running now
/// and the most that ever ran at once.
#[derive(Default)]
struct Seen {
    starts: Mutex<Vec<(String, String, Instant)>>,
    running: Mutex<HashMap<String, usize>>,
    most: Mutex<HashMap<String, usize>>,
    runs: Mutex<HashMap<String, usize>>,
    /// Jobs whose options did not name the group their payload says.
    misread: Mutex<Vec<String>>,
}

impl Seen {
    fn started_groups(&self) -> Vec<String> {
        self.starts
            .lock()
            .unwrap()
            .iter()
            .map(|(g, _, _)| g.clone())
            .collect()
    }

    fn most(&self, group: &str) -> usize {
        self.most.lock().unwrap().get(group).copied().unwrap_or(0)
    }
}

async fn work(job: Job<Work>, seen: Dep<Seen>) -> Result<(), JobError> {
    let group = job.data.group.clone();
    if job.options().get_group() != Some(group.as_str()) {
        seen.misread.lock().unwrap().push(job.id().to_owned());
    }
    seen.starts
        .lock()
        .unwrap()
        .push((group.clone(), job.id().to_owned(), Instant::now()));
    *seen
        .runs
        .lock()
        .unwrap()
        .entry(job.id().to_owned())
        .or_default() += 1;
    {
        let mut running = seen.running.lock().unwrap();
        let now = running.entry(group.clone()).or_default();
        *now += 1;
        let mut most = seen.most.lock().unwrap();
        let top = most.entry(group.clone()).or_default();
        *top = (*top).max(*now);
    }
    tokio::time::sleep(Duration::from_millis(job.data.sleep_ms)).await;
    *seen.running.lock().unwrap().get_mut(&group).unwrap() -= 1;
    Ok(())
}

fn grouped(queue: &str, concurrency: usize, limits: GroupLimits) -> Processor {
    Processor::new(queue)
        .concurrency(concurrency)
        .groups(limits)
        .job("work", work)
}

/// `count` jobs of `group`, ids `<group>-<n>`.
fn jobs(group: &str, count: usize, sleep_ms: u64) -> Vec<BulkJob<Work>> {
    (0..count)
        .map(|n| {
            BulkJob::new(
                "work",
                Work {
                    group: group.to_owned(),
                    sleep_ms,
                },
            )
            .options(
                JobOptions::new()
                    .group(group)
                    .job_id(format!("{group}-{n}")),
            )
        })
        .collect()
}

async fn add_all(queue: &Queue<Work>, jobs: Vec<BulkJob<Work>>) {
    let mut jobs = jobs.into_iter().peekable();
    while jobs.peek().is_some() {
        let chunk: Vec<_> = jobs.by_ref().take(1_000).collect();
        queue.add_bulk(chunk).await.expect("add_bulk");
    }
}

async fn completed(queue: &Queue<Work>) -> u64 {
    queue.get_job_counts().await.expect("counts").completed
}

#[tokio::test]
async fn groups_take_turns_so_a_small_group_does_not_wait_for_a_deep_one() {
    let redis = TestRedis::new("groups-turns");
    let seen = Arc::new(Seen::default());
    let app = redis
        .app(|b| {
            b.provide_arc(seen.clone())
                .processor(grouped("turns", 1, GroupLimits::new()))
        })
        .await;
    let q = app.queue::<Work>("turns").unwrap();
    add_all(&q, jobs("deep", 50, 0)).await;
    for small in ["b", "c", "d"] {
        add_all(&q, jobs(small, 2, 0)).await;
    }
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "56 jobs done", || async {
        (completed(&q).await == 56).then_some(())
    })
    .await;
    let order = seen.started_groups();
    // One worker, one job at a time: deep, b, c, d, deep, b, c, d, then deep alone.
    let last_small = order.iter().rposition(|g| g != "deep").unwrap();
    assert!(
        last_small < 8,
        "the small groups' jobs ran within two turns, not behind the deep group: {order:?}"
    );
    assert!(workers.shutdown(SOON).await.is_clean());
}

/// The fairness case: group A has 20,000 jobs waiting, then 50 groups of 10
/// jobs each are added. Time is counted in starts (the worker's throughput is the
/// same whoever's job it runs): the small groups' 500 jobs alone take 500 starts, so
/// "within twice that time" is at most 500 of A's starts between their add and the
/// last of them starting. A must keep moving meanwhile.
#[tokio::test]
async fn fifty_small_groups_finish_within_twice_their_own_time_beside_a_deep_group() {
    let redis = TestRedis::new("groups-fair");
    let seen = Arc::new(Seen::default());
    let app = redis
        .app(|b| {
            b.provide_arc(seen.clone())
                .processor(grouped("fair", 10, GroupLimits::new()))
        })
        .await;
    let q = app.queue::<Work>("fair").unwrap();
    add_all(&q, jobs("a", 20_000, 1)).await;
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "group a to be running", || async {
        (seen.starts.lock().unwrap().len() > 100).then_some(())
    })
    .await;

    let before = seen.starts.lock().unwrap().len();
    let mut small = Vec::new();
    for g in 0..50 {
        small.extend(jobs(&format!("small{g}"), 10, 1));
    }
    add_all(&q, small).await;
    wait_until(
        Duration::from_secs(60),
        "the small groups' 500 jobs",
        || async {
            let starts = seen.starts.lock().unwrap();
            let small = starts[before..].iter().filter(|(g, _, _)| g != "a").count();
            (small == 500).then_some(())
        },
    )
    .await;
    let starts = seen.started_groups();
    let last_small = starts.iter().rposition(|g| g != "a").unwrap();
    let a_between = starts[before..=last_small]
        .iter()
        .filter(|g| *g == "a")
        .count();
    assert!(
        a_between <= 500,
        "group a started {a_between} jobs while the small groups' 500 ran: more than twice their own time"
    );
    assert!(a_between > 0, "group a kept moving");
    let a_then = seen.starts.lock().unwrap().len();
    wait_until(SOON, "group a to go on after the small groups", || async {
        (seen.starts.lock().unwrap().len() > a_then + 50).then_some(())
    })
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn a_group_concurrency_holds_over_several_workers_and_other_groups_run_beside_it() {
    let redis = TestRedis::new("groups-conc");
    let seen = Arc::new(Seen::default());
    let limits = GroupLimits::new().concurrency(2);
    let mut apps = Vec::new();
    for _ in 0..3 {
        apps.push(
            redis
                .app(|b| {
                    b.provide_arc(seen.clone())
                        .processor(grouped("conc", 10, limits))
                })
                .await,
        );
    }
    let q = apps[0].queue::<Work>("conc").unwrap();
    add_all(&q, jobs("busy", 40, 30)).await;
    add_all(&q, jobs("other", 40, 30)).await;
    let mut workers = Vec::new();
    for app in &apps {
        workers.push(app.start_workers().await.unwrap());
    }
    wait_until(Duration::from_secs(30), "80 jobs done", || async {
        (completed(&q).await == 80).then_some(())
    })
    .await;
    assert_eq!(
        seen.most("busy"),
        2,
        "never more than 2 at once, and 2 reached"
    );
    assert_eq!(seen.most("other"), 2);
    let page = q.groups(None, 10).await.unwrap();
    assert!(
        page.groups.is_empty(),
        "finished groups are forgotten: {page:?}"
    );
    for w in workers {
        assert!(w.shutdown(SOON).await.is_clean());
    }
}

#[tokio::test]
async fn a_group_rate_limit_holds_over_several_workers_within_one_window() {
    let redis = TestRedis::new("groups-rate");
    let seen = Arc::new(Seen::default());
    let per = Duration::from_millis(500);
    let limits = GroupLimits::new().rate(4, per);
    let mut apps = Vec::new();
    for _ in 0..2 {
        apps.push(
            redis
                .app(|b| {
                    b.provide_arc(seen.clone())
                        .processor(grouped("rate", 5, limits))
                })
                .await,
        );
    }
    let q = apps[0].queue::<Work>("rate").unwrap();
    add_all(&q, jobs("limited", 20, 0)).await;
    // A group with a limit of its own, higher: it is not held up by the other's.
    q.set_group_limits("free", GroupLimits::new().rate(1_000, per))
        .await
        .unwrap();
    add_all(&q, jobs("free", 20, 0)).await;
    let mut workers = Vec::new();
    for app in &apps {
        workers.push(app.start_workers().await.unwrap());
    }
    wait_until(Duration::from_secs(30), "40 jobs done", || async {
        (completed(&q).await == 40).then_some(())
    })
    .await;
    let starts = seen.starts.lock().unwrap().clone();
    let limited: Vec<Instant> = starts
        .iter()
        .filter(|(g, _, _)| g == "limited")
        .map(|(_, _, at)| *at)
        .collect();
    let free: Vec<Instant> = starts
        .iter()
        .filter(|(g, _, _)| g == "free")
        .map(|(_, _, at)| *at)
        .collect();
    // Fixed windows: any stretch of one window holds at most two windows' starts.
    for (i, first) in limited.iter().enumerate() {
        let within = limited[i..]
            .iter()
            .take_while(|at| at.duration_since(*first) < per)
            .count();
        assert!(within <= 8, "{within} starts within one window");
    }
    // 20 starts at 4 per window need at least 4 windows after the first.
    let spread = limited.last().unwrap().duration_since(limited[0]);
    assert!(spread >= per * 3, "20 starts spread over {spread:?}");
    let free_done = free.last().unwrap().duration_since(free[0]);
    assert!(
        free_done < spread,
        "the free group ({free_done:?}) did not wait on the limited one ({spread:?})"
    );
    for w in workers {
        assert!(w.shutdown(SOON).await.is_clean());
    }
}

#[tokio::test]
async fn a_paused_group_waits_while_others_run_and_runs_when_resumed() {
    let redis = TestRedis::new("groups-pause");
    let seen = Arc::new(Seen::default());
    let app = redis
        .app(|b| {
            b.provide_arc(seen.clone())
                .processor(grouped("pause", 4, GroupLimits::new()))
        })
        .await;
    let q = app.queue::<Work>("pause").unwrap();
    q.pause_group("held").await.unwrap();
    add_all(&q, jobs("held", 5, 0)).await;
    add_all(&q, jobs("going", 5, 0)).await;
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "the running group's 5 jobs", || async {
        (completed(&q).await == 5).then_some(())
    })
    .await;
    let page = q.groups(None, 10).await.unwrap();
    let held = page.groups.iter().find(|g| g.id == "held").unwrap();
    assert!(held.paused);
    assert_eq!(held.waiting, 5);
    assert_eq!(
        q.get_job_state("held-0").await.unwrap(),
        Some(JobState::Waiting),
        "a job waiting its group's turn is waiting"
    );
    assert_eq!(
        q.get_job_counts().await.unwrap().waiting,
        5,
        "the paused group's jobs count as waiting"
    );
    assert!(seen.started_groups().iter().all(|g| g == "going"));
    q.resume_group("held").await.unwrap();
    wait_until(SOON, "the resumed group's jobs", || async {
        (completed(&q).await == 10).then_some(())
    })
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn a_group_with_only_delayed_jobs_holds_no_slot_and_delays_keep_their_meaning() {
    let redis = TestRedis::new("groups-delay");
    let seen = Arc::new(Seen::default());
    let app = redis
        .app(|b| {
            b.provide_arc(seen.clone()).processor(grouped(
                "delay",
                4,
                GroupLimits::new().concurrency(1),
            ))
        })
        .await;
    let q = app.queue::<Work>("delay").unwrap();
    let work = Work {
        group: "g".into(),
        sleep_ms: 0,
    };
    let workers = app.start_workers().await.unwrap();
    q.add(
        "work",
        work.clone(),
        JobOptions::new()
            .group("g")
            .job_id("later")
            .delay(Duration::from_millis(1_500)),
    )
    .await
    .unwrap();
    q.add(
        "work",
        work.clone(),
        JobOptions::new().group("g").job_id("now"),
    )
    .await
    .unwrap();
    wait_for_state(&q, "now", JobState::Completed, SOON).await;
    assert_eq!(
        q.get_job_state("later").await.unwrap(),
        Some(JobState::Delayed),
        "the delayed job waits its delay"
    );
    wait_for_state(&q, "later", JobState::Completed, SOON).await;
    let order: Vec<String> = seen
        .starts
        .lock()
        .unwrap()
        .iter()
        .map(|(_, id, _)| id.clone())
        .collect();
    assert_eq!(order, ["now", "later"]);
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn priorities_order_jobs_inside_a_group() {
    let redis = TestRedis::new("groups-prio");
    let seen = Arc::new(Seen::default());
    let app = redis
        .app(|b| {
            b.provide_arc(seen.clone())
                .processor(grouped("prio", 1, GroupLimits::new()))
        })
        .await;
    let q = app.queue::<Work>("prio").unwrap();
    for (id, priority) in [("p-low", 9), ("p-high", 1), ("p-mid", 5)] {
        q.add(
            "work",
            Work {
                group: "g".into(),
                sleep_ms: 0,
            },
            JobOptions::new().group("g").job_id(id).priority(priority),
        )
        .await
        .unwrap();
    }
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "3 jobs", || async {
        (completed(&q).await == 3).then_some(())
    })
    .await;
    let order: Vec<String> = seen
        .starts
        .lock()
        .unwrap()
        .iter()
        .map(|(_, id, _)| id.clone())
        .collect();
    assert_eq!(order, ["p-high", "p-mid", "p-low"]);
    assert_eq!(
        redis.job_field("prio", "p-high", "priority").as_deref(),
        Some("1"),
        "the job's priority is where Bull Board reads it"
    );
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn groups_are_listed_a_bounded_page_at_a_time() {
    let redis = TestRedis::new("groups-list");
    let app = redis
        .app(|b| {
            b.provide(Seen::default())
                .processor(grouped("list", 1, GroupLimits::new()))
        })
        .await;
    let q = app.queue::<Work>("list").unwrap();
    for g in ["g1", "g2", "g3", "g4", "g5"] {
        q.set_group_limits(g, GroupLimits::new().concurrency(3))
            .await
            .unwrap();
    }
    let first = q.groups(None, 2).await.unwrap();
    assert_eq!(
        first
            .groups
            .iter()
            .map(|g| g.id.as_str())
            .collect::<Vec<_>>(),
        ["g1", "g2"]
    );
    assert_eq!(first.groups[0].limits.get_concurrency(), Some(3));
    let second = q.groups(first.next.as_deref(), 2).await.unwrap();
    assert_eq!(
        second
            .groups
            .iter()
            .map(|g| g.id.as_str())
            .collect::<Vec<_>>(),
        ["g3", "g4"]
    );
    let last = q.groups(second.next.as_deref(), 2).await.unwrap();
    assert_eq!(last.groups.len(), 1);
    assert_eq!(last.next, None);
    assert!(q.groups(None, 0).await.is_err());
    assert!(q
        .groups(None, queue_core::group::MAX_GROUP_PAGE + 1)
        .await
        .is_err());
    assert!(q.pause_group("").await.is_err());
    assert!(q
        .set_group_limits("g1", GroupLimits::new().concurrency(0))
        .await
        .is_err());
}

#[tokio::test]
async fn ten_thousand_groups_of_two_jobs_each_run_every_job_once() {
    let redis = TestRedis::new("groups-many");
    let seen = Arc::new(Seen::default());
    let app = redis
        .app(|b| {
            b.provide_arc(seen.clone()).processor(grouped(
                "many",
                50,
                GroupLimits::new().concurrency(1),
            ))
        })
        .await;
    let q = app.queue::<Work>("many").unwrap();
    let mut all = Vec::new();
    for g in 0..10_000 {
        all.extend(jobs(&format!("t{g}"), 2, 0));
    }
    add_all(&q, all).await;
    let workers = app.start_workers().await.unwrap();
    // Completed jobs are kept by the thousand (the default retention): count runs.
    wait_until(Duration::from_secs(120), "20,000 jobs done", || async {
        let counts = q.get_job_counts().await.expect("counts");
        let ran = seen.runs.lock().unwrap().len();
        (ran == 20_000 && counts.active == 0 && counts.waiting == 0 && counts.prioritized == 0)
            .then_some(())
    })
    .await;
    {
        let runs = seen.runs.lock().unwrap();
        assert_eq!(runs.len(), 20_000);
        assert!(runs.values().all(|n| *n == 1), "every job ran once");
    }
    assert!(
        seen.misread.lock().unwrap().is_empty(),
        "each handler read its job's group"
    );
    assert!(q.groups(None, 10).await.unwrap().groups.is_empty());
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn drain_empties_the_groups_and_obliterate_leaves_no_group_key() {
    let redis = TestRedis::new("groups-clear");
    let app = redis
        .app(|b| {
            b.provide(Seen::default())
                .processor(grouped("clear", 1, GroupLimits::new()))
        })
        .await;
    let q = app.queue::<Work>("clear").unwrap();
    q.pause_group("g").await.unwrap();
    add_all(&q, jobs("g", 3, 0)).await;
    let workers = app.start_workers().await.unwrap();
    wait_until(
        SOON,
        "the paused group's jobs to be taken into it",
        || async {
            let page = q.groups(None, 10).await.expect("groups");
            page.groups
                .iter()
                .any(|g| g.id == "g" && g.waiting == 3)
                .then_some(())
        },
    )
    .await;
    q.drain(true).await.unwrap();
    let page = q.groups(None, 10).await.unwrap();
    assert_eq!(page.groups[0].waiting, 0, "{page:?}");
    assert_eq!(q.get_job_counts().await.unwrap().prioritized, 0);
    assert!(workers.shutdown(SOON).await.is_clean());
    q.obliterate(true).await.unwrap();
    let left: Vec<String> = redis
        .keys()
        .into_iter()
        .filter(|k| k.contains(":g:") || k.contains(":gs:"))
        .collect();
    assert!(left.is_empty(), "group keys left: {left:?}");
}
