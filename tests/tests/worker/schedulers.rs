//! Job schedulers under the races BullMQ's schedulers were filed for in 2025 (#48):
//! upserts from many processes at once, an update while the next job waits or while the
//! current one runs, a removal while it runs. Each leaves one scheduler (or none) and
//! one next job (or none), with the latest template. And runs that fell due while no
//! worker ran: made up once, through a restart's upsert, or skipped by policy.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use queue_core::options::{MissedRuns, Schedule};
use queue_core::prelude::*;
use queue_core::{Error, JobInfo, QueueAppBuilder, Workers};
use queue_tests::{wait_until, TestRedis, SOON};
use tokio::sync::Notify;

/// Schedules whose next run is months away: their next job waits, delayed.
static NEW_YEAR: std::sync::LazyLock<Schedule> =
    std::sync::LazyLock::new(|| Schedule::cron("0 0 1 1 *"));
static MID_YEAR: std::sync::LazyLock<Schedule> =
    std::sync::LazyLock::new(|| Schedule::cron("0 0 1 7 *"));

/// Jobs of the scheduler that wait to run: delayed or waiting.
async fn next_jobs(q: &Queue<u64>) -> Vec<JobInfo> {
    q.get_jobs(&[JobState::Delayed, JobState::Waiting], 0..100)
        .await
        .expect("a listing")
}

#[tokio::test]
async fn ten_processes_upserting_one_scheduler_at_once_leave_one_scheduler_and_one_next_job() {
    let redis = TestRedis::new("sched-upserts");
    // Ten apps, each its own connections, as ten processes starting at once.
    let apps = join_all((0..10).map(|_| redis.app(|b| b))).await;
    let queues: Vec<Queue<u64>> = apps
        .iter()
        .map(|app| app.queue::<u64>("reports").expect("the queue"))
        .collect();
    let upserts = queues.iter().enumerate().map(|(n, q)| {
        // Each its own interval and data: whichever wins, one remains.
        let every = Schedule::every(Duration::from_secs(3_600 + n as u64));
        q.upsert_scheduler("daily", every, "report", n as u64, JobOptions::new())
    });
    for result in join_all(upserts).await {
        result.expect("an upsert");
    }
    let q = &queues[0];
    assert_eq!(q.scheduler_count().await.expect("a count"), 1);
    let next = next_jobs(q).await;
    assert_eq!(next.len(), 1, "one next job, not {}", next.len());
}

#[tokio::test]
async fn updating_a_scheduler_while_its_next_job_waits_replaces_that_job() {
    let redis = TestRedis::new("sched-update-delayed");
    let app = redis.app(|b| b).await;
    let q = app.queue::<u64>("reports").expect("the queue");
    q.upsert_scheduler("yearly", NEW_YEAR.clone(), "report", 1, JobOptions::new())
        .await
        .expect("an upsert");
    let before = next_jobs(&q).await;
    assert_eq!(before.len(), 1);
    q.upsert_scheduler("yearly", MID_YEAR.clone(), "report", 2, JobOptions::new())
        .await
        .expect("an update");
    let after = next_jobs(&q).await;
    assert_eq!(after.len(), 1, "one next job: {after:?}");
    assert_eq!(after[0].data, serde_json::json!(2), "the new template");
    assert_ne!(after[0].id, before[0].id, "the job of the new schedule");
    // The replaced job is gone, hash and all: one left behind made a later run's id
    // "exist", and the scheduler stopped (taskforcesh/bullmq#3262).
    assert!(q.get_job(&before[0].id).await.expect("a read").is_none());
    assert_eq!(
        q.get_job_state(&after[0].id).await.expect("a state"),
        Some(JobState::Delayed)
    );
    assert_eq!(q.scheduler_count().await.expect("a count"), 1);
}

/// What a held handler tells and is told.
#[derive(Default)]
struct Gate {
    release: Notify,
    started: Notify,
}

/// Holds the runs of the first template (data 1) until told; later ones run through.
async fn held_if_first(job: Job<u64>, gate: Dep<Gate>) -> Result<u64, JobError> {
    if job.data == 1 {
        gate.started.notify_one();
        gate.release.notified().await;
    }
    Ok(job.data)
}

