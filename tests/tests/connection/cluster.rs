//! Redis Cluster, on a private cluster of six `redis-server`s (three masters, one
//! replica each): the start-up checks on hash tags, queue groups on different masters
//! processed in parallel, a flow, cancellation and queue events across nodes, and a
//! master SIGKILLed under load.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_core::{
    queue::CancelOutcome, ChildResults, Dep, Job, JobError, JobOptions, JobState, OnChildFailure,
    Processor, QueueApp, QueueEvent,
};
use queue_tests::{wait_for_state, wait_until, RedisCluster, SOON};

fn prefix(label: &str) -> String {
    queue_core::testing::unique_prefix(label)
}

async fn double(job: Job<u32>) -> Result<u32, JobError> {
    Ok(job.data * 2)
}

#[tokio::test]
async fn build_refuses_names_without_a_hash_tag_and_shows_the_fix() {
    let cluster = RedisCluster::start_with(3, 0);
    let untagged = QueueApp::builder()
        .redis_cluster(cluster.nodes())
        .prefix(prefix("c-untagged"))
        .processor(Processor::new("email").any_job(double))
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(untagged.contains("`email`"), "{untagged}");
    assert!(untagged.contains("hash tag"), "{untagged}");
    assert!(untagged.contains("{mail}welcome"), "the fix: {untagged}");

    // A tagged prefix, or tagged queue names, build; an untagged handle is refused.
    let tagged_prefix = format!("{{{}}}", prefix("c-tagged"));
    let app = QueueApp::builder()
        .redis_cluster(cluster.nodes())
        .prefix(&tagged_prefix)
        .processor(Processor::new("email").any_job(double))
        .build()
        .await
        .unwrap();
    assert!(app.queue::<u32>("anything").is_ok());
    let groups = QueueApp::builder()
        .redis_cluster(cluster.nodes())
        .prefix(prefix("c-groups"))
        .processor(Processor::new("{mail}welcome").any_job(double))
        .build()
        .await
        .unwrap();
    assert!(groups.queue::<u32>("{mail}digest").is_ok());
    let err = groups.queue::<u32>("digest").unwrap_err().to_string();
    assert!(err.contains("`digest`"), "{err}");

    // A flow across two tags is refused before anything is written, naming both.
    let a = groups.queue::<u32>("{mail}welcome").unwrap();
    let b = groups.queue::<u32>("{reports}steps").unwrap();
    let flow = a
        .flow_job("total", 0)
        .child(OnChildFailure::FailParent, b.flow_job("part", 1));
    let err = groups.add_flow(flow).await.unwrap_err().to_string();
    assert!(
        err.contains("`{mail}welcome`") && err.contains("`{reports}steps`"),
        "{err}"
    );
    assert_eq!(b.get_job_counts().await.unwrap().total(), 0);

    // Seed nodes that are not a cluster are refused with the cause.
    let single = queue_tests::PrivateRedis::start();
    let err = QueueApp::builder()
        .redis_cluster([format!("redis://127.0.0.1:{}", single.port())])
        .prefix(tagged_prefix)
        .connect_timeout(Duration::from_secs(3))
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("cluster"), "{err}");
}

/// Two tags whose slots two different masters serve.
fn tags_on_two_masters(cluster: &RedisCluster, prefix: &str) -> (String, String) {
    let master =
        |tag: &str| cluster.master_of_slot(cluster.key_slot(&format!("{prefix}:{{{tag}}}q:")));
    let first = "g0".to_owned();
    let first_master = master(&first);
    let second = (1..100)
        .map(|i| format!("g{i}"))
        .find(|tag| master(tag) != first_master)
        .expect("some tag on another master");
    (first, second)
}

/// Counts its attempts; each takes `work` of CPU-free waiting.
#[derive(Default)]
struct Ran(AtomicUsize);

async fn slow(job: Job<u32>, ran: Dep<Ran>) -> Result<u32, JobError> {
    tokio::time::sleep(Duration::from_millis(20)).await;
    ran.0.fetch_add(1, Ordering::SeqCst);
    Ok(job.data)
}

