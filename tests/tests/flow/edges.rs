//! Flows at their edges (issue #27): a parent that continues past a failed child while a
//! sibling still runs, a cancelled parent whose children finish all the same, and
//! children named by ids that exist already. Each test drives the real workers on the
//! real Redis; the children that must overlap are held by latches the test opens, so
//! nothing depends on timing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queue_core::{
    flow::ExistingJobConflict, flow::FlowError, queue::CancelOutcome, ChildResults, Dep, Error,
    Job, JobError, JobOptions, JobState, OnChildFailure, Processor, QueueApp,
};
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Mode {
    /// Returns twice its number.
    #[default]
    Double,
    /// Fails for good at once.
    Fail,
    /// Says it started, then waits for the test's release (ignoring a cancellation, as
    /// most handlers do), then returns twice its number.
    Held,
    /// Waits until the held child has started, then fails for good.
    FailOnceHeldRuns,
    /// Runs until cancelled, then fails.
    StopOnCancel,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Step {
    n: u32,
    #[serde(default)]
    mode: Mode,
}

fn step(n: u32, mode: Mode) -> Step {
    Step { n, mode }
}

/// The test's hold on the children: when the held one started, and its release.
#[derive(Debug)]
struct Latches {
    held_started: watch::Sender<bool>,
    release: watch::Sender<bool>,
}

impl Latches {
    fn new() -> Self {
        Latches {
            held_started: watch::channel(false).0,
            release: watch::channel(false).0,
        }
    }
}

/// How many times a parent's handler ran.
#[derive(Debug, Default)]
struct Runs(AtomicUsize);

impl Runs {
    fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

async fn child(job: Job<Step>, latches: Dep<Latches>) -> Result<u32, JobError> {
    let n = job.data.n;
    let broke = || JobError::unrecoverable(std::io::Error::other(format!("step {n} broke")));
    match job.data.mode {
        Mode::Double => Ok(n * 2),
        Mode::Fail => Err(broke()),
        Mode::Held => {
            latches.held_started.send_replace(true);
            let mut release = latches.release.subscribe();
            release
                .wait_for(|open| *open)
                .await
                .map_err(JobError::from)?;
            Ok(n * 2)
        }
        Mode::FailOnceHeldRuns => {
            let mut started = latches.held_started.subscribe();
            started.wait_for(|s| *s).await.map_err(JobError::from)?;
            Err(broke())
        }
        Mode::StopOnCancel => {
            job.cancelled().await;
            Err(JobError::unrecoverable(std::io::Error::other("stopped")))
        }
    }
}

/// What a typed parent saw of its children.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Seen {
    values: Vec<(String, u32)>,
    failed: Vec<(String, String)>,
}

async fn collect(
    _job: Job<String>,
    children: ChildResults<u32>,
    runs: Dep<Runs>,
) -> Result<Seen, JobError> {
    runs.0.fetch_add(1, Ordering::SeqCst);
    Ok(Seen {
        values: children.iter().map(|(k, v)| (k.id.clone(), *v)).collect(),
        failed: children
            .failed()
            .iter()
            .map(|f| (f.child.id.clone(), f.reason.clone()))
            .collect(),
    })
}

/// A parent whose handler does not read its children.
async fn plain(_job: Job<String>, runs: Dep<Runs>) -> Result<u32, JobError> {
    runs.0.fetch_add(1, Ordering::SeqCst);
    Ok(1)
}

struct Fixture {
    redis: TestRedis,
    app: QueueApp,
    latches: Arc<Latches>,
    runs: Arc<Runs>,
}

async fn fixture(label: &str) -> Fixture {
    let redis = TestRedis::new(label);
    let latches = Arc::new(Latches::new());
    let runs = Arc::new(Runs::default());
    let app = redis
        .builder()
        .provide_arc(latches.clone())
        .provide_arc(runs.clone())
        .processor(Processor::new("steps").concurrency(4).job("step", child))
        .processor(
            Processor::new("parents")
                .job("collect", collect)
                .job("plain", plain),
        )
        .build()
        .await
        .unwrap();
    Fixture {
        redis,
        app,
        latches,
        runs,
    }
}

/// Waits until parent `id` has been taken by a worker at least once and then settled:
/// back in `waiting-children`, or finished.
async fn taken_and_settled(parents: &queue_core::Queue<String>, id: &str) -> JobState {
    wait_until(SOON, "the parent to be taken and settle", || async {
        let info = parents.get_job(id).await.unwrap()?;
        let state = parents.get_job_state(id).await.unwrap()?;
        let settled = matches!(
            state,
            JobState::WaitingChildren | JobState::Failed | JobState::Completed
        );
        (info.processed_on_ms.is_some() && settled).then_some(state)
    })
    .await
}

/// Waits until job `id` of `queue` is completed or failed.
async fn finished<T>(queue: &queue_core::Queue<T>, id: &str) -> JobState {
    wait_until(SOON, &format!("{id} to finish"), || async {
        queue
            .get_job_state(id)
            .await
            .unwrap()
            .filter(|s| s.is_finished())
    })
    .await
}

#[tokio::test]
async fn a_parent_continuing_past_a_failed_child_waits_for_its_running_sibling_and_runs_once() {
    // A typed parent and a plain one, added by us; and a typed one whose flow Node's
    // FlowProducer added (it carries none of our options).
    for (handler, by_node) in [("collect", false), ("plain", false), ("collect", true)] {
        let label = format!(
            "flow-cp-running-{handler}{}",
            if by_node { "-node" } else { "" }
        );
        let f = fixture(&label).await;
        let steps = f.app.queue::<Step>("steps").unwrap();
        let parents = f.app.queue::<String>("parents").unwrap();
        // `a` fails once `b` runs; `b` runs until the test releases it.
        if by_node {
            let tree = serde_json::json!({
                "name": handler, "queueName": "parents", "data": "p",
                "opts": {"jobId": "p", "attempts": 3},
                "children": [
                    {"name": "step", "queueName": "steps", "data": step(1, Mode::FailOnceHeldRuns),
                     "opts": {"jobId": "p-a", "continueParentOnFailure": true}},
                    {"name": "step", "queueName": "steps", "data": step(3, Mode::Held),
                     "opts": {"jobId": "p-b", "failParentOnFailure": true}}
                ]
            })
            .to_string();
            queue_tests::node::run(f.redis.prefix(), &["flow", "-", &tree]).await;
        } else {
            let flow = parents
                .flow_job(handler, "p".into())
                .options(JobOptions::new().job_id("p").attempts(3))
                .child(
                    OnChildFailure::ContinueParent,
                    steps
                        .flow_job("step", step(1, Mode::FailOnceHeldRuns))
                        .options(JobOptions::new().job_id("p-a")),
                )
                .child(
                    OnChildFailure::FailParent,
                    steps
                        .flow_job("step", step(3, Mode::Held))
                        .options(JobOptions::new().job_id("p-b")),
                );
            f.app.add_flow(flow).await.unwrap();
        }
        let workers = f.app.start_workers().await.unwrap();
        wait_for_state(&steps, "p-a", JobState::Failed, SOON).await;

        // `a`'s failure released the parent; a worker took it, and it must be waiting
        // for `b` again without having run.
        let state = taken_and_settled(&parents, "p").await;
        let info = parents.get_job("p").await.unwrap().unwrap();
        assert_eq!(
            (state, f.runs.get()),
            (JobState::WaitingChildren, 0),
            "{label}: the parent ran while `b` was running: {info:?}"
        );
        assert_eq!(
            steps.get_job_state("p-b").await.unwrap(),
            Some(JobState::Active)
        );

        f.latches.release.send_replace(true);
        assert_eq!(
            finished(&parents, "p").await,
            JobState::Completed,
            "{label}"
        );
        let info = parents.get_job("p").await.unwrap().unwrap();
        assert_eq!(f.runs.get(), 1, "{label}: {info:?}");
        // No attempt was spent waiting, and the second take is not taken for a stall.
        assert_eq!(
            (info.attempts_made, info.attempts_started),
            (1, 1),
            "{label}"
        );
        if handler == "collect" {
            let seen: Seen = serde_json::from_value(info.return_value.unwrap()).unwrap();
            assert_eq!(
                seen,
                Seen {
                    values: vec![("p-b".into(), 6)],
                    failed: vec![("p-a".into(), "step 1 broke".into())],
                }
            );
        }
        workers.shutdown(SOON).await;
        drop(f.redis);
    }
}

#[tokio::test]
async fn a_cancelled_parent_never_runs_whatever_its_children_do() {
    // `a` ignores the cancellation and completes (most handlers never look); or it
    // stops as asked, and its policy would let the parent run.
    for (label, policy, mode) in [
        ("ignored", OnChildFailure::FailParent, Mode::Held),
        (
            "honoured",
            OnChildFailure::ContinueParent,
            Mode::StopOnCancel,
        ),
    ] {
        let f = fixture(&format!("flow-cancel-{label}")).await;
        let steps = f.app.queue::<Step>("steps").unwrap();
        let parents = f.app.queue::<String>("parents").unwrap();
        let flow = parents
            .flow_job("collect", "c".into())
            .options(JobOptions::new().job_id("c"))
            .child(
                policy,
                steps
                    .flow_job("step", step(1, mode))
                    .options(JobOptions::new().job_id("c-a")),
            )
            .child(
                OnChildFailure::FailParent,
                steps.flow_job("step", step(3, Mode::Double)).options(
                    JobOptions::new()
                        .job_id("c-b")
                        .delay(Duration::from_secs(300)),
                ),
            );
        f.app.add_flow(flow).await.unwrap();
        let workers = f.app.start_workers().await.unwrap();
        wait_for_state(&steps, "c-a", JobState::Active, SOON).await;

        let outcome = parents.cancel("c").await.unwrap();
        assert!(
            matches!(outcome, CancelOutcome::Signalled { listeners } if listeners >= 1),
            "{label}: {outcome:?}"
        );
        // The child not started is gone; the running one ends its own way.
        assert_eq!(steps.get_job_state("c-b").await.unwrap(), None, "{label}");
        f.latches.release.send_replace(true);
        finished(&steps, "c-a").await;

        let state = finished(&parents, "c").await;
        let info = parents.get_job("c").await.unwrap().unwrap();
        assert_eq!(
            (state, f.runs.get()),
            (JobState::Failed, 0),
            "{label}: the cancelled parent ran: {info:?}"
        );
        let reason = info.failed_reason.unwrap_or_default();
        assert!(reason.contains("cancel"), "{label}: {reason}");
        workers.shutdown(SOON).await;
        drop(f.redis);
    }
}

#[tokio::test]
async fn a_child_id_that_failed_on_its_own_is_refused_and_nothing_is_written() {
    let f = fixture("flow-child-failed").await;
    let steps = f.app.queue::<Step>("steps").unwrap();
    let parents = f.app.queue::<String>("parents").unwrap();
    steps
        .add(
            "step",
            step(1, Mode::Fail),
            JobOptions::new().job_id("lone"),
        )
        .await
        .unwrap();
    let workers = f.app.start_workers().await.unwrap();
    wait_for_state(&steps, "lone", JobState::Failed, SOON).await;
    workers.shutdown(SOON).await;

    let flow = parents
        .flow_job("collect", "f".into())
        .options(JobOptions::new().job_id("f"))
        .child(
            OnChildFailure::FailParent,
            steps
                .flow_job("step", step(2, Mode::Double))
                .options(JobOptions::new().job_id("f-fresh")),
        )
        .child(
            OnChildFailure::FailParent,
            steps
                .flow_job("step", step(1, Mode::Double))
                .options(JobOptions::new().job_id("lone")),
        );
    let answer = f.app.add_flow(flow).await;
    assert!(
        answer.is_err(),
        "a parent would wait for ever on a failed child: {answer:?}"
    );
    let err = answer.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Flow(FlowError::ExistingJob { path, queue, id, reason: ExistingJobConflict::Failed })
                if path == "root.1" && queue == "steps" && id == "lone"
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("root.1 (steps/lone)"), "{message}");
    assert_eq!(parents.get_job_state("f").await.unwrap(), None);
    assert_eq!(steps.get_job_state("f-fresh").await.unwrap(), None);
    let lone = steps.get_job("lone").await.unwrap().unwrap();
    assert_eq!(lone.parent, None, "the failed job was not adopted");
}

