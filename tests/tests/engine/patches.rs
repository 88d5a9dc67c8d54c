//! The changes we carry in `queue-engine` (listed in `queue-engine/PATCHES.md`),
//! tested on the engine's own API, against a real Redis.

use std::sync::Arc;

use futures::FutureExt;

use bullmq::options::RedisConnectionOptions;
use bullmq::{JobOptions, Queue, QueueOptions, Worker, WorkerOptions};
use queue_tests::{redis_url, wait_until, TestRedis, SOON};

async fn queue(redis: &TestRedis, name: &str) -> Queue {
    let options = QueueOptions::new()
        .connection(RedisConnectionOptions::new().url(redis_url()))
        .prefix(redis.prefix().to_owned());
    Queue::with_options(name, options).await.unwrap()
}

fn worker_options(redis: &TestRedis) -> WorkerOptions {
    WorkerOptions {
        connection: RedisConnectionOptions::new().url(redis_url()),
        prefix: redis.prefix().to_owned(),
        // Seconds an idle worker blocks for new jobs; `close` waits for it.
        drain_delay: 1,
        ..Default::default()
    }
}

#[tokio::test]
async fn telemetry_and_unmodelled_options_are_stored_and_read_back() {
    let redis = TestRedis::new("patch-opts");
    let q = queue(&redis, "opts").await;
    let metadata = r#"{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}"#;
    let opts = JobOptions::new()
        .job_id("o-1")
        .attempts(2)
        .telemetry_metadata(metadata)
        .extension("timeout", 2500.into())
        .extension("owner", serde_json::json!({"team": "mail"}));
    q.add("x", serde_json::json!({}))
        .options(opts)
        .await
        .unwrap();

    // Stored under Node's keys, as Node stores them.
    let stored: serde_json::Value =
        serde_json::from_str(&redis.job_field("opts", "o-1", "opts").unwrap()).unwrap();
    assert_eq!(stored["tm"], metadata);
    assert_eq!(stored["timeout"], 2500);
    assert_eq!(stored["owner"], serde_json::json!({"team": "mail"}));
    assert_eq!(stored["attempts"], 2);

    let job = q.get_job("o-1").await.unwrap().unwrap();
    assert_eq!(job.opts().telemetry_metadata.as_deref(), Some(metadata));
    assert_eq!(job.opts().extensions.get("timeout"), Some(&2500.into()));
    assert_eq!(job.opts().attempts, Some(2));
    assert!(
        !job.opts().extensions.contains_key("attempts"),
        "modelled keys are not extensions"
    );
}

/// An option the engine models cannot also be given as an extension: the add would
/// pack the key twice (the engine's value, then the extension's), Lua would keep the
/// last, and the scripts' other arguments (the deduplication key, say) would disagree
/// with what is stored. Refused with a clear error, and nothing is added.
#[tokio::test]
async fn an_extension_under_a_key_the_engine_models_is_refused() {
    let redis = TestRedis::new("patch-ext-keys");
    let q = queue(&redis, "ext").await;
    for (key, value) in [
        ("attempts", serde_json::json!(1)),
        ("de", serde_json::json!({"id": "d-1"})),
        ("tm", serde_json::json!("{}")),
        ("omc", serde_json::json!(true)),
        ("jobId", serde_json::json!("other")),
        ("removeOnComplete", serde_json::json!(true)),
    ] {
        let opts = JobOptions::new()
            .job_id(format!("ext-{key}"))
            .attempts(5)
            .extension(key, value);
        let added = q.add("x", serde_json::json!({})).options(opts).await;
        assert!(
            matches!(&added, Err(bullmq::Error::InvalidConfig(m)) if m.contains(&format!("`{key}`"))),
            "an extension `{key}` is refused: {added:?}"
        );
        assert!(
            redis
                .job_field("ext", &format!("ext-{key}"), "opts")
                .is_none(),
            "nothing added for `{key}`"
        );
    }
    // In a bulk add too, before anything is written.
    let bulk = q
        .add_bulk(vec![
            bullmq::BulkJob::new("x", serde_json::json!({})),
            bullmq::BulkJob::with_options(
                "x",
                serde_json::json!({}),
                JobOptions::new().extension("delay", 10.into()),
            ),
        ])
        .await;
    assert!(
        matches!(&bulk, Err(bullmq::Error::InvalidConfig(m)) if m.contains("`delay`")),
        "{bulk:?}"
    );
    assert_eq!(q.get_job_counts().await.unwrap().waiting, 0);
}

