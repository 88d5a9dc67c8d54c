//! Flows: a parent and its children across queues, added atomically; the parent reads
//! its children's results typed; every failure policy, driven to a child's final
//! failure and to its removal while pending, leaves no parent stuck.

use std::time::Duration;

use queue_core::{
    ChildResults, Job, JobError, JobOptions, JobState, OnChildFailure, Processor, QueueApp,
    QueueEvent,
};
use queue_tests::{wait_for_state, TestRedis, SOON};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Step {
    n: u32,
    /// `fail`: unrecoverable; `slow`: runs until cancelled.
    #[serde(default)]
    mode: String,
}

fn step(n: u32) -> Step {
    Step {
        n,
        mode: String::new(),
    }
}

fn failing(n: u32) -> Step {
    Step {
        n,
        mode: "fail".into(),
    }
}

/// A child: doubles its number, fails for good, or runs until cancelled.
async fn double(job: Job<Step>) -> Result<u32, JobError> {
    match job.data.mode.as_str() {
        "fail" => Err(JobError::unrecoverable(std::io::Error::other(format!(
            "step {} broke",
            job.data.n
        )))),
        "slow" => {
            job.cancelled().await;
            Err(JobError::unrecoverable(std::io::Error::other("stopped")))
        }
        _ => Ok(job.data.n * 2),
    }
}

/// What a parent saw of its children, as it returns it.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Seen {
    values: Vec<(String, u32)>,
    failed: Vec<(String, String)>,
}

/// A parent that sums (here: lists) its children's typed results and its failures.
async fn collect(_job: Job<String>, children: ChildResults<u32>) -> Result<Seen, JobError> {
    Ok(Seen {
        values: children.iter().map(|(k, v)| (k.id.clone(), *v)).collect(),
        failed: children
            .failed()
            .iter()
            .map(|f| (f.child.id.clone(), f.reason.clone()))
            .collect(),
    })
}

/// A middle node: a child of the root and a parent of its own: adds its children up.
async fn subtotal(job: Job<Step>, children: ChildResults<u32>) -> Result<u32, JobError> {
    Ok(job.data.n + children.values().sum::<u32>())
}

async fn app(redis: &TestRedis) -> QueueApp {
    redis
        .builder()
        .processor(
            Processor::new("steps")
                .concurrency(4)
                .job("double", double)
                .job("subtotal", subtotal),
        )
        .processor(Processor::new("parents").job("collect", collect))
        .build()
        .await
        .unwrap()
}

fn seen(app_value: &serde_json::Value) -> Seen {
    serde_json::from_value(app_value.clone()).unwrap()
}