/// A scheduler `ticks` on `schedule` (data 1) whose first run is running, held.
struct Ticking {
    _redis: TestRedis,
    _app: QueueApp,
    queue: Queue<u64>,
    gate: Arc<Gate>,
    workers: Workers,
}

fn every_300_ms() -> Schedule {
    Schedule::every(Duration::from_millis(300))
}

async fn first_tick_running(label: &str, schedule: Schedule) -> Ticking {
    let redis = TestRedis::new(label);
    let gate = Arc::new(Gate::default());
    let app = redis
        .app(|b| {
            b.processor(Processor::new("reports").any_job(held_if_first))
                .provide_arc(gate.clone())
        })
        .await;
    let queue = app.queue::<u64>("reports").expect("the queue");
    queue
        .upsert_scheduler("ticks", schedule, "report", 1, JobOptions::new())
        .await
        .expect("an upsert");
    let workers = app.start_workers().await.expect("workers start");
    gate.started.notified().await;
    Ticking {
        _redis: redis,
        _app: app,
        queue,
        gate,
        workers,
    }
}

#[tokio::test]
async fn updating_a_scheduler_while_its_job_runs_leaves_one_next_job_with_the_new_template() {
    let ticking = first_tick_running("sched-update-active", every_300_ms()).await;
    let (q, gate) = (&ticking.queue, &ticking.gate);
    // The first run is active: update the scheduler under it, to a schedule whose next
    // run is months away (an `every` schedule would start again at once).
    q.upsert_scheduler("ticks", NEW_YEAR.clone(), "report", 2, JobOptions::new())
        .await
        .expect("an update");
    gate.release.notify_one();
    wait_until(SOON, "the first run to complete", || async {
        (q.get_job_counts().await.ok()?.completed >= 1).then_some(())
    })
    .await;
    ticking.workers.shutdown(SOON).await;
    let next = next_jobs(q).await;
    assert_eq!(next.len(), 1, "one next job: {next:?}");
    assert_eq!(
        next[0].data,
        serde_json::json!(2),
        "the next job carries the new template"
    );
    assert_eq!(
        q.get_job_state(&next[0].id).await.expect("a state"),
        Some(JobState::Delayed)
    );
    assert_eq!(q.scheduler_count().await.expect("a count"), 1);
}

#[tokio::test]
async fn removing_a_scheduler_while_its_job_runs_leaves_no_next_job() {
    let ticking = first_tick_running("sched-remove-active", every_300_ms()).await;
    let (q, gate) = (&ticking.queue, &ticking.gate);
    assert!(q.remove_scheduler("ticks").await.expect("a removal"));
    gate.release.notify_one();
    wait_until(SOON, "the running job to complete", || async {
        (q.get_job_counts().await.ok()?.completed >= 1).then_some(())
    })
    .await;
    ticking.workers.shutdown(SOON).await;
    let next = next_jobs(q).await;
    assert!(next.is_empty(), "a removed scheduler made a job: {next:?}");
    assert_eq!(q.scheduler_count().await.expect("a count"), 0);
}

/// Every second: a run falls due while the test watches.
const EVERY_SECOND: &str = "* * * * * *";

/// The job ids a handler ran, in order.
#[derive(Default)]
struct Ran(std::sync::Mutex<Vec<String>>);

impl Ran {
    fn ids(&self) -> Vec<String> {
        self.0.lock().expect("not poisoned").clone()
    }
}

async fn record(job: Job<u64>, ran: Dep<Ran>) -> Result<u64, JobError> {
    ran.0
        .lock()
        .expect("not poisoned")
        .push(job.id().to_owned());
    Ok(job.data)
}

/// The time in a scheduler's job id, `repeat:<id>:<millis>`.
fn run_time(job_id: &str) -> u64 {
    job_id
        .rsplit_once(':')
        .and_then(|(_, millis)| millis.parse().ok())
        .unwrap_or_else(|| panic!("not a scheduler's job id: {job_id}"))
}

fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    u64::try_from(since.expect("a clock after 1970").as_millis()).expect("fits")
}

/// The scheduler's one pending run, once its time is `overdue_by` in the past: the
/// workers were away when it fell due.
async fn overdue_run(q: &Queue<u64>, overdue_by: Duration) -> JobInfo {
    let pending = next_jobs(q).await;
    assert_eq!(pending.len(), 1, "one pending run: {pending:?}");
    let due = run_time(&pending[0].id) + overdue_by.as_millis() as u64;
    wait_until(SOON, "the pending run to be overdue", || async {
        (now_ms() > due).then_some(())
    })
    .await;
    pending.into_iter().next().expect("one")
}

fn ran_app(b: QueueAppBuilder, ran: &Arc<Ran>) -> QueueAppBuilder {
    b.processor(Processor::new("reports").any_job(record))
        .provide_arc(ran.clone())
}

#[tokio::test]
async fn a_run_missed_while_no_worker_ran_is_made_up_once_even_through_a_restarts_upsert() {
    let redis = TestRedis::new("sched-missed-once");
    let ran = Arc::new(Ran::default());
    let app = redis.app(|b| ran_app(b, &ran)).await;
    let q = app.queue::<u64>("reports").expect("the queue");
    let schedule = Schedule::cron(EVERY_SECOND);
    q.upsert_scheduler("ticks", schedule.clone(), "report", 1, JobOptions::new())
        .await
        .expect("an upsert");
    // Three runs' times pass with no worker.
    let owed = overdue_run(&q, Duration::from_millis(2_500)).await;
    // A deploy: the new version upserts its scheduler at start-up, with a new template.
    let restarted_at = now_ms();
    q.upsert_scheduler("ticks", schedule, "report", 2, JobOptions::new())
        .await
        .expect("a restart's upsert");
    let pending = next_jobs(&q).await;
    assert_eq!(pending.len(), 1, "one pending run: {pending:?}");
    assert_eq!(pending[0].id, owed.id, "the owed run is kept, not replaced");
    assert_eq!(
        pending[0].data,
        serde_json::json!(2),
        "with the new template"
    );

    let workers = app.start_workers().await.expect("workers start");
    wait_until(SOON, "the owed run and the next one", || async {
        (ran.ids().len() >= 2).then_some(())
    })
    .await;
    workers.shutdown(SOON).await;
    let ids = ran.ids();
    assert_eq!(ids[0], owed.id, "the owed run first");
    let made_up: Vec<&String> = ids
        .iter()
        .filter(|id| run_time(id) < restarted_at)
        .collect();
    assert_eq!(
        made_up,
        [&owed.id],
        "one run made up, not one per missed second"
    );
}

#[tokio::test]
async fn a_scheduler_that_skips_missed_runs_skips_the_late_ones_and_runs_the_next() {
    let redis = TestRedis::new("sched-missed-skip");
    let ran = Arc::new(Ran::default());
    let app = redis.app(|b| ran_app(b, &ran)).await;
    let q = app.queue::<u64>("reports").expect("the queue");
    let schedule = Schedule::cron(EVERY_SECOND).missed_runs(MissedRuns::Skip {
        grace: Duration::from_millis(1_500),
    });
    q.upsert_scheduler("ticks", schedule, "report", 1, JobOptions::new())
        .await
        .expect("an upsert");

    // The first run, made by the upsert, and a later one, made by a worker that ran
    // the one before it: each falls due while no worker runs.
    let mut apps = vec![app];
    for round in 0..2 {
        let late = overdue_run(&q, Duration::from_millis(2_500)).await;
        let app = match round {
            0 => apps.pop().expect("the first app"),
            _ => redis.app(|b| ran_app(b, &ran)).await,
        };
        let before = ran.ids().len();
        let workers = app.start_workers().await.expect("workers start");
        wait_until(SOON, "a run after the late one", || async {
            (ran.ids().len() > before).then_some(())
        })
        .await;
        workers.shutdown(SOON).await;
        assert!(
            !ran.ids().contains(&late.id),
            "round {round}: the late run {} ran: {:?}",
            late.id,
            ran.ids()
        );
        let skipped = q.get_job(&late.id).await.expect("a read").expect("kept");
        assert_eq!(
            q.get_job_state(&late.id).await.expect("a state"),
            Some(JobState::Completed),
            "round {round}: a skipped run completes"
        );
        assert_eq!(skipped.return_value, Some(serde_json::Value::Null));
        let this_round = &ran.ids()[before..];
        assert!(
            this_round
                .iter()
                .all(|id| run_time(id) > run_time(&late.id)),
            "round {round}: only later runs ran: {this_round:?}"
        );
        apps.push(app);
    }
}

