//! What the queue's tools see of grouped jobs waiting their turn, which wait in their
//! groups rather than in BullMQ's `wait`: counts, state, the operator's listing, remove,
//! clean, drain and obliterate; a queue left in the first layout of groups (waiting jobs
//! in `prioritized` too, a list ring) moved to this one by its first grouped worker; and
//! what other paths leave behind (a retry into `prioritized`, a band left by workers that
//! had limits, a slot of a dead run) taken up again; the groups' listing by name; and a
//! group's rate window, which counts its starts only (not a take that found only deleted
//! jobs, nor a start its limit refused).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queue_core::{
    group::GroupLimits,
    queue::{JobFilter, ScanLimits},
    Dep, Job, JobError, JobOptions, JobState, Processor, Queue,
};
use queue_tests::{sync_connection, wait_until, TestRedis, SOON};

use crate::support::{add, Gate};

/// The ids of the jobs the handler ran.
#[derive(Default)]
struct Ran(Mutex<Vec<String>>);

async fn run(job: Job<u32>, ran: Dep<Ran>) -> Result<(), JobError> {
    ran.0.lock().unwrap().push(job.id().to_owned());
    Ok(())
}

fn grouped(queue: &str) -> Processor {
    Processor::new(queue)
        .concurrency(2)
        .groups(GroupLimits::new())
        .any_job(run)
}

async fn completed(queue: &Queue<u32>) -> u64 {
    queue.get_job_counts().await.unwrap().completed
}

#[tokio::test]
async fn a_grouped_job_waiting_its_turn_is_counted_listed_and_removed_as_a_waiting_job() {
    let redis = TestRedis::new("groups-tools-waiting");
    let ran = Arc::new(Ran::default());
    let app = redis
        .app(|b| b.provide_arc(ran.clone()).processor(grouped("tools")))
        .await;
    let q = app.queue::<u32>("tools").unwrap();
    add(&q, "a", 0..2).await;
    add(&q, "b", 0..1).await;

    let counts = q.get_job_counts().await.unwrap();
    assert_eq!((counts.waiting, counts.prioritized), (3, 0), "{counts:?}");
    assert_eq!(
        q.get_job_state("a-0").await.unwrap(),
        Some(JobState::Waiting)
    );
    let listed: Vec<String> = q
        .get_job_summaries(JobState::Waiting, 0..10, true, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.id)
        .collect();
    assert_eq!(
        listed,
        ["a-0", "a-1", "b-0"],
        "the operator's listing, oldest first"
    );
    let newest_two: Vec<String> = q
        .get_job_summaries(JobState::Waiting, 0..2, false, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.id)
        .collect();
    assert_eq!(newest_two, ["b-0", "a-1"], "a page, newest first");
    let jobs = q.get_jobs(&[JobState::Waiting], 0..10).await.unwrap();
    let mut got: Vec<(String, Option<JobState>)> =
        jobs.into_iter().map(|job| (job.id, job.state)).collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        [
            ("a-0".to_owned(), Some(JobState::Waiting)),
            ("a-1".to_owned(), Some(JobState::Waiting)),
            ("b-0".to_owned(), Some(JobState::Waiting)),
        ],
        "get_jobs of waiting jobs"
    );
    // The dashboard's search reads the wait list, then the grouped jobs.
    let found = q
        .scan_jobs(
            JobState::Waiting,
            &JobFilter::IdPrefix("a-".into()),
            &ScanLimits::default(),
        )
        .await
        .unwrap();
    let mut matched: Vec<String> = found.matches.into_iter().map(|row| row.id).collect();
    matched.sort();
    assert_eq!(matched, ["a-0", "a-1"], "a search of waiting jobs");
    assert!(q.get_oldest_waiting().await.unwrap().is_some());

    assert!(q.remove("a-1").await.unwrap());
    assert_eq!(q.get_job_counts().await.unwrap().waiting, 2);
    let page = q.groups(None, 10).await.unwrap();
    let a = page.groups.iter().find(|g| g.id == "a").unwrap();
    assert_eq!(a.waiting, 1, "the removed job left its group at once");

    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "the two jobs left", || async {
        (completed(&q).await == 2).then_some(())
    })
    .await;
    let mut ran = ran.0.lock().unwrap().clone();
    ran.sort();
    assert_eq!(ran, ["a-0", "b-0"], "the removed job never ran");
    assert!(workers.shutdown(SOON).await.is_clean());
}