#[tokio::test]
async fn a_child_of_another_live_parent_is_refused_and_leaves_nothing_behind() {
    let f = fixture("flow-child-taken").await;
    let steps = f.app.queue::<Step>("steps").unwrap();
    let parents = f.app.queue::<String>("parents").unwrap();
    let flow = |root: &str| {
        parents
            .flow_job("collect", root.into())
            .options(JobOptions::new().job_id(root))
            .child(
                OnChildFailure::FailParent,
                steps.flow_job("step", step(1, Mode::Double)).options(
                    JobOptions::new()
                        .job_id("shared")
                        .delay(Duration::from_secs(300)),
                ),
            )
    };
    f.app.add_flow(flow("first")).await.unwrap();
    // Refused, and refused again: a retry is not answered "duplicate".
    for attempt in 0..2 {
        let answer = f.app.add_flow(flow("second")).await;
        assert_eq!(
            parents.get_job_state("second").await.unwrap(),
            None,
            "attempt {attempt}: the root was written: {answer:?}"
        );
        let err = answer.unwrap_err();
        assert!(
            matches!(
                &err,
                Error::Flow(FlowError::ExistingJob { reason: ExistingJobConflict::OtherParent { parent }, .. })
                    if parent == "parents/first"
            ),
            "attempt {attempt}: {err:?}"
        );
    }
    let shared = steps.get_job("shared").await.unwrap().unwrap();
    assert_eq!(shared.parent.map(|p| p.id).as_deref(), Some("first"));
}

