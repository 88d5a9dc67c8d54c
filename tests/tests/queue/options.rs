//! Job options observed in Redis state and in the order jobs run: delay, priority,
//! lifo and retention by count and age.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queue_core::{Dep, Job, JobError, JobOptions, JobState, Processor, Retention};
use queue_tests::{wait_for_completed, wait_for_state, wait_until, TestRedis, SOON};

#[derive(Default)]
struct Order(Mutex<Vec<String>>);

async fn record(job: Job<()>, order: Dep<Order>) -> Result<(), JobError> {
    order.0.lock().unwrap().push(job.id().to_owned());
    Ok(())
}

fn recorder(redis: &TestRedis, order: &Arc<Order>) -> queue_core::QueueAppBuilder {
    redis
        .builder()
        .provide_arc(order.clone())
        .processor(Processor::new("q").concurrency(1).any_job(record))
}

#[tokio::test]
async fn a_delayed_job_waits_in_delayed_until_due() {
    let redis = TestRedis::new("delay");
    let order = Arc::new(Order::default());
    let app = recorder(&redis, &order).build().await.unwrap();
    let q = app.queue::<()>("q").unwrap();
    let workers = app.start_workers().await.unwrap();

    let added = q
        .add(
            "d",
            (),
            JobOptions::new()
                .job_id("later")
                .delay(Duration::from_millis(600)),
        )
        .await
        .unwrap();
    assert_eq!(added.state, Some(JobState::Delayed));
    assert_eq!(
        q.get_job_state("later").await.unwrap(),
        Some(JobState::Delayed)
    );
    wait_for_state(&q, "later", JobState::Completed, SOON).await;
    let info = q.get_job("later").await.unwrap().unwrap();
    let waited = info.processed_on_ms.unwrap() - info.timestamp_ms;
    assert!(waited >= 600, "ran after {waited} ms");
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn priority_and_lifo_decide_the_order() {
    let redis = TestRedis::new("order");
    let order = Arc::new(Order::default());
    let app = recorder(&redis, &order).build().await.unwrap();
    let q = app.queue::<()>("q").unwrap();
    q.pause().await.unwrap();
    assert!(q.is_paused().await.unwrap());

    let add = |id: &'static str, opts: JobOptions| {
        let q = q.clone();
        async move { q.add("o", (), opts.job_id(id)).await.unwrap() }
    };
    add("p-3", JobOptions::new().priority(3)).await;
    add("p-1", JobOptions::new().priority(1)).await;
    add("fifo-a", JobOptions::new()).await;
    add("fifo-b", JobOptions::new()).await;
    add("lifo", JobOptions::new().lifo()).await;
    add("p-2", JobOptions::new().priority(2)).await;
    assert_eq!(
        q.get_job_state("p-1").await.unwrap(),
        Some(JobState::Prioritized)
    );

    let workers = app.start_workers().await.unwrap();
    q.resume().await.unwrap();
    wait_until(SOON, "six jobs run", || async {
        (order.0.lock().unwrap().len() == 6).then_some(())
    })
    .await;
    // BullMQ runs jobs without priority first (lifo ones ahead), then by priority.
    assert_eq!(
        *order.0.lock().unwrap(),
        ["lifo", "fifo-a", "fifo-b", "p-1", "p-2", "p-3"]
    );
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn retention_keeps_the_last_n_and_drops_old_jobs() {
    let redis = TestRedis::new("retention");
    let order = Arc::new(Order::default());
    let app = recorder(&redis, &order).build().await.unwrap();
    let q = app.queue::<()>("q").unwrap();
    let workers = app.start_workers().await.unwrap();

    for i in 0..5 {
        q.add(
            "r",
            (),
            JobOptions::new()
                .job_id(format!("count-{i}"))
                .remove_on_complete(Retention::Last(2)),
        )
        .await
        .unwrap();
    }
    wait_until(SOON, "five runs", || async {
        (order.0.lock().unwrap().len() == 5).then_some(())
    })
    .await;
    wait_for_completed(&q, 2, SOON).await;
    assert!(
        q.get_job("count-0").await.unwrap().is_none(),
        "the oldest is gone, hash and all"
    );
    assert!(q.get_job("count-4").await.unwrap().is_some());

    q.add(
        "r",
        (),
        JobOptions::new()
            .job_id("none-1")
            .remove_on_complete(Retention::None),
    )
    .await
    .unwrap();
    wait_until(SOON, "none-1 ran", || async {
        order
            .0
            .lock()
            .unwrap()
            .contains(&"none-1".to_owned())
            .then_some(())
    })
    .await;
    wait_until(SOON, "none-1 removed", || async {
        q.get_job("none-1").await.unwrap().is_none().then_some(())
    })
    .await;

    // Age is in whole seconds: a job finished over a second ago goes when the next one finishes.
    let by_age = || JobOptions::new().remove_on_complete(Retention::Age(Duration::from_secs(1)));
    q.add("r", (), by_age().job_id("old-1")).await.unwrap();
    wait_for_state(&q, "old-1", JobState::Completed, SOON).await;
    let finished = q
        .get_job("old-1")
        .await
        .unwrap()
        .unwrap()
        .finished_on_ms
        .unwrap();
    wait_until(SOON, "two seconds past old-1", || async {
        (now_ms() > finished + 2000).then_some(())
    })
    .await;
    q.add("r", (), by_age().job_id("new-1")).await.unwrap();
    wait_for_state(&q, "new-1", JobState::Completed, SOON).await;
    wait_until(SOON, "old-1 aged out", || async {
        q.get_job("old-1").await.unwrap().is_none().then_some(())
    })
    .await;
    workers.shutdown(SOON).await;
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Our bounded default retention lives on our workers (BullMQ's worker-level
/// `removeOnComplete`), not in every job: a job that sets nothing stores nothing for it,
/// while retention the app or the job asks for is stored with the job, as BullMQ does.
#[tokio::test]
async fn default_retention_costs_a_job_no_bytes_and_explicit_retention_travels_with_it() {
    let redis = TestRedis::new("retention-bytes");
    let plain = redis.builder().build().await.unwrap();
    let explicit = redis
        .builder()
        .default_job_options(JobOptions::new().remove_on_complete(Retention::Last(5)))
        .build()
        .await
        .unwrap();
    for (app, id) in [(&plain, "plain-1"), (&explicit, "explicit-1")] {
        let q = app.queue::<()>("q").unwrap();
        q.add("x", (), JobOptions::new().job_id(id)).await.unwrap();
    }
    let opts = |id: &str| -> serde_json::Value {
        serde_json::from_str(&redis.job_field("q", id, "opts").unwrap()).unwrap()
    };
    assert_eq!(opts("plain-1"), serde_json::json!({"jobId": "plain-1"}));
    assert_eq!(opts("explicit-1")["removeOnComplete"], 5);
}

async fn nothing(_job: Job<()>) -> Result<(), JobError> {
    Ok(())
}

/// The app's default retention is also its workers' retention for jobs that set none,
/// whoever added them (here another app, standing for a Node producer).
#[tokio::test]
async fn the_apps_default_retention_holds_for_jobs_other_producers_added() {
    let redis = TestRedis::new("retention-worker");
    let producer = redis.builder().build().await.unwrap();
    let q = producer.queue::<()>("q").unwrap();
    for i in 0..5 {
        q.add("x", (), JobOptions::new().job_id(format!("other-{i}")))
            .await
            .unwrap();
    }
    let consumer = redis
        .builder()
        .default_job_options(JobOptions::new().remove_on_complete(Retention::Last(2)))
        .processor(Processor::new("q").any_job(nothing))
        .build()
        .await
        .unwrap();
    let workers = consumer.start_workers().await.unwrap();
    wait_until(SOON, "all five processed", || async {
        let counts = q.get_job_counts().await.unwrap();
        (counts.waiting + counts.active == 0).then_some(())
    })
    .await;
    workers.shutdown(SOON).await;
    assert_eq!(q.get_job_counts().await.unwrap().completed, 2);
}

#[tokio::test]
async fn a_queue_has_default_job_options_of_its_own_over_the_apps() {
    let redis = TestRedis::new("queue-defaults");
    let order = Arc::new(Order::default());
    let app = recorder(&redis, &order)
        .default_job_options(
            JobOptions::new()
                .attempts(2)
                .backoff(queue_core::Backoff::fixed(Duration::from_millis(10))),
        )
        .queue_defaults(
            "q",
            JobOptions::new()
                .attempts(4)
                .remove_on_complete(Retention::Last(1)),
        )
        .build()
        .await
        .unwrap();
    let q = app.queue::<()>("q").unwrap();
    let other = app.queue::<()>("other").unwrap();
    q.add("x", (), JobOptions::new().job_id("plain"))
        .await
        .unwrap();
    q.add("x", (), JobOptions::new().job_id("own").attempts(1))
        .await
        .unwrap();
    other
        .add("x", (), JobOptions::new().job_id("o"))
        .await
        .unwrap();
    async fn options(queue: &queue_core::Queue<()>, id: &str) -> JobOptions {
        queue.get_job(id).await.unwrap().unwrap().options
    }
    // The queue's own, then the app's for what the queue leaves unset.
    let plain = options(&q, "plain").await;
    assert_eq!(
        plain,
        JobOptions::new()
            .job_id("plain")
            .attempts(4)
            .backoff(queue_core::Backoff::fixed(Duration::from_millis(10)))
            .remove_on_complete(Retention::Last(1))
    );
    // A job's own option wins.
    assert_eq!(q.get_job("own").await.unwrap().unwrap().max_attempts, 1);
    // Another queue has the app's only.
    assert_eq!(other.get_job("o").await.unwrap().unwrap().max_attempts, 2);
    assert_eq!(
        options(&other, "o").await,
        JobOptions::new()
            .job_id("o")
            .attempts(2)
            .backoff(queue_core::Backoff::fixed(Duration::from_millis(10)))
    );

    // The queue's workers keep finished jobs by its retention, also for jobs another
    // producer added without any.
    let plain_producer = redis
        .app(|b| b.registrations(queue_core::app::Registrations::None))
        .await;
    let foreign = plain_producer.queue::<()>("q").unwrap();
    for id in ["f1", "f2", "f3"] {
        foreign
            .add("x", (), JobOptions::new().job_id(id))
            .await
            .unwrap();
    }
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "every job of q to run", || async {
        (order.0.lock().unwrap().len() == 5).then_some(())
    })
    .await;
    wait_for_completed(&q, 1, SOON).await;
    workers.shutdown(SOON).await;

    // Defaults that cannot be: refused at build, naming the queue.
    for (bad, what) in [
        (JobOptions::new().attempts(0), "attempts"),
        (JobOptions::new().job_id("same-for-all"), "duplicate"),
    ] {
        let err = redis
            .builder()
            .queue_defaults("mail", bad)
            .build()
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("queue `mail`") && err.contains(what), "{err}");
    }
}