#[tokio::test]
async fn a_flows_jobs_keep_their_telemetry_and_unmodelled_options() {
    use bullmq::{FlowJob, FlowProducer};

    let redis = TestRedis::new("patch-flow-opts");
    let producer = FlowProducer::with_options(
        bullmq::FlowProducerOptions::new()
            .connection(RedisConnectionOptions::new().url(redis_url()))
            .prefix(redis.prefix()),
    )
    .await
    .unwrap();
    let metadata = r#"{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}"#;
    let carried = |id: &str| {
        JobOptions::new()
            .job_id(id)
            .telemetry_metadata(metadata)
            .extension("timeout", 2500.into())
    };
    let flow = FlowJob::new("parent", "flow-opts", serde_json::json!({}))
        .unwrap()
        .options(carried("p"))
        .add_child(
            FlowJob::new("child", "flow-opts", serde_json::json!({}))
                .unwrap()
                .options(carried("c").fail_parent_on_failure()),
        );
    producer.add(flow).await.unwrap();
    // The parent (added by `addParentJob`) and the child (a standard job) alike.
    for id in ["p", "c"] {
        let stored: serde_json::Value =
            serde_json::from_str(&redis.job_field("flow-opts", id, "opts").unwrap()).unwrap();
        assert_eq!(stored["tm"], metadata, "{id}");
        assert_eq!(stored["timeout"], 2500, "{id}");
    }
}

#[tokio::test]
async fn a_flows_commands_run_in_the_callers_watch_transaction() {
    use bullmq::{FlowJob, FlowOptions, FlowProducer};

    let redis = TestRedis::new("patch-flow-tx");
    let producer = FlowProducer::with_options(
        bullmq::FlowProducerOptions::new()
            .connection(RedisConnectionOptions::new().url(redis_url()))
            .prefix(redis.prefix()),
    )
    .await
    .unwrap();
    let flow = FlowJob::new("parent", "flow-tx", serde_json::json!({}))
        .unwrap()
        .options(JobOptions::new().job_id("p"))
        .add_child(
            FlowJob::new("child", "flow-tx", serde_json::json!({}))
                .unwrap()
                .options(JobOptions::new().job_id("c").fail_parent_on_failure()),
        );
    let transaction = producer
        .transaction_with_opts(flow, &FlowOptions::default())
        .unwrap();
    let client = redis::Client::open(redis_url()).unwrap();
    let mut own = client.get_multiplexed_async_connection().await.unwrap();
    let mut other = client.get_multiplexed_async_connection().await.unwrap();
    transaction.load_scripts(&mut own).await.unwrap();
    let child_key = format!("{}:flow-tx:c", redis.prefix());

    // A watched key written by another client: EXEC is aborted, nothing is written.
    redis::cmd("WATCH")
        .arg(&child_key)
        .query_async::<()>(&mut own)
        .await
        .unwrap();
    redis::cmd("HSET")
        .arg(&child_key)
        .arg("seen")
        .arg(1)
        .query_async::<()>(&mut other)
        .await
        .unwrap();
    let aborted: Option<Vec<redis::Value>> =
        transaction.pipeline().query_async(&mut own).await.unwrap();
    assert!(aborted.is_none());
    assert_eq!(redis.job_field("flow-tx", "p", "name"), None);

    // Left alone, the same commands write the flow, read as `add` reads them.
    redis::cmd("DEL")
        .arg(&child_key)
        .query_async::<()>(&mut other)
        .await
        .unwrap();
    redis::cmd("WATCH")
        .arg(&child_key)
        .query_async::<()>(&mut own)
        .await
        .unwrap();
    let replies: Option<Vec<redis::Value>> =
        transaction.pipeline().query_async(&mut own).await.unwrap();
    let node = transaction.finish(&replies.unwrap()).unwrap();
    assert_eq!(node.job.id(), "p");
    assert_eq!(
        redis.job_field("flow-tx", "p", "name").as_deref(),
        Some("parent")
    );
    assert!(redis
        .job_field("flow-tx", "c", "parent")
        .unwrap()
        .contains("\"fpof\":true"));
}