#[tokio::test]
async fn a_skip_policy_without_grace_is_refused_at_upsert() {
    let redis = TestRedis::new("sched-missed-refused");
    let app = redis.app(|b| b).await;
    let q = app.queue::<u64>("reports").expect("the queue");
    let schedule = Schedule::cron(EVERY_SECOND).missed_runs(MissedRuns::Skip {
        grace: Duration::ZERO,
    });
    let refused = q
        .upsert_scheduler("ticks", schedule, "report", 1, JobOptions::new())
        .await;
    assert!(
        matches!(
            refused,
            Err(Error::InvalidOption {
                option: "missed_runs",
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(q.scheduler_count().await.expect("a count"), 0);
}

#[tokio::test]
async fn upserting_while_the_due_run_runs_leaves_it_alone_and_one_next_run() {
    let schedule = Schedule::cron(EVERY_SECOND);
    let ticking = first_tick_running("sched-owed-running", schedule.clone()).await;
    let (q, gate) = (&ticking.queue, &ticking.gate);
    // The due run is active, not owed: the upsert leaves it alone and replaces the
    // next run it made, with the new template.
    q.upsert_scheduler("ticks", schedule, "report", 2, JobOptions::new())
        .await
        .expect("an upsert while the due run runs");
    let next = next_jobs(q).await;
    assert_eq!(next.len(), 1, "one next run: {next:?}");
    assert_eq!(next[0].data, serde_json::json!(2));
    gate.release.notify_one();
    wait_until(
        SOON,
        "the held run and the next one to complete",
        || async { (q.get_job_counts().await.ok()?.completed >= 2).then_some(()) },
    )
    .await;
    ticking.workers.shutdown(SOON).await;
    assert_eq!(q.scheduler_count().await.expect("a count"), 1);
    assert!(next_jobs(q).await.len() <= 1, "one pending run at most");
}

#[tokio::test]
async fn a_running_run_has_its_next_run_made_already() {
    // Made only when a run ended, the next run was lost to a process that died (or a
    // call that failed) before then, and the scheduler stopped for good.
    let ticking = first_tick_running("sched-next-at-start", every_300_ms()).await;
    let (q, gate) = (&ticking.queue, &ticking.gate);
    // Made beside the handler, which is held: it never comes if only an end makes it.
    let next = wait_until(SOON, "the next run, while this one runs", || async {
        let next = next_jobs(q).await;
        (!next.is_empty()).then_some(next)
    })
    .await;
    assert_eq!(next.len(), 1, "one next run: {next:?}");
    gate.release.notify_one();
    ticking.workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_run_promoted_before_its_time_makes_the_next_one_after_its_time() {
    let redis = TestRedis::new("sched-promoted");
    let ran = Arc::new(Ran::default());
    let app = redis.app(|b| ran_app(b, &ran)).await;
    let q = app.queue::<u64>("reports").expect("the queue");
    q.upsert_scheduler("yearly", NEW_YEAR.clone(), "report", 1, JobOptions::new())
        .await
        .expect("an upsert");
    let first = next_jobs(&q).await.remove(0);
    // An operator's "promote" (the dashboard's button): the run goes now, months early.
    q.promote(&first.id).await.expect("a promotion");
    let workers = app.start_workers().await.expect("workers start");
    wait_until(SOON, "the promoted run", || async {
        (!ran.ids().is_empty()).then_some(())
    })
    .await;
    workers.shutdown(SOON).await;
    let next = next_jobs(&q).await;
    assert_eq!(next.len(), 1, "the scheduler goes on: {next:?}");
    assert!(
        run_time(&next[0].id) > run_time(&first.id),
        "the next run ({}) comes after the promoted one ({})",
        next[0].id,
        first.id
    );
}

#[tokio::test]
async fn each_change_of_an_interval_takes_effect() {
    // taskforcesh/bullmq#3430: a changed `every` was sometimes not applied to the runs
    // after the next one (computed from a job's stale options).
    let redis = TestRedis::new("sched-every-changes");
    let ran = Arc::new(Ran::default());
    let app = redis.app(|b| ran_app(b, &ran)).await;
    let q = app.queue::<u64>("reports").expect("the queue");
    for secs in [80, 40, 90, 20, 30] {
        let every = Schedule::every(Duration::from_secs(secs));
        q.upsert_scheduler("sweep", every, "report", secs, JobOptions::new())
            .await
            .expect("an upsert");
        let next = next_jobs(&q).await;
        assert_eq!(next.len(), 1, "one next run: {next:?}");
        assert_eq!(next[0].data, serde_json::json!(secs), "the latest template");
    }
    // The last change's first run is due now; the run after it is 30 s later.
    let workers = app.start_workers().await.expect("workers start");
    wait_until(SOON, "the first run", || async {
        (!ran.ids().is_empty()).then_some(())
    })
    .await;
    workers.shutdown(SOON).await;
    let first = ran.ids().remove(0);
    let next = next_jobs(&q).await;
    assert_eq!(next.len(), 1, "one next run: {next:?}");
    assert_eq!(
        run_time(&next[0].id) - run_time(&first),
        30_000,
        "every 30 s"
    );
}

#[tokio::test]
async fn an_owed_run_a_worker_took_is_not_put_back_over_it() {
    // A worker of another process took the owed run and has not yet made the next one
    // when this process upserts at start-up: the upsert must not store the owed run's
    // job again (over the running one, and in `wait` beside `active`).
    let redis = TestRedis::new("sched-owed-taken");
    let app = redis.app(|b| b).await;
    let q = app.queue::<u64>("reports").expect("the queue");
    let schedule = Schedule::cron(EVERY_SECOND);
    q.upsert_scheduler("ticks", schedule.clone(), "report", 1, JobOptions::new())
        .await
        .expect("an upsert");
    let owed = overdue_run(&q, Duration::from_millis(1_500)).await;
    // Taken: moved from `delayed` to `active`, as a worker's fetch does.
    let base = format!("{}:reports", redis.prefix());
    let mut conn = queue_tests::sync_connection();
    redis::pipe()
        .cmd("ZREM")
        .arg(format!("{base}:delayed"))
        .arg(&owed.id)
        .cmd("LPUSH")
        .arg(format!("{base}:active"))
        .arg(&owed.id)
        .query::<()>(&mut *conn)
        .expect("the run taken");

    q.upsert_scheduler("ticks", schedule, "report", 2, JobOptions::new())
        .await
        .expect("a restart's upsert");
    let taken = q
        .get_job(&owed.id)
        .await
        .expect("a read")
        .expect("still there");
    assert_eq!(
        taken.data,
        serde_json::json!(1),
        "the running job is left alone"
    );
    let (waiting, active): (Vec<String>, Vec<String>) = redis::pipe()
        .cmd("LRANGE")
        .arg(format!("{base}:wait"))
        .arg(0)
        .arg(-1)
        .cmd("LRANGE")
        .arg(format!("{base}:active"))
        .arg(0)
        .arg(-1)
        .query(&mut *conn)
        .expect("the lists");
    assert!(
        !waiting.contains(&owed.id),
        "the taken run waits again: {waiting:?}"
    );
    assert_eq!(active, std::slice::from_ref(&owed.id));
    let next = next_jobs(&q).await;
    assert_eq!(next.len(), 1, "one next run: {next:?}");
    assert!(run_time(&next[0].id) > run_time(&owed.id), "{next:?}");
    assert_eq!(next[0].data, serde_json::json!(2), "with the new template");
}