#[tokio::test]
async fn existing_children_are_answered_as_duplicates_in_their_real_state() {
    let f = fixture("flow-child-adopted").await;
    let steps = f.app.queue::<Step>("steps").unwrap();
    let parents = f.app.queue::<String>("parents").unwrap();
    let workers = f.app.start_workers().await.unwrap();
    steps
        .add(
            "step",
            step(4, Mode::Double),
            JobOptions::new().job_id("done"),
        )
        .await
        .unwrap();
    wait_for_state(&steps, "done", JobState::Completed, SOON).await;
    steps
        .add(
            "step",
            step(5, Mode::Double),
            JobOptions::new()
                .job_id("later")
                .delay(Duration::from_secs(300)),
        )
        .await
        .unwrap();

    let flow = parents
        .flow_job("collect", "d".into())
        .options(JobOptions::new().job_id("d"))
        .child(
            OnChildFailure::FailParent,
            steps
                .flow_job("step", step(4, Mode::Double))
                .options(JobOptions::new().job_id("done")),
        )
        .child(
            OnChildFailure::FailParent,
            steps
                .flow_job("step", step(5, Mode::Double))
                .options(JobOptions::new().job_id("later")),
        )
        .child(
            OnChildFailure::FailParent,
            steps.flow_job("step", step(6, Mode::Double)).options(
                JobOptions::new()
                    .job_id("d-fresh")
                    .delay(Duration::from_secs(300)),
            ),
        );
    let added = f.app.add_flow(flow).await.unwrap();
    let answer: Vec<(&str, bool, Option<JobState>)> = added
        .jobs()
        .iter()
        .map(|j| (j.id.as_str(), j.duplicate, j.state))
        .collect();
    assert_eq!(
        answer,
        [
            ("d", false, Some(JobState::WaitingChildren)),
            ("done", true, Some(JobState::Completed)),
            ("later", true, Some(JobState::Delayed)),
            ("d-fresh", false, Some(JobState::Delayed)),
        ]
    );
    // The adopted children count: the parent runs once both delayed ones have run,
    // and reads the completed one's value too.
    steps.promote("later").await.unwrap();
    steps.promote("d-fresh").await.unwrap();
    assert_eq!(finished(&parents, "d").await, JobState::Completed);
    let seen: Seen = serde_json::from_value(
        parents
            .get_job("d")
            .await
            .unwrap()
            .unwrap()
            .return_value
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        seen.values,
        vec![
            ("d-fresh".into(), 12),
            ("done".into(), 8),
            ("later".into(), 10)
        ]
    );
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn concurrent_flows_sharing_a_child_id_write_one_flow_and_nothing_of_the_others() {
    let f = fixture("flow-child-race").await;
    let steps = f.app.queue::<Step>("steps").unwrap();
    let parents = f.app.queue::<String>("parents").unwrap();
    let flow = |root: String| {
        parents
            .flow_job("collect", root.clone())
            .options(JobOptions::new().job_id(root.clone()))
            .child(
                OnChildFailure::FailParent,
                steps.flow_job("step", step(1, Mode::Double)).options(
                    JobOptions::new()
                        .job_id("contested")
                        .delay(Duration::from_secs(300)),
                ),
            )
            .child(
                OnChildFailure::FailParent,
                steps.flow_job("step", step(2, Mode::Double)).options(
                    JobOptions::new()
                        .job_id(format!("{root}-own"))
                        .delay(Duration::from_secs(300)),
                ),
            )
    };
    let roots: Vec<String> = (0..8).map(|i| format!("r{i}")).collect();
    let answers =
        futures::future::join_all(roots.iter().map(|root| f.app.add_flow(flow(root.clone()))))
            .await;
    let winners: Vec<&String> = roots
        .iter()
        .zip(&answers)
        .filter(|(_, a)| a.is_ok())
        .map(|(r, _)| r)
        .collect();
    assert_eq!(winners.len(), 1, "{answers:?}");
    for (root, answer) in roots.iter().zip(&answers) {
        let written = parents.get_job_state(root).await.unwrap();
        let own = steps.get_job_state(&format!("{root}-own")).await.unwrap();
        if answer.is_ok() {
            assert_eq!(written, Some(JobState::WaitingChildren), "{root}");
            assert_eq!(own, Some(JobState::Delayed), "{root}");
        } else {
            assert_eq!((written, own), (None, None), "{root}: {answer:?}");
            assert!(
                matches!(
                    answer,
                    Err(Error::Flow(FlowError::ExistingJob {
                        reason: ExistingJobConflict::OtherParent { .. },
                        ..
                    }))
                ),
                "{root}: {answer:?}"
            );
        }
    }
    let contested = steps.get_job("contested").await.unwrap().unwrap();
    assert_eq!(
        contested.parent.map(|p| p.id).as_ref(),
        Some(winners[0]),
        "the child names the one parent that waits for it"
    );
    assert_eq!(parents.get_job_counts().await.unwrap().waiting_children, 1);
}

#[tokio::test]
async fn a_flow_naming_one_job_twice_is_refused_before_anything_is_written() {
    let f = fixture("flow-child-twice").await;
    let steps = f.app.queue::<Step>("steps").unwrap();
    let parents = f.app.queue::<String>("parents").unwrap();
    let twice = || {
        steps
            .flow_job("step", step(1, Mode::Double))
            .options(JobOptions::new().job_id("twice"))
    };
    let flow = parents
        .flow_job("collect", "t".into())
        .options(JobOptions::new().job_id("t"))
        .child(OnChildFailure::FailParent, twice())
        .child(OnChildFailure::IgnoreDependency, twice());
    let err = f.app.add_flow(flow).await.unwrap_err();
    assert!(
        matches!(&err, Error::Flow(FlowError::RepeatedId { first, second, .. }) if first == "root.0" && second == "root.1"),
        "{err:?}"
    );
    assert!(f.redis.keys().is_empty(), "{:?}", f.redis.keys());
}