#[tokio::test]
async fn a_nested_flow_runs_children_first_and_parents_read_typed_results() {
    let redis = TestRedis::new("flow-nested");
    let app = app(&redis).await;
    let steps = app.queue::<Step>("steps").unwrap();
    let parents = app.queue::<String>("parents").unwrap();

    let flow = parents
        .flow_job("collect", "nov".into())
        .options(JobOptions::new().job_id("report-nov"))
        .child(
            OnChildFailure::FailParent,
            steps
                .flow_job("subtotal", step(100))
                .options(JobOptions::new().job_id("report-nov-sub"))
                .child(
                    OnChildFailure::FailParent,
                    steps
                        .flow_job("double", step(1))
                        .options(JobOptions::new().job_id("report-nov-a")),
                )
                .child(
                    OnChildFailure::FailParent,
                    steps
                        .flow_job("double", step(2))
                        .options(JobOptions::new().job_id("report-nov-b")),
                ),
        )
        .child(
            OnChildFailure::FailParent,
            steps
                .flow_job("double", step(5))
                .options(JobOptions::new().job_id("report-nov-c")),
        );
    let added = app.add_flow(flow).await.unwrap();
    let ids: Vec<(&str, Option<JobState>)> = added
        .jobs()
        .iter()
        .map(|j| (j.id.as_str(), j.state))
        .collect();
    assert_eq!(
        ids,
        [
            ("report-nov", Some(JobState::WaitingChildren)),
            ("report-nov-sub", Some(JobState::WaitingChildren)),
            ("report-nov-a", Some(JobState::Waiting)),
            ("report-nov-b", Some(JobState::Waiting)),
            ("report-nov-c", Some(JobState::Waiting)),
        ]
    );
    // Added atomically, before any worker: the parents wait for their children.
    assert_eq!(
        parents.get_job_state("report-nov").await.unwrap(),
        Some(JobState::WaitingChildren)
    );

    let workers = app.start_workers().await.unwrap();
    wait_for_state(&parents, "report-nov", JobState::Completed, SOON).await;
    let root = parents.get_job("report-nov").await.unwrap().unwrap();
    assert_eq!(
        seen(root.return_value.as_ref().unwrap()),
        Seen {
            // 100 + 1*2 + 2*2, and 5*2; ordered by child.
            values: vec![("report-nov-c".into(), 10), ("report-nov-sub".into(), 106)],
            failed: vec![],
        }
    );
    // The status view of the tree: the child names its parent, the parent its children.
    let sub = steps.get_job("report-nov-sub").await.unwrap().unwrap();
    let parent = sub.parent.unwrap();
    assert_eq!(
        (parent.queue(), parent.id.as_str()),
        ("parents", "report-nov")
    );
    let children = parents.get_children("report-nov", 10).await.unwrap();
    assert_eq!(children.processed_total, 2);
    assert_eq!(children.pending_total, 0);
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn adding_a_flow_whose_root_exists_adds_nothing() {
    let redis = TestRedis::new("flow-dup");
    let app = app(&redis).await;
    let steps = app.queue::<Step>("steps").unwrap();
    let parents = app.queue::<String>("parents").unwrap();
    let flow = || {
        parents
            .flow_job("collect", "x".into())
            .options(JobOptions::new().job_id("once"))
            .child(
                OnChildFailure::FailParent,
                steps.flow_job("double", step(1)),
            )
    };
    let first = app.add_flow(flow()).await.unwrap();
    assert!(!first.job.duplicate);
    let again = app.add_flow(flow()).await.unwrap();
    assert!(again.job.duplicate);
    assert_eq!(again.job.state, Some(JobState::WaitingChildren));
    assert!(again.children.is_empty());
    // One child only: the second add wrote nothing.
    assert_eq!(steps.get_job_counts().await.unwrap().waiting, 1);
}

#[tokio::test]
async fn a_bad_job_anywhere_in_the_tree_refuses_the_whole_flow() {
    let redis = TestRedis::new("flow-bad");
    let app = app(&redis).await;
    let steps = app.queue::<Step>("steps").unwrap();
    let parents = app.queue::<String>("parents").unwrap();
    let flow = parents.flow_job("collect", "x".into()).child(
        OnChildFailure::FailParent,
        steps.flow_job("subtotal", step(0)).child(
            OnChildFailure::FailParent,
            steps
                .flow_job("double", step(1))
                .options(JobOptions::new().attempts(0)),
        ),
    );
    let err = app.add_flow(flow).await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("root.0.0 (steps.double)"), "{message}");
    assert!(message.contains("attempts"), "{message}");
    let bad_id = parents.flow_job("collect", "x".into()).child(
        OnChildFailure::FailParent,
        steps
            .flow_job("double", step(1))
            .options(JobOptions::new().job_id("a:b")),
    );
    assert!(app.add_flow(bad_id).await.is_err());
    assert!(
        redis.keys().iter().all(|k| !k.ends_with(":wait")),
        "{:?}",
        redis.keys()
    );
    assert_eq!(steps.get_job_counts().await.unwrap().total(), 0);
    assert_eq!(parents.get_job_counts().await.unwrap().total(), 0);
}

