//! Redis Sentinel, on a private deployment started by each test (one master, one
//! replica, three sentinels, on loopback): the app finds the master through the
//! sentinels, and its producers, workers, queue events and outbox relay follow a
//! failover; auth and TLS reach the master as for a plain URL.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_core::{
    connection::Tls, queue::CancelOutcome, store::Operations, store::Outbox, Backoff, Dep, Job,
    JobError, JobOptions, JobState, Processor, QueueApp, QueueEvent, Retention,
};
use queue_tests::db::TestSqlite;
use queue_tests::sentinel::{RedisSentinel, SentinelSecurity, DOWN_AFTER, FAILOVER_TIMEOUT};
use queue_tests::{wait_for_state, wait_until, SOON};
use sqlx::SqlitePool;

/// How long after the sentinels name the new master the app may take to use it: the
/// connections re-ask the sentinels at most a second apart, and a call in flight at the
/// kill gives up after the command timeout (3 s).
const FOLLOW_SLACK: Duration = Duration::from_secs(5);

fn prefix(label: &str) -> String {
    queue_core::testing::unique_prefix(label)
}

/// The application's side of each job: its effect goes through an operation record (the
/// example's idiom for effects that must happen once), into `effects`, which has no
/// unique key, so that a second effect would show as a second row.
struct Ledger {
    ops: Operations<sqlx::Sqlite>,
    /// Every attempt that reached the handler, and when (delivery is at-least-once).
    runs: Mutex<Vec<(String, Instant)>>,
}

async fn grant(job: Job<u32>, ledger: Dep<Ledger>) -> Result<u32, JobError> {
    let id = job.id().to_owned();
    ledger
        .runs
        .lock()
        .unwrap()
        .push((id.clone(), Instant::now()));
    let key = format!("effect-{id}");
    ledger
        .ops
        .run_once(&key, move |tx| {
            Box::pin(async move {
                sqlx::query("INSERT INTO effects (job_id) VALUES (?)")
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                Ok::<_, sqlx::Error>(())
            })
        })
        .await?;
    Ok(job.data)
}

fn options(id: &str) -> JobOptions {
    JobOptions::new()
        .job_id(id)
        .attempts(10)
        .backoff(Backoff::fixed(Duration::from_millis(200)))
        // Kept, so that each job's final state can be read at the end.
        .remove_on_complete(Retention::All)
}

/// What the producer saw: each add Redis acknowledged, when, when it was first tried (a
/// failed add is retried with its id, and may have been done by the old master before
/// it died), and whether the job was seen on the node that survives the failover (the
/// replica, promoted) within a second of its acknowledgement. Replication is asynchronous: an add the old master
/// acknowledged but had not yet sent to its replica when it was killed is lost, and
/// nothing a client does can prevent that (see the scale-out guide).
#[derive(Default)]
struct Produced {
    acked: Vec<(String, Instant)>,
    first_tried: BTreeMap<String, Instant>,
    replicated: BTreeSet<String>,
}