/// Waiting jobs are the wait list's (an ungrouped job), then the grouped ones: the
/// operator's listing and the dashboard's search page by one position across both, in
/// either order; `get_jobs` applies its range to each, as BullMQ's `getJobs` does.
#[tokio::test]
async fn a_listing_and_a_search_of_waiting_jobs_page_across_the_wait_list_and_the_groups() {
    let redis = TestRedis::new("groups-tools-paging");
    let app = redis
        .app(|b| {
            b.provide_arc(Arc::new(Ran::default()))
                .processor(grouped("paging"))
        })
        .await;
    let q = app.queue::<u32>("paging").unwrap();
    q.add("work", 9, JobOptions::new().job_id("plain-0"))
        .await
        .unwrap();
    add(&q, "a", 0..2).await;

    let ids = |rows: Vec<queue_core::queue::JobSummary>| -> Vec<String> {
        rows.into_iter().map(|row| row.id).collect()
    };
    for (oldest_first, all) in [
        (true, ["plain-0", "a-0", "a-1"]),
        (false, ["plain-0", "a-1", "a-0"]),
    ] {
        for (start, id) in all.iter().enumerate() {
            let page = q
                .get_job_summaries(JobState::Waiting, start..start + 1, oldest_first, 100)
                .await
                .unwrap();
            assert_eq!(
                ids(page),
                [*id],
                "position {start}, oldest first {oldest_first}"
            );
        }
        let mut limits = ScanLimits::default();
        limits.jobs = 1;
        limits.oldest_first = oldest_first;
        let mut found = Vec::new();
        for _ in 0..10 {
            let scan = q
                .scan_jobs(JobState::Waiting, &JobFilter::Name("work".into()), &limits)
                .await
                .unwrap();
            found.extend(ids(scan.matches));
            match scan.next {
                Some(next) => limits.from = next,
                None => break,
            }
        }
        assert_eq!(
            found, all,
            "a search one job at a time, oldest first {oldest_first}"
        );
    }
    let first: Vec<String> = q
        .get_jobs(&[JobState::Waiting], 0..1)
        .await
        .unwrap()
        .into_iter()
        .map(|job| job.id)
        .collect();
    assert_eq!(
        first,
        ["plain-0", "a-1"],
        "the newest of the wait list, then of the groups"
    );
}

#[tokio::test]
async fn clean_drain_and_obliterate_take_grouped_jobs_waiting_their_turn() {
    let redis = TestRedis::new("groups-tools-clean");
    let app = redis
        .app(|b| b.provide(Ran::default()).processor(grouped("wipe")))
        .await;
    let q = app.queue::<u32>("wipe").unwrap();
    add(&q, "a", 0..3).await;
    add(&q, "b", 0..2).await;

    let cleaned = q.clean(Duration::ZERO, 2, JobState::Waiting).await.unwrap();
    assert_eq!(cleaned, ["a-0", "a-1"], "the oldest two");
    assert_eq!(q.get_job(&cleaned[0]).await.unwrap(), None);
    assert_eq!(q.get_job_counts().await.unwrap().waiting, 3);
    let kept = q
        .clean(Duration::from_secs(3600), 0, JobState::Waiting)
        .await
        .unwrap();
    assert!(kept.is_empty(), "younger than the grace: {kept:?}");

    q.drain(false).await.unwrap();
    assert_eq!(q.get_job_counts().await.unwrap().waiting, 0);
    assert_eq!(q.get_job("b-1").await.unwrap(), None);
    let page = q.groups(None, 10).await.unwrap();
    assert!(
        page.groups.iter().all(|g| g.waiting == 0),
        "{:?}",
        page.groups
    );

    add(&q, "c", 0..2).await;
    q.pause_group("c").await.unwrap();
    q.obliterate(true).await.unwrap();
    assert_eq!(
        redis.keys(),
        Vec::<String>::new(),
        "nothing of the queue is left"
    );
}