/// A parent `p` with children `a` (policy under test; `child_a` decides what it does)
/// and `b` (doubles 3, or waits five minutes when `b_delayed`).
async fn add_pair(
    app: &QueueApp,
    id: &str,
    policy: OnChildFailure,
    child_a: Step,
    a_delayed: bool,
    b_delayed: bool,
) {
    let steps = app.queue::<Step>("steps").unwrap();
    let parents = app.queue::<String>("parents").unwrap();
    let later = |opts: JobOptions, later: bool| {
        if later {
            opts.delay(Duration::from_secs(300))
        } else {
            opts
        }
    };
    let flow = parents
        .flow_job("collect", id.to_owned())
        .options(JobOptions::new().job_id(id))
        .child(
            policy,
            steps.flow_job("double", child_a).options(later(
                JobOptions::new().job_id(format!("{id}-a")),
                a_delayed,
            )),
        )
        .child(
            OnChildFailure::FailParent,
            steps.flow_job("double", step(3)).options(later(
                JobOptions::new().job_id(format!("{id}-b")),
                b_delayed,
            )),
        );
    app.add_flow(flow).await.unwrap();
}

/// Waits for the parent's final event on its queue's stream.
async fn parent_outcome(events: &queue_core::events::QueueEvents, id: &str) -> QueueEvent {
    events
        .wait_for(SOON, |e| {
            matches!(e, QueueEvent::Completed { job_id, .. } | QueueEvent::Failed { job_id, .. } if job_id == id)
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn every_failure_policy_ends_the_parent_when_a_child_fails_for_good() {
    let redis = TestRedis::new("flow-policies");
    let app = app(&redis).await;
    let parents = app.queue::<String>("parents").unwrap();
    let events = app.queue_events("parents").await.unwrap();
    let prefix = redis.prefix().to_owned();
    let workers = app.start_workers().await.unwrap();

    // Fail the parent: it fails without running, naming the child.
    add_pair(
        &app,
        "fp",
        OnChildFailure::FailParent,
        failing(1),
        false,
        false,
    )
    .await;
    match parent_outcome(&events, "fp").await {
        QueueEvent::Failed { reason, .. } => {
            assert_eq!(reason, format!("child {prefix}:steps:fp-a failed"))
        }
        other => panic!("fp: {other:?}"),
    }
    let fp = parents.get_job("fp").await.unwrap().unwrap();
    assert_eq!(fp.return_value, None);
    assert_eq!(
        fp.failed_reason.as_deref(),
        Some(format!("child {prefix}:steps:fp-a failed").as_str())
    );

    // Continue: the parent runs at once, though `b` still waits out its delay.
    add_pair(
        &app,
        "cp",
        OnChildFailure::ContinueParent,
        failing(1),
        false,
        true,
    )
    .await;
    match parent_outcome(&events, "cp").await {
        QueueEvent::Completed { return_value, .. } => assert_eq!(
            seen(&return_value),
            Seen {
                values: vec![],
                failed: vec![("cp-a".into(), "step 1 broke".into())],
            }
        ),
        other => panic!("cp: {other:?}"),
    }
    // Once the parent completed, the child it did not wait for was dropped: BullMQ
    // would not have let the parent complete with it pending.
    let steps = app.queue::<Step>("steps").unwrap();
    assert_eq!(steps.get_job("cp-b").await.unwrap(), None);

    // Ignore: the parent runs when `b` is done, and sees the failure.
    add_pair(
        &app,
        "ig",
        OnChildFailure::IgnoreDependency,
        failing(1),
        false,
        false,
    )
    .await;
    match parent_outcome(&events, "ig").await {
        QueueEvent::Completed { return_value, .. } => assert_eq!(
            seen(&return_value),
            Seen {
                values: vec![("ig-b".into(), 6)],
                failed: vec![("ig-a".into(), "step 1 broke".into())],
            }
        ),
        other => panic!("ig: {other:?}"),
    }

    // Remove: the parent runs when `b` is done, as if `a` had never been there.
    add_pair(
        &app,
        "rd",
        OnChildFailure::RemoveDependency,
        failing(1),
        false,
        false,
    )
    .await;
    match parent_outcome(&events, "rd").await {
        QueueEvent::Completed { return_value, .. } => assert_eq!(
            seen(&return_value),
            Seen {
                values: vec![("rd-b".into(), 6)],
                failed: vec![],
            }
        ),
        other => panic!("rd: {other:?}"),
    }
    assert_eq!(parents.get_job_counts().await.unwrap().waiting_children, 0);
    workers.shutdown(SOON).await;
    events.close().await;
}

#[tokio::test]
async fn removing_a_pending_child_releases_its_parent_under_every_policy() {
    let redis = TestRedis::new("flow-removed");
    let app = app(&redis).await;
    let steps = app.queue::<Step>("steps").unwrap();
    let parents = app.queue::<String>("parents").unwrap();
    let events = app.queue_events("parents").await.unwrap();
    let workers = app.start_workers().await.unwrap();

    for (id, policy) in [
        ("fp", OnChildFailure::FailParent),
        ("cp", OnChildFailure::ContinueParent),
        ("ig", OnChildFailure::IgnoreDependency),
        ("rd", OnChildFailure::RemoveDependency),
    ] {
        // `a` waits five minutes; `b` completes; the parent waits for `a`.
        add_pair(&app, id, policy, step(1), true, false).await;
        wait_for_state(&steps, &format!("{id}-b"), JobState::Completed, SOON).await;
        assert_eq!(
            parents.get_job_state(id).await.unwrap(),
            Some(JobState::WaitingChildren),
            "{id}"
        );
        assert!(steps.remove(&format!("{id}-a")).await.unwrap(), "{id}");
        match parent_outcome(&events, id).await {
            QueueEvent::Completed { return_value, .. } => assert_eq!(
                seen(&return_value),
                Seen {
                    values: vec![(format!("{id}-b"), 6)],
                    failed: vec![],
                },
                "{id}"
            ),
            other => panic!("{id}: {other:?}"),
        }
    }
    workers.shutdown(SOON).await;
    events.close().await;
}

#[tokio::test]
async fn cancelling_a_parent_whose_child_runs_stops_the_child_and_fails_the_parent() {
    let redis = TestRedis::new("flow-cancel");
    let app = app(&redis).await;
    let steps = app.queue::<Step>("steps").unwrap();
    let parents = app.queue::<String>("parents").unwrap();
    let workers = app.start_workers().await.unwrap();
    let slow = Step {
        n: 1,
        mode: "slow".into(),
    };
    add_pair(&app, "x", OnChildFailure::FailParent, slow, false, true).await;
    wait_for_state(&steps, "x-a", JobState::Active, SOON).await;

    // The parent cannot be removed (its child holds a lock): the running child is
    // signalled, fails as cancelled, and its policy fails the parent.
    let outcome = parents.cancel("x").await.unwrap();
    assert!(
        matches!(outcome, queue_core::queue::CancelOutcome::Signalled { listeners } if listeners >= 1),
        "{outcome:?}"
    );
    wait_for_state(&parents, "x", JobState::Failed, SOON).await;
    let a = steps.get_job("x-a").await.unwrap().unwrap();
    assert_eq!(a.attempts_made, 1);
    assert!(a.failed_reason.unwrap().contains("cancel"));
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_child_value_that_does_not_fit_fails_the_parent_naming_the_child() {
    let redis = TestRedis::new("flow-misfit");
    async fn wants_text(_job: Job<()>, c: ChildResults<String>) -> Result<usize, JobError> {
        Ok(c.len())
    }
    let app = redis
        .builder()
        .processor(Processor::new("steps").job("double", double))
        .processor(Processor::new("parents").job("text", wants_text))
        .build()
        .await
        .unwrap();
    let parents = app.queue::<()>("parents").unwrap();
    let steps = app.queue::<Step>("steps").unwrap();
    let flow = parents
        .flow_job("text", ())
        .options(JobOptions::new().job_id("p").attempts(3))
        .child(
            OnChildFailure::FailParent,
            steps
                .flow_job("double", step(4))
                .options(JobOptions::new().job_id("c")),
        );
    app.add_flow(flow).await.unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&parents, "p", JobState::Failed, SOON).await;
    let p = parents.get_job("p").await.unwrap().unwrap();
    // Not retried: no retry can change what the child returned.
    assert_eq!(p.attempts_made, 1);
    let reason = p.failed_reason.unwrap();
    assert!(reason.contains("child steps/c"), "{reason}");
    assert!(reason.contains("String"), "{reason}");
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn node_flows_run_here_and_our_flows_run_in_node() {
    let redis = TestRedis::new("flow-node");
    let app = app(&redis).await;
    let parents = app.queue::<String>("parents").unwrap();
    let prefix = redis.prefix().to_owned();

    // Node's FlowProducer; our workers run both levels, and our parent reads typed results.
    let tree = serde_json::json!({
        "name": "collect", "queueName": "parents", "data": "from node",
        "opts": {"jobId": "node-root"},
        "children": [
            {"name": "double", "queueName": "steps", "data": {"n": 7}, "opts": {"jobId": "node-a", "failParentOnFailure": true}},
            {"name": "double", "queueName": "steps", "data": {"n": 8}, "opts": {"jobId": "node-b", "failParentOnFailure": true}}
        ]
    })
    .to_string();
    let lines = queue_tests::node::run(&prefix, &["flow", "-", &tree]).await;
    assert_eq!(lines[0]["flow"]["id"], "node-root");
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&parents, "node-root", JobState::Completed, SOON).await;
    let root = parents.get_job("node-root").await.unwrap().unwrap();
    assert_eq!(
        seen(root.return_value.as_ref().unwrap()),
        Seen {
            values: vec![("node-a".into(), 14), ("node-b".into(), 16)],
            failed: vec![],
        }
    );
    workers.shutdown(SOON).await;

    // Ours; Node's worker runs the children, then the parent, which reads their values.
    let node_queue = app.queue::<serde_json::Value>("nodeflow").unwrap();
    let flow = node_queue
        .flow_job("parent", serde_json::json!({"of": "rust"}))
        .options(JobOptions::new().job_id("rust-root"))
        .child(
            OnChildFailure::FailParent,
            node_queue
                .flow_job("child", serde_json::json!({"k": 1}))
                .options(JobOptions::new().job_id("rust-a")),
        )
        .child(
            OnChildFailure::IgnoreDependency,
            node_queue
                .flow_job("child", serde_json::json!({"k": 2}))
                .options(JobOptions::new().job_id("rust-b")),
        );
    app.add_flow(flow).await.unwrap();
    let lines = queue_tests::node::run(&prefix, &["work", "nodeflow", "3"]).await;
    let parent = lines
        .iter()
        .find(|l| l["id"] == "rust-root")
        .expect("node ran the parent");
    let values = &parent["childrenValues"];
    assert_eq!(
        values[format!("{prefix}:nodeflow:rust-a")]["echo"],
        serde_json::json!({"k": 1})
    );
    assert_eq!(
        values[format!("{prefix}:nodeflow:rust-b")]["by"],
        serde_json::json!("node")
    );
    // Node ran the parent last, after both children.
    assert_eq!(lines.last().unwrap()["id"], "rust-root");
    // And each child's policy is stored where BullMQ's scripts read it, in the
    // child's `parent` field.
    let a = redis.job_field("nodeflow", "rust-a", "parent").unwrap();
    assert!(a.contains("\"fpof\":true"), "{a}");
    let b = redis.job_field("nodeflow", "rust-b", "parent").unwrap();
    assert!(b.contains("\"idof\":true"), "{b}");
}

#[tokio::test]
async fn the_status_route_shows_a_flows_parent_and_its_children_by_outcome() {
    use queue_axum::{JobRoutes, QueueLayer};
    use queue_tests::http::{get, listener};

    let redis = TestRedis::new("flow-status");
    let app = app(&redis).await;
    let steps = app.queue::<Step>("steps").unwrap();
    let parents = app.queue::<String>("parents").unwrap();
    let serve = |routes: JobRoutes| {
        let app = app.clone();
        async move {
            let (listener, addr) = listener().await;
            let router = routes.router().layer(QueueLayer::new(&app));
            tokio::spawn(async move { axum::serve(listener, router).await });
            addr
        }
    };
    let public = serve(JobRoutes::new()).await;
    let operator = serve(
        JobRoutes::new()
            .include_failed_reason(true)
            .include_return_value(true),
    )
    .await;

    // `a` fails (ignored), `b` completes, `c` waits five minutes: the parent waits.
    let flow = parents
        .flow_job("collect", "s".into())
        .options(JobOptions::new().job_id("s"))
        .child(
            OnChildFailure::IgnoreDependency,
            steps
                .flow_job("double", failing(1))
                .options(JobOptions::new().job_id("s-a")),
        )
        .child(
            OnChildFailure::FailParent,
            steps
                .flow_job("double", step(2))
                .options(JobOptions::new().job_id("s-b")),
        )
        .child(
            OnChildFailure::FailParent,
            steps.flow_job("double", step(3)).options(
                JobOptions::new()
                    .job_id("s-c")
                    .delay(Duration::from_secs(300)),
            ),
        );
    app.add_flow(flow).await.unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&steps, "s-a", JobState::Failed, SOON).await;
    wait_for_state(&steps, "s-b", JobState::Completed, SOON).await;

    let body = get(public, "/jobs/parents/s").await.json();
    assert_eq!(body["state"], "waiting-children");
    assert_eq!(
        body["children"],
        serde_json::json!({
            "pending": [{"queue": "steps", "id": "s-c"}], "pendingTotal": 1,
            "processed": [{"queue": "steps", "id": "s-b"}], "processedTotal": 1,
            "failed": [{"queue": "steps", "id": "s-a"}], "failedTotal": 1,
        })
    );
    let body = get(operator, "/jobs/parents/s").await.json();
    assert_eq!(body["children"]["processed"][0]["returnValue"], 4);
    assert_eq!(
        body["children"]["failed"][0]["failedReason"],
        "step 1 broke"
    );

    let child = get(public, "/jobs/steps/s-b").await.json();
    assert_eq!(
        child["parent"],
        serde_json::json!({"queue": "parents", "id": "s"})
    );
    assert!(child.get("children").is_none(), "{child}");
    // A route that does not serve the parent's queue does not name it.
    let steps_only = serve(JobRoutes::new().queues(["steps"])).await;
    let child = get(steps_only, "/jobs/steps/s-b").await.json();
    assert!(child.get("parent").is_none(), "{child}");
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn every_job_of_a_flow_carries_the_adding_requests_trace_and_its_own_options() {
    use queue_core::trace::{scope, TraceContext};

    let redis = TestRedis::new("flow-trace");
    let app = app(&redis).await;
    let steps = app.queue::<Step>("steps").unwrap();
    let parents = app.queue::<String>("parents").unwrap();
    let flow = parents
        .flow_job("collect", "t".into())
        .options(JobOptions::new().job_id("t"))
        .child(
            OnChildFailure::FailParent,
            steps.flow_job("double", step(1)).options(
                JobOptions::new()
                    .job_id("t-c")
                    .timeout(Duration::from_secs(7)),
            ),
        );
    let request = TraceContext::new_root();
    scope(request.clone(), app.add_flow(flow)).await.unwrap();
    let child = steps.get_job("t-c").await.unwrap().unwrap();
    let root = parents.get_job("t").await.unwrap().unwrap();
    for job in [&child, &root] {
        let trace = job.options.get_trace().expect("a trace context");
        assert_eq!(trace.trace_id(), request.trace_id(), "{}", job.id);
    }
    assert_eq!(child.options.get_timeout(), Some(Duration::from_secs(7)));
}

#[tokio::test]
async fn a_deduplication_id_in_a_flow_is_refused_in_favour_of_a_job_id() {
    let redis = TestRedis::new("flow-dedup");
    let app = app(&redis).await;
    let steps = app.queue::<Step>("steps").unwrap();
    let parents = app.queue::<String>("parents").unwrap();
    for (root, child) in [
        (
            JobOptions::new().deduplication(queue_core::options::Deduplication::new("d")),
            JobOptions::new(),
        ),
        (
            JobOptions::new(),
            JobOptions::new().deduplication(queue_core::options::Deduplication::new("d")),
        ),
    ] {
        let flow = parents.flow_job("collect", "x".into()).options(root).child(
            OnChildFailure::FailParent,
            steps.flow_job("double", step(1)).options(child),
        );
        let err = app.add_flow(flow).await.unwrap_err().to_string();
        assert!(
            err.contains("deduplication") && err.contains("job_id"),
            "{err}"
        );
    }
    assert_eq!(parents.get_job_counts().await.unwrap().total(), 0);
    assert_eq!(steps.get_job_counts().await.unwrap().total(), 0);
}