#[tokio::test]
async fn two_queue_groups_on_different_masters_are_processed_in_parallel() {
    let cluster = RedisCluster::start_with(3, 0);
    let prefix = prefix("c-parallel");
    let (g1, g2) = tags_on_two_masters(&cluster, &prefix);
    let (q1, q2) = (format!("{{{g1}}}q"), format!("{{{g2}}}q"));
    let ran = Arc::new(Ran::default());
    let app = QueueApp::builder()
        .redis_cluster(cluster.nodes())
        .prefix(&prefix)
        .provide_arc(ran.clone())
        .processor(Processor::new(&q1).concurrency(10).any_job(slow))
        .processor(Processor::new(&q2).concurrency(10).any_job(slow))
        .build()
        .await
        .unwrap();
    let (a, b) = (
        app.queue::<u32>(&q1).unwrap(),
        app.queue::<u32>(&q2).unwrap(),
    );
    let jobs = |n: u32| {
        (0..n)
            .map(|i| queue_core::queue::BulkJob::new("x", i))
            .collect()
    };
    a.add_bulk(jobs(100)).await.unwrap();
    b.add_bulk(jobs(100)).await.unwrap();
    // Each group's keys live on its own master.
    let on =
        |queue: &str| cluster.master_of_slot(cluster.key_slot(&format!("{prefix}:{queue}:wait")));
    assert_ne!(on(&q1), on(&q2));

    let started = Instant::now();
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "200 jobs completed", || async {
        let done = a.get_job_counts().await.unwrap().completed
            + b.get_job_counts().await.unwrap().completed;
        (done == 200).then_some(())
    })
    .await;
    // 100 jobs of 20 ms, 10 at a time, is 200 ms per queue: in parallel, well under the
    // 400 ms the two would take one after the other.
    let elapsed = started.elapsed();
    assert_eq!(ran.0.load(Ordering::SeqCst), 200);
    assert!(elapsed < Duration::from_millis(2000), "{elapsed:?}");
    workers.shutdown(SOON).await;
    queue_core::testing::delete_prefix(&app).await.unwrap();
}

async fn until_cancelled(job: Job<u32>) -> Result<u32, JobError> {
    job.cancelled().await;
    Err(JobError::unrecoverable(std::io::Error::other("stopped")))
}

async fn sum(_job: Job<u32>, parts: ChildResults<u32>) -> Result<u32, JobError> {
    Ok(parts.values().sum())
}

#[tokio::test]
async fn flows_cancellation_events_and_the_status_of_jobs_work_across_nodes() {
    let cluster = RedisCluster::start_with(3, 0);
    let prefix = prefix("c-features");
    let app = QueueApp::builder()
        .redis_cluster(cluster.nodes())
        .prefix(&prefix)
        .processor(
            Processor::new("{r}steps")
                .job("double", double)
                .job("wait", until_cancelled),
        )
        .processor(Processor::new("{r}sum").job("sum", sum))
        .build()
        .await
        .unwrap();
    let steps = app.queue::<u32>("{r}steps").unwrap();
    let sums = app.queue::<u32>("{r}sum").unwrap();
    let events = app.queue_events("{r}sum").await.unwrap();
    let workers = app.start_workers().await.unwrap();

    // A flow across two queues of one tag.
    let flow = (1..=3).fold(
        sums.flow_job("sum", 0)
            .options(JobOptions::new().job_id("s1")),
        |flow, n| flow.child(OnChildFailure::FailParent, steps.flow_job("double", n)),
    );
    app.add_flow(flow).await.unwrap();
    let done = events
        .wait_for(
            SOON,
            |e| matches!(e, QueueEvent::Completed { job_id, .. } if job_id == "s1"),
        )
        .await
        .unwrap();
    assert!(matches!(done, QueueEvent::Completed { return_value, .. } if return_value == 12));

    // Retries with backoff, a delayed job and a priority.
    steps
        .add(
            "double",
            5,
            JobOptions::new()
                .job_id("later")
                .delay(Duration::from_millis(300))
                .priority(3),
        )
        .await
        .unwrap();
    assert_eq!(
        steps.get_job_state("later").await.unwrap(),
        Some(JobState::Delayed)
    );
    wait_for_state(&steps, "later", JobState::Completed, SOON).await;

    // Cancelling a running job: the subscriber may sit on any node.
    steps
        .add("wait", 0, JobOptions::new().job_id("w1"))
        .await
        .unwrap();
    wait_for_state(&steps, "w1", JobState::Active, SOON).await;
    let outcome = steps.cancel("w1").await.unwrap();
    assert!(
        matches!(outcome, CancelOutcome::Signalled { .. }),
        "{outcome:?}"
    );
    wait_for_state(&steps, "w1", JobState::Failed, SOON).await;
    let w1 = steps.get_job("w1").await.unwrap().unwrap();
    assert!(w1.failed_reason.unwrap().contains("cancelled"));

    workers.shutdown(SOON).await;
    events.close().await;
    queue_core::testing::delete_prefix(&app).await.unwrap();
}