#[tokio::test]
async fn a_queue_in_the_first_layout_of_groups_is_moved_before_its_first_grouped_worker_starts() {
    let redis = TestRedis::new("groups-tools-migrate");
    let ran = Arc::new(Ran::default());
    let app = redis
        .app(|b| b.provide_arc(ran.clone()).processor(grouped("old")))
        .await;
    let q = app.queue::<u32>("old").unwrap();
    add(&q, "a", 0..2).await;
    add(&q, "b", 0..1).await;
    // Added by a new producer before the worker is replaced: already in this layout.
    add(&q, "c", 0..1).await;

    // Rewrite what the adds wrote as the first layout held it: each waiting grouped job
    // in `prioritized` as well as its group, the groups in a list ring flagged in their
    // meta, no set of waiting jobs, and a slot held by a run whose lock is gone.
    let p = format!("{}:old:", redis.prefix());
    let mut conn = sync_connection();
    for (group, ids) in [("a", vec!["a-0", "a-1"]), ("b", vec!["b-0"])] {
        for id in &ids {
            let score: f64 = redis::cmd("ZSCORE")
                .arg(format!("{p}g:{group}:wait"))
                .arg(id)
                .query(&mut *conn)
                .unwrap();
            redis::cmd("ZADD")
                .arg(format!("{p}prioritized"))
                .arg(score)
                .arg(id)
                .query::<()>(&mut *conn)
                .unwrap();
        }
        redis::cmd("RPUSH")
            .arg(format!("{p}gs:ring"))
            .arg(group)
            .query::<()>(&mut *conn)
            .unwrap();
        redis::cmd("HSET")
            .arg(format!("{p}g:{group}:meta"))
            .arg("ring")
            .arg(1)
            .query::<()>(&mut *conn)
            .unwrap();
    }
    redis::cmd("HSET")
        .arg(format!("{p}g:a:active"))
        .arg("gone-0")
        .arg("a-token-of-a-dead-run")
        .query::<()>(&mut *conn)
        .unwrap();
    // A group with nothing waiting whose one slot is a dead run's: idle once that slot
    // is given back.
    redis::cmd("HSET")
        .arg(format!("{p}g:idle:active"))
        .arg("gone-1")
        .arg("a-token-of-a-dead-run")
        .query::<()>(&mut *conn)
        .unwrap();
    redis::cmd("ZADD")
        .arg(format!("{p}gs:known"))
        .arg(0)
        .arg("idle")
        .query::<()>(&mut *conn)
        .unwrap();
    for id in ["a-0", "a-1", "b-0"] {
        redis::cmd("ZREM")
            .arg(format!("{p}gs:waiting"))
            .arg(id)
            .query::<()>(&mut *conn)
            .unwrap();
    }
    redis::cmd("ZREM")
        .arg(format!("{p}gs:turns"))
        .arg("a")
        .arg("b")
        .query::<()>(&mut *conn)
        .unwrap();

    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "the four jobs", || async {
        (completed(&q).await == 4).then_some(())
    })
    .await;
    let exists = |key: &str| -> bool {
        redis::cmd("EXISTS")
            .arg(format!("{p}{key}"))
            .query::<u32>(&mut *sync_connection())
            .unwrap()
            == 1
    };
    assert!(!exists("gs:ring"), "the old ring is gone");
    assert!(!exists("prioritized"), "no job is left in prioritized");
    assert!(!exists("g:a:active"), "the dead run's slot is gone");
    assert!(
        !exists("g:idle:active"),
        "the idle group's dead slot is gone"
    );
    let listed: Vec<String> = q
        .groups(None, 10)
        .await
        .unwrap()
        .groups
        .into_iter()
        .map(|g| g.id)
        .collect();
    assert!(
        !listed.contains(&"idle".to_owned()),
        "a group the move left idle is forgotten: {listed:?}"
    );
    let meta: Vec<String> = redis::cmd("HKEYS")
        .arg(format!("{p}g:a:meta"))
        .query(&mut *conn)
        .unwrap();
    assert!(meta.is_empty(), "the old ring flag is gone: {meta:?}");
    assert_eq!(ran.0.lock().unwrap().len(), 4);
    assert!(workers.shutdown(SOON).await.is_clean());
}

async fn failing_once(job: Job<u32>, ran: Dep<Ran>) -> Result<(), JobError> {
    let mut ran = ran.0.lock().unwrap();
    ran.push(job.id().to_owned());
    if ran.len() == 1 {
        return Err(JobError::retry("the first attempt fails"));
    }
    Ok(())
}

