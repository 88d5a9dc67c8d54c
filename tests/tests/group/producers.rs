//! A job's group travels every way a job is added: the typed contracts, flows and the
//! outbox (SQLite and PostgreSQL); grouped workers then run it, and its stored options
//! say its group where BullMQ Pro and a Node producer put it (`opts.group.id`).

use std::sync::{Arc, Mutex};

use queue_core::prelude::*;
use queue_core::{app::Registrations, group::GroupLimits, JobOptions as Options, OnChildFailure};
use queue_tests::db::AnyDb;
use queue_tests::{wait_for_state, TestRedis, SOON};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Render {
    page: u32,
}

#[job_queue("groups-contract")]
enum Reports {
    #[job("render")]
    Render(Render),
}

/// The ids of the jobs that ran.
#[derive(Default)]
struct Ran(Mutex<Vec<String>>);

async fn render(job: Job<Render>, ran: Dep<Ran>) -> Result<(), JobError> {
    ran.0.lock().unwrap().push(job.id().to_owned());
    Ok(())
}

fn stored_group(redis: &TestRedis, queue: &str, id: &str) -> Option<String> {
    let opts = redis.job_field(queue, id, "opts")?;
    let opts: serde_json::Value = serde_json::from_str(&opts).ok()?;
    opts["group"]["id"].as_str().map(str::to_owned)
}

#[tokio::test]
async fn a_typed_contracts_job_is_added_to_its_group_and_run() {
    let redis = TestRedis::new("groups-contract");
    let ran = Arc::new(Ran::default());
    let app = redis
        .builder()
        .registrations(Registrations::None)
        .provide_arc(ran.clone())
        .processor(
            Processor::of::<Reports>()
                .groups(GroupLimits::new().concurrency(1))
                .handle(render),
        )
        .build()
        .await
        .unwrap();
    let reports = app.queue_of::<Reports>().unwrap();
    let added = reports
        .add_job(
            Render { page: 1 },
            Options::new().group("acme").job_id("render-1"),
        )
        .await
        .unwrap();
    assert_eq!(added.state, Some(JobState::Waiting));
    let workers = app.start_workers().await.unwrap();
    let queue = app.queue::<Render>("groups-contract").unwrap();
    wait_for_state(&queue, "render-1", JobState::Completed, SOON).await;
    assert_eq!(
        stored_group(&redis, "groups-contract", "render-1").as_deref(),
        Some("acme")
    );
    assert_eq!(*ran.0.lock().unwrap(), ["render-1"]);
    assert!(workers.shutdown(SOON).await.is_clean());
}

/// A grouped job on a queue this app's workers take without groups would wait in its
/// group for good: `add`, `add_bulk`, flows and the typed contracts refuse it, writing
/// nothing.
#[tokio::test]
async fn a_grouped_job_for_a_queue_processed_without_groups_is_refused_at_add() {
    let redis = TestRedis::new("groups-refused");
    let ran = Arc::new(Ran::default());
    let app = redis
        .builder()
        .registrations(Registrations::None)
        .provide_arc(ran.clone())
        .processor(Processor::of::<Reports>().handle(render))
        .build()
        .await
        .unwrap();
    let reports = app.queue_of::<Reports>().unwrap();
    let refused = reports
        .add_job(Render { page: 1 }, Options::new().group("acme"))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, queue_core::Error::InvalidOption { option: "group", reason }
            if reason.contains("groups-contract") && reason.contains("without groups")),
        "{refused}"
    );
    let queue = app.queue::<Render>("groups-contract").unwrap();
    let bulk = queue
        .add_bulk(vec![
            queue_core::queue::BulkJob::new("render", Render { page: 2 }),
            queue_core::queue::BulkJob::new("render", Render { page: 3 })
                .options(Options::new().group("acme")),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(
            &bulk,
            queue_core::Error::InvalidOption {
                option: "group",
                ..
            }
        ),
        "{bulk}"
    );
    // A flow whose child names a group is refused whole, naming the child.
    let flow = queue.flow_job("render", Render { page: 5 }).child(
        OnChildFailure::FailParent,
        queue
            .flow_job("render", Render { page: 6 })
            .options(Options::new().group("acme")),
    );
    let in_flow = app.add_flow(flow).await.unwrap_err();
    assert!(
        matches!(
            &in_flow,
            queue_core::Error::InvalidOption {
                option: "group",
                ..
            }
        ),
        "{in_flow}"
    );
    let counts = queue.get_job_counts().await.unwrap();
    assert_eq!(
        counts.waiting + counts.prioritized + counts.waiting_children,
        0,
        "nothing added: {counts:?}"
    );
    // The same job without a group is taken as ever.
    reports
        .add_job(Render { page: 4 }, Options::new().job_id("render-4"))
        .await
        .unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&queue, "render-4", JobState::Completed, SOON).await;
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn a_flows_jobs_keep_their_groups_and_the_parent_runs_after_its_children() {
    let redis = TestRedis::new("groups-flow");
    let ran = Arc::new(Ran::default());
    let app = redis
        .builder()
        .registrations(Registrations::None)
        .provide_arc(ran.clone())
        .processor(
            Processor::new("groups-flow")
                .concurrency(4)
                .groups(GroupLimits::new().concurrency(1))
                .job("render", render),
        )
        .build()
        .await
        .unwrap();
    let q = app.queue::<Render>("groups-flow").unwrap();
    let flow = q
        .flow_job("render", Render { page: 0 })
        .options(Options::new().group("acme").job_id("book"))
        .child(
            OnChildFailure::FailParent,
            q.flow_job("render", Render { page: 1 })
                .options(Options::new().group("acme").job_id("page-1")),
        )
        .child(
            OnChildFailure::FailParent,
            q.flow_job("render", Render { page: 2 })
                .options(Options::new().group("globex").job_id("page-2")),
        );
    app.add_flow(flow).await.unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&q, "book", JobState::Completed, SOON).await;
    for (id, group) in [("book", "acme"), ("page-1", "acme"), ("page-2", "globex")] {
        assert_eq!(
            stored_group(&redis, "groups-flow", id).as_deref(),
            Some(group)
        );
    }
    let ran = ran.0.lock().unwrap().clone();
    assert_eq!(ran.len(), 3);
    assert_eq!(ran[2], "book", "the parent ran last: {ran:?}");
    assert!(workers.shutdown(SOON).await.is_clean());
}

queue_tests::on_both_databases!(an_outbox_row_keeps_its_group_through_the_relay);

async fn an_outbox_row_keeps_its_group_through_the_relay(db: AnyDb) {
    let redis = TestRedis::new("groups-outbox");
    let ran = Arc::new(Ran::default());
    let app = redis
        .app(|b| {
            b.outbox(db.outbox()).provide_arc(ran.clone()).processor(
                Processor::new("groups-outbox")
                    .groups(GroupLimits::new().concurrency(1))
                    .job("render", render),
            )
        })
        .await;
    let q = app.queue::<Render>("groups-outbox").unwrap();
    db.add_in(
        &q,
        vec![(
            "render",
            Render { page: 3 },
            Options::new()
                .group("initech")
                .priority(2)
                .job_id("render-3"),
        )],
        true,
    )
    .await;
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&q, "render-3", JobState::Completed, SOON).await;
    assert_eq!(
        stored_group(&redis, "groups-outbox", "render-3").as_deref(),
        Some("initech"),
        "{}",
        db.kind()
    );
    let info = q.get_job("render-3").await.unwrap().unwrap();
    assert_eq!(
        info.priority, 2,
        "the priority inside the group came through"
    );
    assert!(app.shutdown(workers, SOON).await.is_clean());
}