#[tokio::test]
async fn cancellations_reach_a_worker_whatever_node_its_seeds_name_first() {
    let cluster = RedisCluster::start_with(3, 0);
    let prefix = prefix("c-pubsub");
    let queue = "{c}work";
    let channel = format!("{prefix}:{queue}:cancel");
    // The channel is in the queue's slot; a PUBLISH is routed to that slot's master.
    let slot_master = cluster.master_of_slot(cluster.key_slot(&channel));
    // The worker's first seed is another master; the producer is another process.
    let mut seeds = cluster.nodes();
    seeds.sort_by_key(|n| n.ends_with(&format!(":{slot_master}")));
    let worker_app = QueueApp::builder()
        .redis_cluster(seeds)
        .prefix(&prefix)
        .processor(Processor::new(queue).job("wait", until_cancelled))
        .build()
        .await
        .unwrap();
    let producer = QueueApp::builder()
        .redis_cluster(cluster.nodes())
        .prefix(&prefix)
        .build()
        .await
        .unwrap();
    let workers = worker_app.start_workers().await.unwrap();
    // It subscribes where the PUBLISH lands, so that the count it answers is right.
    wait_until(
        SOON,
        "the worker to subscribe on the slot's master",
        || async { (cluster.subscribers(slot_master, &channel) == 1).then_some(()) },
    )
    .await;

    let jobs = producer.queue::<u32>(queue).unwrap();
    jobs.add("wait", 0, JobOptions::new().job_id("w"))
        .await
        .unwrap();
    wait_for_state(&jobs, "w", JobState::Active, SOON).await;
    assert_eq!(
        jobs.cancel("w").await.unwrap(),
        CancelOutcome::Signalled { listeners: 1 }
    );
    wait_for_state(&jobs, "w", JobState::Failed, SOON).await;
    workers.shutdown(SOON).await;
    queue_core::testing::delete_prefix(&producer).await.unwrap();
}

/// Each attempt that ran: the job and when.
#[derive(Default)]
struct Effects(std::sync::Mutex<Vec<(String, Instant)>>);

impl Effects {
    fn jobs(&self) -> std::collections::HashSet<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The longest time without an attempt finishing, after `from`.
    fn longest_pause_after(&self, from: Instant) -> Duration {
        let times: Vec<Instant> = self.0.lock().unwrap().iter().map(|(_, t)| *t).collect();
        let mut after: Vec<Instant> = times.into_iter().filter(|t| *t >= from).collect();
        after.sort();
        std::iter::once(from)
            .chain(after.iter().copied())
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or_default()
    }
}