#[tokio::test]
async fn a_grouped_job_with_a_priority_retried_at_once_runs_again_in_its_group() {
    let redis = TestRedis::new("groups-tools-retry");
    let ran = Arc::new(Ran::default());
    let app = redis
        .app(|b| {
            b.provide_arc(ran.clone()).processor(
                Processor::new("retry")
                    .groups(GroupLimits::new())
                    .any_job(failing_once),
            )
        })
        .await;
    let q = app.queue::<u32>("retry").unwrap();
    // A retry without backoff goes back through BullMQ's own script, which puts a job
    // with a priority in `prioritized`.
    q.add(
        "work",
        7,
        JobOptions::new()
            .group("g")
            .priority(2)
            .attempts(2)
            .job_id("ranked"),
    )
    .await
    .unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "the retried job", || async {
        (q.get_job_state("ranked").await.unwrap() == Some(JobState::Completed)).then_some(())
    })
    .await;
    assert_eq!(*ran.0.lock().unwrap(), ["ranked", "ranked"]);
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn a_group_filed_at_a_limit_the_workers_no_longer_have_runs() {
    let redis = TestRedis::new("groups-tools-band");
    let app = redis
        .app(|b| b.provide(Ran::default()).processor(grouped("band")))
        .await;
    let q = app.queue::<u32>("band").unwrap();
    add(&q, "filed", 0..2).await;
    // Filed at its concurrency by workers that had a limit, as a take leaves it.
    let p = format!("{}:band:", redis.prefix());
    redis::cmd("ZADD")
        .arg(format!("{p}gs:turns"))
        .arg((1u64 << 51) + queue_tests::group_chaos::now_ms())
        .arg("filed")
        .query::<()>(&mut *sync_connection())
        .unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "the group's two jobs", || async {
        (completed(&q).await == 2).then_some(())
    })
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn a_slot_of_a_dead_run_is_given_back_when_its_group_comes_up() {
    let redis = TestRedis::new("groups-tools-dead");
    let app = redis
        .app(|b| {
            b.provide(Ran::default()).processor(
                Processor::new("dead")
                    .groups(GroupLimits::new().concurrency(1))
                    .any_job(run),
            )
        })
        .await;
    let q = app.queue::<u32>("dead").unwrap();
    add(&q, "busy", 0..3).await;
    // The group's one slot, held by a run whose worker died (its lock is gone).
    let p = format!("{}:dead:", redis.prefix());
    redis::cmd("HSET")
        .arg(format!("{p}g:busy:active"))
        .arg("gone-0")
        .arg("a-token-of-a-dead-run")
        .query::<()>(&mut *sync_connection())
        .unwrap();
    let workers = app.start_workers().await.unwrap();
    // Well within a lock's 30 s, after which a take looks at a full group again anyway.
    wait_until(SOON, "the group's three jobs", || async {
        (completed(&q).await == 3).then_some(())
    })
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());
}

/// A handler that holds its job until the test lets it go.
async fn held(_: Job<u32>, gate: Dep<Gate>) -> Result<(), JobError> {
    gate.pass().await;
    Ok(())
}

/// The ids of every group, a page of `size` at a time.
async fn every_group(queue: &Queue<u32>, size: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = queue.groups(after.as_deref(), size).await.unwrap();
        ids.extend(page.groups.into_iter().map(|g| g.id));
        match page.next {
            Some(next) => after = Some(next),
            None => return ids,
        }
    }
}

/// The queue's groups, as the dashboard's Groups page lists them: those with jobs
/// waiting, one that holds a slot with nothing left waiting, and one with settings of its
/// own (paused) and no job; by name, whatever their turns, paged without a gap or a
/// repeat; a group that has none of these any more is left out.
#[tokio::test]
async fn the_groups_listing_pages_by_name_over_waiting_busy_and_configured_groups() {
    let redis = TestRedis::new("groups-tools-listing");
    let gate = Arc::new(Gate::shut());
    let app = redis
        .app(|b| {
            b.provide_arc(gate.clone()).processor(
                Processor::new("listing")
                    .concurrency(1)
                    .groups(GroupLimits::new().concurrency(1))
                    .any_job(held),
            )
        })
        .await;
    let q = app.queue::<u32>("listing").unwrap();
    // Names out of order, so that the ring's order by turn is not the listing's.
    for group in ["m", "d", "x", "b"] {
        add(&q, group, 0..1).await;
    }
    q.pause_group("p").await.unwrap();
    assert_eq!(every_group(&q, 2).await, ["b", "d", "m", "p", "x"]);

    // One job runs and holds its group's slot: that group has nothing waiting any
    // more and is out of the ring, and is listed still.
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "a job running", || async {
        let page = q.groups(None, 10).await.unwrap();
        page.groups
            .iter()
            .any(|g| g.active == 1 && g.waiting == 0)
            .then_some(())
    })
    .await;
    assert_eq!(every_group(&q, 2).await, ["b", "d", "m", "p", "x"]);
    assert_eq!(every_group(&q, 1).await, ["b", "d", "m", "p", "x"]);

    // Once every job has run, only the paused group (its settings) is left.
    gate.open_for(4);
    wait_until(SOON, "the four jobs", || async {
        (completed(&q).await == 4).then_some(())
    })
    .await;
    wait_until(SOON, "the idle groups forgotten", || async {
        (every_group(&q, 2).await == ["p"]).then_some(())
    })
    .await;
    assert!(workers.shutdown(SOON).await.is_clean());
}