#[tokio::test]
async fn extend_locks_renews_by_id_and_token_and_names_the_lost() {
    let redis = TestRedis::new("patch-locks");
    let q = queue(&redis, "locks").await;
    for id in ["l-1", "l-2"] {
        q.add("x", serde_json::json!({}))
            .options(JobOptions::new().job_id(id))
            .await
            .unwrap();
    }
    let release = Arc::new(tokio::sync::Notify::new());
    let held = release.clone();
    let processor: bullmq::worker::ProcessorFn = Arc::new(move |_job, _cancel| {
        let held = held.clone();
        Box::pin(async move {
            held.notified().await;
            Ok(serde_json::Value::Null)
        })
    });
    let mut options = worker_options(&redis);
    options.concurrency = 2;
    options.skip_lock_renewal = true;
    let worker = Worker::with_options("locks", processor, options)
        .await
        .unwrap();
    let lock_key = |id: &str| format!("{}:locks:{id}:lock", redis.prefix());
    let mut conn = redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let token_of = |id: &'static str| {
        let key = lock_key(id);
        let mut conn = conn.clone();
        async move {
            redis::cmd("GET")
                .arg(key)
                .query_async::<Option<String>>(&mut conn)
                .await
                .unwrap()
        }
    };
    let tokens = wait_until(SOON, "both jobs to be locked", || async {
        match (token_of("l-1").await, token_of("l-2").await) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        }
    })
    .await;

    let lost = q
        .extend_locks(&[("l-1", &tokens.0), ("l-2", "not-its-token")], 60_000)
        .await
        .unwrap();
    assert_eq!(lost, ["l-2"]);
    let ttl: i64 = redis::cmd("PTTL")
        .arg(lock_key("l-1"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(ttl > 30_000, "renewed to a minute: {ttl} ms");
    assert_eq!(
        q.extend_locks(&[], 1000).await.unwrap(),
        Vec::<String>::new()
    );

    release.notify_waiters();
    release.notify_waiters();
    worker.close(5000).await.unwrap();
}

#[tokio::test]
async fn a_worker_whose_events_nobody_reads_keeps_a_bounded_channel() {
    let redis = TestRedis::new("patch-events");
    let q = queue(&redis, "events").await;
    let jobs = (0..40)
        .map(|_| bullmq::BulkJob::new("x", serde_json::json!({})))
        .collect();
    q.add_bulk(jobs).await.unwrap();
    let processor: bullmq::worker::ProcessorFn =
        Arc::new(|_job, _cancel| Box::pin(async { Ok(serde_json::Value::Null) }));
    let mut options = worker_options(&redis);
    options.event_capacity = Some(4);
    let worker = Worker::with_options("events", processor, options)
        .await
        .unwrap();
    wait_until(SOON, "40 jobs done", || async {
        (q.get_job_counts().await.unwrap().completed == 40).then_some(())
    })
    .await;
    // At least an `active` and a `completed` per job, and four fit.
    assert!(worker.dropped_events() >= 76, "{}", worker.dropped_events());
    let mut kept = 0;
    while let Some(Some(_)) = worker.next_event().now_or_never() {
        kept += 1;
    }
    assert!(kept <= 4, "{kept}");
    worker.close(5000).await.unwrap();
}

/// The bound is opt-in: a worker made with the default options keeps upstream's
/// unbounded channel and loses no event, however many wait to be read.
#[tokio::test]
async fn a_workers_event_channel_is_unbounded_unless_a_capacity_is_asked() {
    const JOBS: usize = 700;
    let redis = TestRedis::new("patch-events-default");
    let q = queue(&redis, "events").await;
    let jobs = (0..JOBS)
        .map(|_| bullmq::BulkJob::new("x", serde_json::json!({})))
        .collect();
    q.add_bulk(jobs).await.unwrap();
    let processor: bullmq::worker::ProcessorFn =
        Arc::new(|_job, _cancel| Box::pin(async { Ok(serde_json::Value::Null) }));
    let mut options = worker_options(&redis);
    options.concurrency = 10;
    let worker = Worker::with_options("events", processor, options)
        .await
        .unwrap();
    wait_until(SOON, "every job done", || async {
        (q.get_job_counts().await.unwrap().completed == JOBS as u64).then_some(())
    })
    .await;
    assert_eq!(worker.dropped_events(), 0);
    let mut completed = 0;
    while completed < JOBS {
        match tokio::time::timeout(SOON, worker.next_event()).await {
            Ok(Some(bullmq::worker::WorkerEvent::Completed { .. })) => completed += 1,
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    assert_eq!(completed, JOBS, "every completion can still be read");
    worker.close(5000).await.unwrap();
}

#[tokio::test]
async fn a_json_value_is_added_as_it_is_and_keys_are_the_ones_node_uses() {
    let redis = TestRedis::new("patch-value");
    let q = queue(&redis, "values").await;
    let data = serde_json::json!({"to": "ada@example.com", "n": [1, 2.5, null], "s": "é\"\n"});
    q.add_value("one", data.clone())
        .options(JobOptions::new().job_id("v-1").size_limit(4096))
        .await
        .unwrap();
    q.add_bulk(vec![bullmq::BulkJob::from_value(
        "two",
        data.clone(),
        JobOptions::new().job_id("v-2"),
    )])
    .await
    .unwrap();
    for id in ["v-1", "v-2"] {
        let stored: serde_json::Value =
            serde_json::from_str(&redis.job_field("values", id, "data").unwrap()).unwrap();
        assert_eq!(stored, data, "job {id} holds the value as given");
    }

    // Keys are joined without `format!` now; they are still BullMQ's names.
    let keys = q.keys();
    let base = format!("{}:values", redis.prefix());
    assert_eq!(keys.base(), base);
    assert_eq!(keys.wait(), format!("{base}:wait"));
    assert_eq!(keys.key_prefix(), format!("{base}:"));
    assert_eq!(keys.job_key("v-1"), format!("{base}:v-1"));
    let waiting: Vec<String> = redis::cmd("LRANGE")
        .arg(keys.wait())
        .arg(0)
        .arg(-1)
        .query(
            &mut redis::Client::open(redis_url())
                .unwrap()
                .get_connection()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(waiting.len(), 2, "both jobs wait under the wait key");

    // The size check the framework relies on for `add` (not stored with the job).
    let refused = q
        .add_value("big", serde_json::json!({"s": "x".repeat(64)}))
        .options(JobOptions::new().size_limit(16))
        .await;
    assert!(
        matches!(&refused, Err(bullmq::Error::InvalidConfig(m)) if m.contains("exceeds the limit")),
        "{refused:?}"
    );
    let opts: serde_json::Value =
        serde_json::from_str(&redis.job_field("values", "v-1", "opts").unwrap()).unwrap();
    assert!(
        opts.get("sizeLimit").is_none() && opts.get("size_limit").is_none(),
        "the limit is checked, not stored: {opts}"
    );
}

/// Change 25: `AddJob::id` adds the job as awaiting the `AddJob` does (the same hash,
/// options and wait list, the same refusals) and answers with its id alone.
#[tokio::test]
async fn an_add_for_its_id_stores_the_job_as_an_add_does() {
    let redis = TestRedis::new("patch-add-id");
    let q = queue(&redis, "ids").await;
    let metadata = r#"{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}"#;
    let data = serde_json::json!({"to": "ada@example.com"});
    let opts = || JobOptions::new().attempts(3).telemetry_metadata(metadata);
    let by_id = q
        .add_value("welcome", data.clone())
        .options(opts())
        .id()
        .await
        .unwrap();
    let by_job = q
        .add_value("welcome", data.clone())
        .options(opts())
        .await
        .unwrap();
    assert_ne!(by_id, by_job.id(), "two jobs, two ids");
    for id in [by_id.as_str(), by_job.id()] {
        let field = |name| redis.job_field("ids", id, name).unwrap();
        assert_eq!(field("name"), "welcome", "{id}");
        let stored: serde_json::Value = serde_json::from_str(&field("data")).unwrap();
        assert_eq!(stored, data, "{id}");
        let opts: serde_json::Value = serde_json::from_str(&field("opts")).unwrap();
        assert_eq!(
            (opts["attempts"].as_u64(), opts["tm"].as_str()),
            (Some(3), Some(metadata)),
            "{id}"
        );
    }
    let job = q.get_job(&by_id).await.unwrap().expect("the job exists");
    assert_eq!(job.opts().telemetry_metadata.as_deref(), Some(metadata));

    // A custom id comes back as given; a refused add is refused the same way.
    let custom = q
        .add_value("welcome", data.clone())
        .options(JobOptions::new().job_id("welcome-42"))
        .id()
        .await
        .unwrap();
    assert_eq!(custom, "welcome-42");
    let refused = q
        .add_value("big", serde_json::json!({"s": "x".repeat(64)}))
        .options(JobOptions::new().size_limit(16))
        .id()
        .await;
    assert!(
        matches!(&refused, Err(bullmq::Error::InvalidConfig(m)) if m.contains("exceeds the limit")),
        "{refused:?}"
    );
}

/// An `add_bulk` runs its adds in the bulk's order, on a Redis that has none of the
/// scripts yet too (a new or restarted server): Redis numbers the jobs (and queues them)
/// in the order it runs their scripts, so each bulk's ids must rise with the position.
/// Sent all at once, each add that found its script missing was sent again on its own,
/// in whatever order (a plain bulk of 300 had 22 to 44 of its 299 neighbours swapped).
/// Four scripts, whose first adds are at positions 0 (plain), 1 (grouped, a function),
/// 7 (prioritized) and 9 (delayed); then a bulk of 2,000 with every script loaded, more
/// adds than the connection's queue holds at once. On several threads, as an app runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_add_bulk_on_a_new_redis_runs_its_adds_in_order() {
    let redis = queue_tests::PrivateRedis::start();
    let url = format!("redis://127.0.0.1:{}", redis.port());
    let options = QueueOptions::new().connection(RedisConnectionOptions::new().url(&url));
    let q = Queue::with_options("bulk", options).await.unwrap();
    let bulk = |jobs: u32| -> Vec<bullmq::BulkJob> {
        (0..jobs)
            .map(|n| {
                let opts = match n % 10 {
                    7 => JobOptions::new().priority(1),
                    9 => JobOptions::new().delay(std::time::Duration::from_secs(60)),
                    1 | 4 => JobOptions::new()
                        .extension("group", serde_json::json!({ "id": format!("g{}", n % 4) })),
                    _ => JobOptions::new(),
                };
                bullmq::BulkJob::new("x", serde_json::json!({ "n": n })).options(opts)
            })
            .collect()
    };
    for (label, jobs) in [("a new Redis", 300), ("the scripts loaded", 2_000)] {
        let added = q.add_bulk(bulk(jobs)).await.unwrap();
        let ids: Vec<u64> = added.iter().map(|j| j.id().parse().unwrap()).collect();
        let out_of_order: Vec<(usize, u64)> = ids
            .windows(2)
            .enumerate()
            .filter(|(_, pair)| pair[0] > pair[1])
            .map(|(at, pair)| (at + 1, pair[1]))
            .collect();
        assert!(
            out_of_order.is_empty(),
            "{label}: jobs numbered before the job given before them (position, id): \
             {out_of_order:?}"
        );
    }
}