/// `EXISTS` on the surviving node, reconnecting when the failover closes the connection
/// (the sentinels kill the promoted node's clients).
async fn exists_on(url: &str, key: &str, within: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < within {
        let found = async {
            let mut conn = redis::Client::open(url)
                .ok()?
                .get_multiplexed_async_connection()
                .await
                .ok()?;
            redis::cmd("EXISTS")
                .arg(key)
                .query_async::<bool>(&mut conn)
                .await
                .ok()
        };
        if found.await == Some(true) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

async fn effects_per_job(pool: &SqlitePool) -> BTreeMap<String, i64> {
    sqlx::query_as::<_, (String, i64)>("SELECT job_id, COUNT(*) FROM effects GROUP BY job_id")
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_under_load_is_followed_and_every_job_has_one_effect() {
    let mut sentinel = RedisSentinel::start();
    let (master, replica) = sentinel.data_ports();
    let db = TestSqlite::new("sentinel");
    let pool = db.pool(4).await;
    sqlx::raw_sql("CREATE TABLE effects (job_id TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    let ops = Operations::new(pool.clone());
    ops.migrate().await.unwrap();
    let ledger = Arc::new(Ledger {
        ops,
        runs: Mutex::new(Vec::new()),
    });
    let prefix = prefix("sentinel-failover");
    let queue = "grants";
    let app = QueueApp::builder()
        .redis(sentinel.url())
        .prefix(&prefix)
        .outbox(Outbox::new(pool.clone()))
        .provide_arc(ledger.clone())
        .processor(
            Processor::new(queue)
                .concurrency(10)
                // A job whose completion was lost with the master runs again soon.
                .lock_duration(Duration::from_secs(5))
                .stalled_interval(Duration::from_secs(2))
                .job("grant", grant),
        )
        .build()
        .await
        .unwrap();
    let jobs = app.queue::<u32>(queue).unwrap();
    let events = app.queue_events(queue).await.unwrap();
    let completed_events = Arc::new(Mutex::new(BTreeMap::<String, Instant>::new()));
    let event_reader = {
        let seen = completed_events.clone();
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                if let QueueEvent::Completed { job_id, .. } = event {
                    seen.lock().unwrap().insert(job_id, Instant::now());
                }
            }
        })
    };
    let workers = app.start_workers().await.unwrap();

    // A steady load of adds, each with its id (a retried add is harmless), until told
    // to stop.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let producer = {
        let (jobs, stop) = (jobs.clone(), stop.clone());
        let survivor = format!("redis://127.0.0.1:{replica}");
        let key_of = {
            let prefix = prefix.clone();
            move |id: &str| format!("{prefix}:{queue}:{id}")
        };
        tokio::spawn(async move {
            let mut produced = Produced::default();
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let id = format!("s-{i}");
                produced
                    .first_tried
                    .entry(id.clone())
                    .or_insert_with(Instant::now);
                match jobs.add("grant", i, options(&id)).await {
                    Ok(_) => {
                        produced.acked.push((id.clone(), Instant::now()));
                        if exists_on(&survivor, &key_of(&id), Duration::from_secs(1)).await {
                            produced.replicated.insert(id);
                        }
                        i += 1;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            produced
        })
    };

    wait_until(SOON, "jobs to be processed before the kill", || async {
        (ledger.runs.lock().unwrap().len() >= 50).then_some(())
    })
    .await;
    let killed_at = Instant::now();
    sentinel.kill(master);

    // While the sentinels fail over, the application keeps writing outbox rows: the
    // relay cannot add them until it reaches the promoted master.
    let mut outbox_ids = Vec::new();
    let promoted_at = loop {
        if sentinel.master_port() == Some(replica) {
            break Instant::now();
        }
        assert!(
            killed_at.elapsed() < DOWN_AFTER + FAILOVER_TIMEOUT * 3,
            "the sentinels did not promote the replica"
        );
        let id = format!("o-{}", outbox_ids.len());
        let mut tx = pool.begin().await.unwrap();
        jobs.add_in(&mut *tx, "grant", 0, options(&id))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        outbox_ids.push(id);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(sentinel.role(replica), "master");
    eprintln!(
        "sentinels promoted the replica {:?} after the kill",
        promoted_at - killed_at
    );

    // Keep the load on for a while on the new master, then stop and drain.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let produced = producer.await.unwrap();
    let required: Vec<String> = produced
        .acked
        .iter()
        .map(|(id, _)| id.clone())
        .filter(|id| produced.replicated.contains(id))
        .chain(outbox_ids.iter().cloned())
        .collect();
    let after_kill: Vec<&(String, Instant)> = produced
        .acked
        .iter()
        .filter(|(_, at)| *at > killed_at)
        .collect();
    assert!(
        after_kill.len() > 20,
        "the producer got {} adds through after the kill",
        after_kill.len()
    );
    // Only an add acknowledged just before the kill may have missed the replica.
    for (id, at) in &produced.acked {
        if !produced.replicated.contains(id) {
            assert!(
                *at <= killed_at,
                "{id} was acknowledged after the kill but not found"
            );
        }
    }

    wait_until(
        Duration::from_secs(40),
        "every replicated add and outbox row to complete",
        || async {
            let mut done = 0;
            for id in &required {
                if jobs.get_job_state(id).await.ok()? == Some(JobState::Completed) {
                    done += 1;
                }
            }
            (done == required.len()).then_some(())
        },
    )
    .await;
    // Exactly one effect per job, however many times a job ran.
    let effects = effects_per_job(&pool).await;
    for id in &required {
        assert_eq!(effects.get(id), Some(&1), "effects of {id}");
    }
    let doubled: Vec<_> = effects.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "effects recorded twice: {doubled:?}");

    // The producer, the workers and the queue events followed the promotion within
    // the failover plus a few seconds. Processing is timed on the first job first tried
    // after the promotion: a job the old master added or gave a worker just before it
    // died, its reply lost, may have been run there and waits out its lock and the
    // stalled check, as it must.
    let first_add = after_kill[0].1;
    let (first_new_id, first_new_at) = produced
        .acked
        .iter()
        .find(|(id, _)| produced.first_tried[id] > promoted_at)
        .cloned()
        .expect("adds after the promotion");
    let runs = ledger.runs.lock().unwrap().clone();
    let first_run = runs
        .iter()
        .filter(|(id, _)| id == &first_new_id)
        .map(|(_, at)| *at)
        .min()
        .expect("the first job added after the promotion ran");
    let first_event = wait_until(SOON, "its completed event", || async {
        completed_events.lock().unwrap().get(&first_new_id).copied()
    })
    .await;
    let late = |at: Instant| at.saturating_duration_since(promoted_at);
    eprintln!(
        "after the promotion: first add {:?}; the first job added after it added at {:?}, \
         run at {:?}, its completed event at {:?}; {} adds acknowledged ({} after the \
         kill, {} not replicated before it), {} outbox rows, {} runs for {} effects",
        late(first_add),
        late(first_new_at),
        late(first_run),
        late(first_event),
        produced.acked.len(),
        after_kill.len(),
        produced.acked.len() - produced.replicated.len(),
        outbox_ids.len(),
        runs.len(),
        effects.len()
    );
    assert!(late(first_add) < FOLLOW_SLACK, "{:?}", late(first_add));
    assert!(late(first_run) < FOLLOW_SLACK, "{:?}", late(first_run));
    assert!(late(first_event) < FOLLOW_SLACK, "{:?}", late(first_event));

    workers.shutdown(SOON).await;
    event_reader.abort();
    queue_core::testing::delete_prefix(&app).await.unwrap();
}

async fn double(job: Job<u32>) -> Result<u32, JobError> {
    Ok(job.data * 2)
}

async fn until_cancelled(job: Job<u32>) -> Result<u32, JobError> {
    job.cancelled().await;
    Err(JobError::unrecoverable(std::io::Error::other("stopped")))
}

#[tokio::test]
async fn auth_and_tls_reach_the_master_through_the_sentinels() {
    for tls in [false, true] {
        let sentinel = RedisSentinel::start_secured(SentinelSecurity {
            acl_user: Some(("app".into(), "s3cret-app".into())),
            sentinel_password: Some("s3cret-sentinel".into()),
            tls,
        });
        let with_tls = |builder: queue_core::QueueAppBuilder| {
            if tls {
                builder.tls(Tls::new().root_cert_pem(sentinel.ca_pem()))
            } else {
                builder
            }
        };
        let prefix = prefix("sentinel-secure");
        let app = with_tls(QueueApp::builder().redis(sentinel.url()))
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
        // The subscription to cancellations finds the master, authenticates (and speaks
        // TLS) too.
        q.add("wait", 0, JobOptions::new().job_id("w"))
            .await
            .unwrap();
        wait_for_state(&q, "w", JobState::Active, SOON).await;
        let (master, _) = sentinel.data_ports();
        let channel = format!("{prefix}:q:cancel");
        wait_until(SOON, "the worker to subscribe on the master", || async {
            let out = sentinel.data_cli(master, &["pubsub", "numsub", &channel]);
            (out.lines().nth(1).map(str::trim) == Some("1")).then_some(())
        })
        .await;
        assert_eq!(
            q.cancel("w").await.unwrap(),
            CancelOutcome::Signalled { listeners: 1 }
        );
        wait_for_state(&q, "w", JobState::Failed, SOON).await;
        workers.shutdown(SOON).await;
        queue_core::testing::delete_prefix(&app).await.unwrap();

        // Refusals name their cause, without a password, and do not hang.
        let prefix = prefix.as_str();
        let refused = |url: String| async move {
            with_tls(QueueApp::builder().redis(url))
                .prefix(prefix)
                .connect_timeout(Duration::from_secs(5))
                .build()
                .await
                .unwrap_err()
                .to_string()
        };
        let err = refused(sentinel.url().replace("s3cret-app", "wrong")).await;
        assert!(
            err.contains("cannot use the master the sentinels name")
                && err.contains("authentication failed"),
            "tls {tls}: {err}"
        );
        assert!(!err.contains("s3cret") && !err.contains("wrong@"), "{err}");
        let err = refused(sentinel.url().replace("s3cret-sentinel", "wrong")).await;
        assert!(
            err.contains("no sentinel answered") && err.contains("authentication failed"),
            "tls {tls}: {err}"
        );
        assert!(!err.contains("s3cret") && !err.contains("=wrong"), "{err}");
        let err = refused(sentinel.url().replace("/mymaster", "/nosuch")).await;
        assert!(
            err.contains("monitors a master named `nosuch`"),
            "tls {tls}: {err}"
        );
        // The same deployment from the builder instead of a URL.
        let (user, password) = ("app", "s3cret-app");
        let built = queue_core::connection::Sentinel::new(
            queue_tests::sentinel::MASTER_NAME,
            sentinel
                .sentinel_ports()
                .iter()
                .map(|port| format!("127.0.0.1:{port}")),
        )
        .username(user)
        .password(password)
        .tls(tls)
        .sentinel_tls(tls)
        .sentinel_password("s3cret-sentinel");
        let app = with_tls(QueueApp::builder().redis_sentinel(built))
            .prefix(prefix)
            .build()
            .await
            .unwrap_or_else(|e| panic!("tls {tls}: {e}"));
        let q = app.queue::<u32>("q").unwrap();
        q.add("double", 1, JobOptions::new().job_id("b"))
            .await
            .unwrap();
        assert_eq!(q.get_job_state("b").await.unwrap(), Some(JobState::Waiting));
        queue_core::testing::delete_prefix(&app).await.unwrap();
    }
}

/// The engine's own connection (PATCHES.md, change 14): a master demoted under a live
/// connection, without its clients being closed, answers `READONLY`; the connection
/// asks the sentinels again and sends the refused write to the master they name.
#[tokio::test]
async fn a_write_refused_by_a_demoted_master_goes_to_the_one_the_sentinels_name() {
    use bullmq::options::RedisConnectionOptions;
    use bullmq::redis_connection::{AnyConnection, RedisConnection};
    use bullmq::sentinel::SentinelOptions;
    use queue_tests::sentinel::MASTER_NAME;

    let sentinel = RedisSentinel::start();
    let (master, replica) = sentinel.data_ports();
    let sentinels = sentinel
        .sentinel_ports()
        .into_iter()
        .map(|port| format!("127.0.0.1:{port}"));
    let options =
        RedisConnectionOptions::new().sentinel(SentinelOptions::new(MASTER_NAME, sentinels));
    let redis = RedisConnection::new_managed_only(&options).await.unwrap();
    let AnyConnection::Sentinel(connection) = redis.connection() else {
        panic!("a sentinel connection");
    };
    assert_eq!(
        connection.current_master(),
        Some(format!("127.0.0.1:{master}"))
    );
    let key = prefix("sentinel-demoted");
    redis
        .cmd::<()>(redis::cmd("SET").arg(&key).arg("before"))
        .await
        .unwrap();

    // An operator moves the master by hand: the sentinels are pointed at the replica,
    // the replica promoted and the master made its replica. Nobody closes the clients.
    for port in sentinel.sentinel_ports() {
        sentinel.sentinel_cli(port, &["sentinel", "remove", MASTER_NAME]);
        let monitor = [
            "sentinel",
            "monitor",
            MASTER_NAME,
            "127.0.0.1",
            &replica.to_string(),
            "2",
        ];
        assert_eq!(sentinel.sentinel_cli(port, &monitor).trim(), "OK");
    }
    sentinel.data_cli(replica, &["replicaof", "no", "one"]);
    sentinel.data_cli(master, &["replicaof", "127.0.0.1", &replica.to_string()]);
    wait_until(SOON, "the old master to replicate the new one", || async {
        let info = sentinel.data_cli(master, &["info", "replication"]);
        info.contains("master_link_status:up").then_some(())
    })
    .await;
    // What any client still connected to it gets now:
    let mut old = sentinel.data_connection(master);
    let refused = redis::cmd("SET")
        .arg(&key)
        .arg("refused")
        .query::<()>(&mut old)
        .unwrap_err();
    assert_eq!(refused.code(), Some("READONLY"), "{refused}");

    // The engine's connection sends the write, and a script's, to the new master.
    redis
        .cmd::<()>(redis::cmd("SET").arg(&key).arg("after"))
        .await
        .unwrap();
    assert_eq!(
        connection.current_master(),
        Some(format!("127.0.0.1:{replica}"))
    );
    let mut new = sentinel.data_connection(replica);
    let stored: String = redis::cmd("GET").arg(&key).query(&mut new).unwrap();
    assert_eq!(stored, "after");
    let appended: i64 = redis
        .cmd(
            redis::cmd("EVAL")
                .arg("return redis.call('APPEND', KEYS[1], '!')")
                .arg(1)
                .arg(&key),
        )
        .await
        .unwrap();
    assert_eq!(appended, "after!".len() as i64);
}