/// A group whose only job was deleted by another client (its hash gone, its id left in
/// the group) is passed over without a start counted in its rate window: a take counts
/// the start as it checks the limit, and takes the count back when it starts nothing.
#[tokio::test]
async fn a_group_passed_over_for_a_deleted_job_is_not_counted_in_its_rate_window() {
    let redis = TestRedis::new("groups-tools-uncount");
    let ran = Arc::new(Ran::default());
    let app = redis
        .app(|b| {
            b.provide_arc(ran.clone()).processor(
                Processor::new("uncount")
                    .groups(GroupLimits::new().rate(1, Duration::from_secs(3600)))
                    .any_job(run),
            )
        })
        .await;
    let q = app.queue::<u32>("uncount").unwrap();
    add(&q, "a", 0..1).await;
    let p = format!("{}:uncount:", redis.prefix());
    redis::cmd("DEL")
        .arg(format!("{p}a-0"))
        .query::<()>(&mut *sync_connection())
        .unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "the deleted job passed over", || async {
        let left: u32 = redis::cmd("EXISTS")
            .arg(format!("{p}g:a:wait"))
            .arg(format!("{p}gs:turns"))
            .query(&mut *sync_connection())
            .unwrap();
        (left == 0).then_some(())
    })
    .await;
    // One start an hour: the group's next job is its first start of the window.
    let job = q
        .add("work", 1, JobOptions::new().group("a").job_id("a-1"))
        .await
        .unwrap();
    wait_until(SOON, "the group's next job", || async {
        (completed(&q).await == 1).then_some(())
    })
    .await;
    assert_eq!(*ran.0.lock().unwrap(), [job.id]);
    assert!(workers.shutdown(SOON).await.is_clean());
}

/// A start a group's rate limit refuses is not counted in its window: limits raised
/// after a refusal give the group every start they allow in the window under way.
#[tokio::test]
async fn a_start_refused_by_a_groups_rate_limit_is_not_counted_in_its_window() {
    let redis = TestRedis::new("groups-tools-refused");
    let ran = Arc::new(Ran::default());
    let hourly = |max| GroupLimits::new().rate(max, Duration::from_secs(3600));
    let app = redis
        .app(|b| {
            b.provide_arc(ran.clone())
                .processor(Processor::new("refused").groups(hourly(1)).any_job(run))
        })
        .await;
    let q = app.queue::<u32>("refused").unwrap();
    add(&q, "a", 0..3).await;
    let p = format!("{}:refused:", redis.prefix());
    let turn = || async {
        redis::cmd("ZSCORE")
            .arg(format!("{p}gs:turns"))
            .arg("a")
            .query::<Option<f64>>(&mut *sync_connection())
            .unwrap()
    };
    // Waiting out its rate window: the ring (`gs:turns`, the groups by turn) files such a
    // group at 2^52 and up, past every turn.
    let at_its_limit = || async { turn().await.filter(|t| *t >= 2f64.powi(52)) };
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "the first start of the window", || async {
        (completed(&q).await == 1).then_some(())
    })
    .await;
    wait_until(SOON, "the group at its limit", at_its_limit).await;
    // The same limits again: the group gets a turn, and a take refuses it once more.
    q.set_group_limits("a", hourly(1)).await.unwrap();
    wait_until(SOON, "the group refused again", at_its_limit).await;
    q.set_group_limits("a", hourly(2)).await.unwrap();
    wait_until(SOON, "the start the raised limit allows", || async {
        (completed(&q).await == 2).then_some(())
    })
    .await;
    wait_until(SOON, "the group at its new limit", at_its_limit).await;
    assert_eq!(completed(&q).await, 2, "two starts in the window, no more");
    assert!(workers.shutdown(SOON).await.is_clean());
}