async fn record(job: Job<u32>, effects: Dep<Effects>) -> Result<u32, JobError> {
    tokio::time::sleep(Duration::from_millis(5)).await;
    effects
        .0
        .lock()
        .unwrap()
        .push((job.id().to_owned(), Instant::now()));
    Ok(job.data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_under_load_fails_over_and_no_accepted_job_is_lost() {
    let mut cluster = RedisCluster::start();
    let prefix = prefix("c-failover");
    let queue = "{f}work";
    let effects = Arc::new(Effects::default());
    let app = QueueApp::builder()
        .redis_cluster(cluster.nodes())
        .prefix(&prefix)
        .provide_arc(effects.clone())
        .processor(
            Processor::new(queue)
                .concurrency(10)
                .stalled_interval(Duration::from_secs(2))
                .job("x", record)
                .job("wait", until_cancelled),
        )
        .build()
        .await
        .unwrap();
    let jobs = app.queue::<u32>(queue).unwrap();
    let workers = app.start_workers().await.unwrap();

    // A producer adding jobs with ids (so that a retried add is harmless) for 8 s,
    // recording the ones Redis accepted and the longest time between two accepted adds.
    let producer = {
        let jobs = jobs.clone();
        tokio::spawn(async move {
            let (mut accepted, mut longest_outage) = (Vec::new(), Duration::ZERO);
            let mut last_ok = Instant::now();
            let started = Instant::now();
            let mut i = 0u32;
            while started.elapsed() < Duration::from_secs(8) {
                let id = format!("f-{i}");
                let options = JobOptions::new()
                    .job_id(&id)
                    .attempts(5)
                    .backoff(queue_core::Backoff::fixed(Duration::from_millis(200)));
                match jobs.add("x", i, options).await {
                    Ok(_) => {
                        longest_outage = longest_outage.max(last_ok.elapsed());
                        last_ok = Instant::now();
                        accepted.push(id);
                        i += 1;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (accepted, longest_outage)
        })
    };

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let master = cluster.master_of_slot(cluster.key_slot(&format!("{prefix}:{queue}:wait")));
    let killed_at = Instant::now();
    cluster.kill(master);
    // The replica is promoted; the app follows it without a restart.
    let (accepted, add_outage) = producer.await.unwrap();
    assert!(accepted.len() > 100, "{} adds", accepted.len());
    let back = cluster.master_of_slot(cluster.key_slot(&format!("{prefix}:{queue}:wait")));
    assert_ne!(back, master, "a replica took over");

    // Every accepted job ends completed (or failed once its attempts ran out); none is
    // lost, none stays active.
    wait_until(
        Duration::from_secs(60),
        "every accepted job to finish",
        || async {
            let counts = jobs.get_job_counts().await.ok()?;
            let finished = counts.completed + counts.failed;
            (finished >= accepted.len() as u64 && counts.active == 0).then_some(())
        },
    )
    .await;
    let mut missing = Vec::new();
    for id in &accepted {
        match jobs.get_job_state(id).await.unwrap() {
            Some(JobState::Completed | JobState::Failed) => {}
            other => missing.push(format!("{id}: {other:?}")),
        }
    }
    assert!(missing.is_empty(), "not finished: {missing:?}");
    // Every completed job's effect ran (at least once: delivery is at-least-once).
    let ran = effects.jobs();
    for id in &accepted {
        if jobs.get_job_state(id).await.unwrap() == Some(JobState::Completed) {
            assert!(ran.contains(id), "{id} completed without running");
        }
    }
    let processing_outage = effects.longest_pause_after(killed_at);
    eprintln!(
        "failover: no add accepted for {add_outage:?}, no attempt finished for {processing_outage:?}"
    );
    assert!(add_outage < Duration::from_secs(30), "{add_outage:?}");
    assert!(
        processing_outage < Duration::from_secs(30),
        "{processing_outage:?}"
    );
    workers.shutdown(SOON).await;
    queue_core::testing::delete_prefix(&app).await.unwrap();
}

#[tokio::test]
async fn an_acl_user_and_tls_work_on_a_cluster_as_on_one_server() {
    use queue_tests::ClusterSecurity;

    for security in [
        ClusterSecurity {
            acl_user: Some(("app".into(), "s3cret-app".into())),
            tls: false,
        },
        ClusterSecurity {
            acl_user: Some(("app".into(), "s3cret-app".into())),
            tls: true,
        },
    ] {
        let tls = security.tls;
        let cluster = RedisCluster::start_secured(3, 0, security);
        // The seeds, and the CA to trust when the cluster speaks TLS.
        let on = |nodes: Vec<String>| {
            let builder = QueueApp::builder().redis_cluster(nodes);
            if tls {
                builder.tls(queue_core::connection::Tls::new().root_cert_pem(cluster.ca_pem()))
            } else {
                builder
            }
        };
        let prefix = format!("{{{}}}", prefix("c-secure"));
        let app = on(cluster.nodes())
            .prefix(&prefix)
            .processor(
                Processor::new("q")
                    .job("double", double)
                    .job("wait", until_cancelled),
            )
            .build()
            .await
            .unwrap_or_else(|e| panic!("tls {tls}: {e}"));
        let q = app.queue::<u32>("q").unwrap();
        let workers = app.start_workers().await.unwrap();
        q.add("double", 21, JobOptions::new().job_id("d"))
            .await
            .unwrap();
        wait_for_state(&q, "d", JobState::Completed, SOON).await;
        assert_eq!(
            q.get_job("d").await.unwrap().unwrap().return_value,
            Some(serde_json::json!(42))
        );
        // The subscription to cancellations authenticates (and speaks TLS) too.
        q.add("wait", 0, JobOptions::new().job_id("w"))
            .await
            .unwrap();
        wait_for_state(&q, "w", JobState::Active, SOON).await;
        let channel = format!("{prefix}:q:cancel");
        wait_until(SOON, "the worker to subscribe", || async {
            let master = cluster.master_of_slot(cluster.key_slot(&channel));
            (cluster.subscribers(master, &channel) == 1).then_some(())
        })
        .await;
        assert_eq!(
            q.cancel("w").await.unwrap(),
            CancelOutcome::Signalled { listeners: 1 }
        );
        wait_for_state(&q, "w", JobState::Failed, SOON).await;
        workers.shutdown(SOON).await;

        // A wrong password is refused with the cause, not a hang.
        let wrong: Vec<String> = cluster
            .nodes()
            .iter()
            .map(|n| n.replace("s3cret-app", "wrong"))
            .collect();
        let err = on(wrong)
            .prefix(&prefix)
            .connect_timeout(Duration::from_secs(3))
            .build()
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("authentication failed"), "tls {tls}: {err}");
        assert!(
            !err.contains("s3cret-app") && !err.contains("wrong@"),
            "no password in {err}"
        );
        queue_core::testing::delete_prefix(&app).await.unwrap();
    }
}
