//! The transactional outbox on real SQLite and PostgreSQL databases and a real Redis:
//! a job commits with the application's data or not at all, reaches Redis once, and a
//! row that can never be added is set aside without blocking the rows behind it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queue_core::{trace, Job, JobError, JobOptions, JobState, Processor, QueueApp, Retention};
use queue_tests::db::AnyDb;
use queue_tests::fixtures::{welcome, WelcomeEmail};
use queue_tests::{wait_for_state, wait_until, PrivateRedis, TestRedis, SOON};

queue_tests::on_both_databases!(
    a_rollback_leaves_no_job,
    a_committed_job_arrives_with_everything_a_direct_add_carries,
    redis_down_between_commit_and_relay_delays_the_job_but_loses_nothing,
    two_relays_over_10000_rows_add_each_job_exactly_once,
    a_poison_row_is_set_aside_while_the_rows_behind_it_go_through,
    a_sealed_queues_rows_hold_the_ciphertext_and_its_handler_the_payload,
    jobs_committed_through_the_outbox_run_in_batches,
);

async fn a_rollback_leaves_no_job(db: AnyDb) {
    let redis = TestRedis::new("outbox-rollback");
    let app = redis.app(|b| b.outbox(db.outbox())).await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();

    let rolled_back = db
        .add_in(
            &email,
            vec![("welcome", welcome(1), JobOptions::new().job_id("welcome-1"))],
            false,
        )
        .await;
    assert_eq!(rolled_back[0].state, Some(JobState::Pending));
    // A later transaction that commits: once its job is in Redis, the relay has been
    // through the outbox after the rollback.
    db.add_in(
        &email,
        vec![("welcome", welcome(2), JobOptions::new().job_id("welcome-2"))],
        true,
    )
    .await;
    wait_for_state(&email, "welcome-2", JobState::Waiting, SOON).await;

    assert_eq!(
        email.get_job("welcome-1").await.unwrap(),
        None,
        "{}",
        db.kind()
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM app_rows").await, 1);
    let outbox = app.outbox().unwrap();
    wait_for_empty(outbox).await;
    assert_eq!(outbox.find("email", "welcome-1").await.unwrap(), None);
}

/// A queue that seals: the row in the application's database holds the envelope (the
/// database and its backups are at rest too), the relay moves it as it is, and the
/// handler gets the payload.
async fn a_sealed_queues_rows_hold_the_ciphertext_and_its_handler_the_payload(db: AnyDb) {
    let redis = TestRedis::new("outbox-sealed");
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen_by_handler = seen.clone();
    let app = redis
        .app(|b| {
            b.outbox(db.outbox().start_relay(false))
                .keyring(queue_core::encryption::Keyring::new("k1", [1; 32]).unwrap())
                .encrypt_queue("email")
                .processor(
                    Processor::new("email").job("welcome", move |job: Job<WelcomeEmail>| {
                        let seen = seen_by_handler.clone();
                        async move {
                            seen.lock().unwrap().push(job.data.to);
                            Ok::<_, JobError>(())
                        }
                    }),
                )
        })
        .await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    let mail = WelcomeEmail {
        user_id: 9,
        to: format!("ada-{}@example.com", uuid::Uuid::new_v4().simple()),
    };
    db.add_in(
        &email,
        vec![(
            "welcome",
            mail.clone(),
            JobOptions::new().job_id("welcome-9"),
        )],
        true,
    )
    .await;
    let in_clear = format!(
        "SELECT COUNT(*) FROM queue_outbox WHERE data LIKE '%{}%'",
        mail.to
    );
    assert_eq!(
        db.count(&in_clear).await,
        0,
        "{}: the row holds it in clear",
        db.kind()
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM queue_outbox WHERE data LIKE '%aes-256-gcm/1%'")
            .await,
        1
    );

    let relay = app.start_relay().unwrap();
    let workers = app.start_workers().await.unwrap();
    wait_for_state(&email, "welcome-9", JobState::Completed, SOON).await;
    assert_eq!(*seen.lock().unwrap(), vec![mail.to.clone()]);
    assert_eq!(redis.keys_holding(&mail.to), Vec::<String>::new());
    workers.shutdown(SOON).await;
    relay.shutdown().await;
}

/// Waits until the relay has deleted every row it added (it deletes a batch's rows
/// while it goes on with the next).
async fn wait_for_empty(outbox: &queue_core::store::Outbox) {
    wait_until(SOON, "the outbox to empty", || async {
        (outbox.counts().await.unwrap().pending == 0).then_some(())
    })
    .await;
}

async fn a_committed_job_arrives_with_everything_a_direct_add_carries(db: AnyDb) {
    let redis = TestRedis::new("outbox-carries");
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen_by_handler = seen.clone();
    let app = redis
        .app(|b| {
            b.outbox(db.outbox().start_relay(false))
                .processor(
                    Processor::new("email").job("welcome", move |job: Job<WelcomeEmail>| {
                        let seen = seen_by_handler.clone();
                        async move {
                            seen.lock().unwrap().push((
                                job.id().to_owned(),
                                job.trace_id().map(str::to_owned),
                                job.data.user_id,
                            ));
                            Ok::<_, JobError>(())
                        }
                    }),
                )
        })
        .await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    let options = JobOptions::new()
        .job_id("welcome-7")
        .attempts(4)
        .priority(3)
        .timeout(Duration::from_secs(20))
        .remove_on_complete(Retention::All);
    let request = trace::TraceContext::new_root();
    let added = trace::scope(request.clone(), async {
        db.add_in(&email, vec![("welcome", welcome(7), options)], true)
            .await
    })
    .await;
    let generated = db
        .add_in(
            &email,
            vec![("welcome", welcome(8), JobOptions::new())],
            true,
        )
        .await;
    assert_eq!(added[0].id, "welcome-7");
    let generated_id = generated[0].id.clone();
    assert!(generated_id.starts_with("o-"), "{generated_id}");

    // Nothing relays yet: the jobs wait in the outbox, visible.
    let outbox = app.outbox().unwrap();
    let pending = outbox.pending(10).await.unwrap();
    assert_eq!(
        pending
            .iter()
            .map(|e| e.job_id.as_str())
            .collect::<Vec<_>>(),
        ["welcome-7", generated_id.as_str()]
    );
    // The status of a job on its way is "pending", never "not found".
    assert_eq!(
        email.get_job_state("welcome-7").await.unwrap(),
        Some(JobState::Pending)
    );
    let waiting = email
        .get_job("welcome-7")
        .await
        .unwrap()
        .expect("found in the outbox");
    assert_eq!((waiting.max_attempts, waiting.priority), (4, 3));
    assert_eq!(waiting.data_as::<WelcomeEmail>().unwrap(), welcome(7));
    // A second add_in of a pending id writes nothing.
    let again = db
        .add_in(
            &email,
            vec![("welcome", welcome(7), JobOptions::new().job_id("welcome-7"))],
            true,
        )
        .await;
    assert!(again[0].duplicate);

    let relay = app.start_relay().unwrap();
    wait_for_state(&email, "welcome-7", JobState::Prioritized, SOON).await;
    let info = email.get_job("welcome-7").await.unwrap().unwrap();
    assert_eq!(info.max_attempts, 4);
    assert_eq!(info.name, "welcome");
    assert_eq!(relay.stats().added, 2);
    wait_for_empty(outbox).await;

    let workers = app.start_workers().await.unwrap();
    wait_for_state(&email, "welcome-7", JobState::Completed, SOON).await;
    wait_for_state(&email, &generated_id, JobState::Completed, SOON).await;
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.contains(&("welcome-7".into(), Some(request.trace_id().to_owned()), 7)),
        "{seen:?}"
    );
    assert_eq!(seen.len(), 2, "{seen:?}");
    workers.shutdown(SOON).await;
    relay.shutdown().await;
}

async fn redis_down_between_commit_and_relay_delays_the_job_but_loses_nothing(db: AnyDb) {
    let mut redis = PrivateRedis::start();
    let app = QueueApp::builder()
        .redis(format!("redis://127.0.0.1:{}", redis.port()))
        .command_timeout(Duration::from_millis(500))
        .outbox(db.outbox().poll_interval(Duration::from_millis(50)))
        .build()
        .await
        .unwrap();
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    redis.kill();

    let ids: Vec<String> = (1..=20).map(|n| format!("welcome-{n}")).collect();
    for (n, id) in (1..).zip(&ids) {
        db.add_in(
            &email,
            vec![("welcome", welcome(n), JobOptions::new().job_id(id))],
            true,
        )
        .await;
    }
    // The relay has tried (and failed): the rows are still there, none set aside.
    let outbox = app.outbox().unwrap();
    wait_until(SOON, "the relay to try the rows", || async {
        let entries = outbox.pending(100).await.unwrap();
        (entries.len() == 20 && entries.iter().all(|e| e.attempts >= 1)).then_some(())
    })
    .await;
    assert_eq!(outbox.counts().await.unwrap().set_aside, 0);
    // Redis cannot be asked, but the outbox knows where the job is.
    assert_eq!(
        email.get_job_state("welcome-1").await.unwrap(),
        Some(JobState::Pending)
    );

    redis.restart();
    wait_until(Duration::from_secs(20), "every job in Redis", || async {
        let counts = email.get_job_counts().await.ok()?;
        (counts.waiting == 20).then_some(())
    })
    .await;
    wait_until(SOON, "the outbox to empty", || async {
        (outbox.counts().await.unwrap().pending == 0).then_some(())
    })
    .await;
    for id in &ids {
        assert!(email.get_job(id).await.unwrap().is_some(), "{id}");
    }
    assert_eq!(app.relay_stats().unwrap().added, 20);
}

async fn two_relays_over_10000_rows_add_each_job_exactly_once(db: AnyDb) {
    relays_over_rows(db, 2, 10_000).await;
}

/// `relays` relays, each on a pool and app of its own (as separate processes would
/// be), take `rows` rows that are committed while they run.
async fn relays_over_rows(db: AnyDb, relays: usize, rows: usize) {
    let redis = TestRedis::new("outbox-relays");
    let producer = redis
        .app(|b| b.outbox(db.outbox().start_relay(false)))
        .await;
    let mut apps = Vec::new();
    for _ in 0..relays {
        let outbox = db
            .another_outbox()
            .await
            .poll_interval(Duration::from_millis(20));
        apps.push(redis.app(|b| b.outbox(outbox.batch_size(200))).await);
    }
    let email = producer.queue::<WelcomeEmail>("email").unwrap();
    for chunk in (0..rows).collect::<Vec<_>>().chunks(250) {
        let jobs = chunk
            .iter()
            .map(|n| {
                (
                    "welcome",
                    welcome(*n as u64),
                    JobOptions::new().job_id(format!("welcome-{n}")),
                )
            })
            .collect();
        db.add_in(&email, jobs, true).await;
    }
    let outbox = producer.outbox().unwrap();
    wait_until(Duration::from_secs(120), "the outbox to empty", || async {
        (outbox.counts().await.unwrap().pending == 0).then_some(())
    })
    .await;
    let stats: Vec<_> = apps.iter().map(|a| a.relay_stats().unwrap()).collect();
    let added: u64 = stats.iter().map(|s| s.added).sum();
    let duplicates: u64 = stats.iter().map(|s| s.duplicates).sum();
    assert_eq!(added, rows as u64, "{} {stats:?}", db.kind());
    assert_eq!(duplicates, 0, "no row was taken by two relays: {stats:?}");
    assert!(
        stats.iter().filter(|s| s.added > 0).count() >= 2,
        "the relays shared the work: {stats:?}"
    );
    // Every row's job is in Redis, and no relay was told "already there": no row was
    // taken twice.
    assert_eq!(email.get_job_counts().await.unwrap().waiting, rows as u64);
}

async fn a_poison_row_is_set_aside_while_the_rows_behind_it_go_through(db: AnyDb) {
    let redis = TestRedis::new("outbox-poison");
    let app = redis
        .app(|b| b.outbox(db.outbox().poll_interval(Duration::from_millis(20))))
        .await;
    let outbox = app.outbox().unwrap();
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    // Rows another version of the app could have written: data that is not JSON,
    // options this app refuses, a queue name BullMQ refuses.
    let now = 1_800_000_000_000i64;
    db.execute(&format!(
        "INSERT INTO queue_outbox (queue, job_id, job_name, data, options, created_at_ms) VALUES \
         ('email', 'bad-data', 'welcome', '{{not json', '{{}}', {now}), \
         ('email', 'bad-options', 'welcome', '{{}}', '{{\"attempts\":0}}', {now}), \
         ('a:b', 'bad-queue', 'welcome', '{{}}', '{{}}', {now})"
    ))
    .await;
    let behind: Vec<String> = (1..=5).map(|n| format!("welcome-{n}")).collect();
    for (n, id) in (1..).zip(&behind) {
        db.add_in(
            &email,
            vec![("welcome", welcome(n), JobOptions::new().job_id(id))],
            true,
        )
        .await;
    }
    for id in &behind {
        wait_for_state(&email, id, JobState::Waiting, SOON).await;
    }
    // The rows behind may go through before the last poison row is set aside (its
    // add is refused after theirs, as on a cluster): wait for the three.
    let failed = wait_until(SOON, "the three poison rows set aside", || async {
        let failed = outbox.failed(10).await.unwrap();
        (failed.len() >= 3).then_some(failed)
    })
    .await;
    let reasons: Vec<(&str, &str)> = failed
        .iter()
        .map(|e| {
            (
                e.job_id.as_str(),
                e.last_error.as_deref().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(failed.len(), 3, "{reasons:?}");
    assert!(reasons[0].1.contains("not JSON"), "{reasons:?}");
    assert!(reasons[1].1.contains("attempts"), "{reasons:?}");
    assert!(reasons[2].1.contains("queue"), "{reasons:?}");
    assert!(failed.iter().all(|e| e.set_aside_at_ms.is_some()));
    assert_eq!(
        email.get_job_state("bad-data").await.unwrap(),
        Some(JobState::Failed)
    );
    let set_aside = email.get_job("bad-options").await.unwrap().unwrap();
    assert!(set_aside.failed_reason.unwrap().contains("attempts"));
    wait_for_empty(outbox).await;
    assert_eq!(outbox.counts().await.unwrap().set_aside, 3);
    assert_eq!(app.relay_stats().unwrap().set_aside, 3);

    // Put back in line after a "fix" (here: none), it is set aside again, not retried
    // for ever.
    assert!(outbox.requeue(failed[0].id).await.unwrap());
    wait_until(SOON, "the requeued row to be set aside again", || async {
        (app.relay_stats().unwrap().set_aside == 4).then_some(())
    })
    .await;
    assert!(!outbox.requeue(999_999).await.unwrap());
}

/// A relay process SIGKILLed between its add and its delete: the row stays, the next
/// relay adds it again, and the job exists once, even after retention removed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_killed_between_add_and_delete_makes_one_job() {
    let db = AnyDb::postgres("relay_killed").await;
    let AnyDb::Postgres(test_db, pool) = &db else {
        unreachable!()
    };
    let redis = TestRedis::new("outbox-killed");
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let app = redis
        .app(|b| {
            b.outbox(db.outbox().start_relay(false).lease(Duration::from_secs(1)))
                .processor(Processor::new("email").job(
                    "welcome",
                    move |_job: Job<WelcomeEmail>| {
                        let counted = counted.clone();
                        async move {
                            counted.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, JobError>(())
                        }
                    },
                ))
        })
        .await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    let options = JobOptions::new()
        .job_id("welcome-1")
        .remove_on_complete(Retention::None);
    db.add_in(&email, vec![("welcome", welcome(1), options)], true)
        .await;

    // Hold KEY SHARE on the row: the relay's claim (NO KEY UPDATE) passes, its DELETE
    // waits, which is the moment between the add and the delete.
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query("SELECT id FROM queue_outbox WHERE job_id = 'welcome-1' FOR KEY SHARE")
        .fetch_one(&mut *blocker)
        .await
        .unwrap();
    let mut relay = std::process::Command::new(env!("CARGO_BIN_EXE_outbox-relay"))
        .env("REDIS_URL", queue_tests::redis_url())
        .env("QUEUE_PREFIX", redis.prefix())
        .env("DATABASE_URL", test_db.url())
        .spawn()
        .expect("the relay process starts");
    wait_until(
        Duration::from_secs(30),
        "the relay's DELETE to wait on the row",
        || async {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND query LIKE 'DELETE FROM queue_outbox%'",
            )
            .fetch_one(pool)
            .await
            .unwrap();
            (waiting == 1).then_some(())
        },
    )
    .await;
    assert!(
        email.get_job("welcome-1").await.unwrap().is_some(),
        "added before the delete"
    );
    relay.kill().unwrap();
    relay.wait().unwrap();
    // PostgreSQL notices a dead client only when it next talks to it: a DELETE waiting
    // on a lock would still run once the lock is free. End the dead relay's session, as
    // a relay that died before its DELETE reached the database would leave it.
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM queue_outbox%'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(ended, [true]);
    blocker.rollback().await.unwrap();
    assert_eq!(
        app.outbox().unwrap().counts().await.unwrap().pending,
        1,
        "the row survived"
    );

    // The job runs and retention removes it: job-id dedup alone could not stop a re-add.
    let workers = app.start_workers().await.unwrap();
    wait_until(SOON, "the job to run and be removed", || async {
        // Read Redis itself: `get_job` would find the row, still in the outbox.
        let gone = redis.job_field("email", "welcome-1", "name").is_none();
        (runs.load(Ordering::SeqCst) == 1 && gone).then_some(())
    })
    .await;
    workers.shutdown(SOON).await;

    // The next relay takes the row once its lease ran out, and adds nothing new.
    let relay = app.start_relay().unwrap();
    wait_until(SOON, "the row to be deleted", || async {
        (app.outbox().unwrap().counts().await.unwrap().pending == 0).then_some(())
    })
    .await;
    assert_eq!(relay.stats().duplicates, 1, "{:?}", relay.stats());
    assert_eq!(relay.stats().added, 0);
    let counts = email.get_job_counts().await.unwrap();
    assert_eq!(counts.unfinished(), 0, "no second job: {counts:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_relays_over_10000_rows_on_postgres_add_each_job_exactly_once() {
    relays_over_rows(AnyDb::postgres("four_relays").await, 4, 10_000).await;
}

#[tokio::test]
async fn add_in_without_an_outbox_or_with_the_wrong_database_is_refused() {
    let redis = TestRedis::new("outbox-refused");
    let db = AnyDb::sqlite("refused").await;
    let AnyDb::Sqlite(_, pool) = &db else {
        unreachable!()
    };
    let plain = redis.app(|b| b).await;
    let mut conn = pool.acquire().await.unwrap();
    let err = plain
        .queue::<WelcomeEmail>("email")
        .unwrap()
        .add_in(&mut *conn, "welcome", welcome(1), JobOptions::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no outbox"), "{err}");

    let pg = AnyDb::postgres("refused").await;
    let on_pg = redis
        .app(|b| b.outbox(pg.outbox().start_relay(false)))
        .await;
    let err = on_pg
        .queue::<WelcomeEmail>("email")
        .unwrap()
        .add_in(&mut *conn, "welcome", welcome(1), JobOptions::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Postgres"), "{err}");
    // A bad option is refused before anything is written, as by `add`.
    let err = on_pg
        .queue::<WelcomeEmail>("email")
        .unwrap()
        .add_in(
            &mut *conn,
            "welcome",
            welcome(1),
            JobOptions::new().job_id("a:b"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, queue_core::Error::InvalidOption { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn bad_relay_settings_are_refused_at_build() {
    let db = AnyDb::sqlite("settings").await;
    let redis = TestRedis::new("outbox-settings");
    for (outbox, option) in [
        (db.outbox().batch_size(0), "outbox batch_size"),
        (db.outbox().lease(Duration::ZERO), "outbox lease"),
        (
            db.outbox().poll_interval(Duration::ZERO),
            "outbox poll_interval",
        ),
        (
            db.outbox().dedup_window(Duration::from_secs(5)),
            "outbox dedup_window",
        ),
    ] {
        let err = redis.builder().outbox(outbox).build().await.unwrap_err();
        assert!(
            matches!(&err, queue_core::Error::InvalidOption { option: o, .. } if *o == option),
            "{err}"
        );
    }
}

/// A batch worker takes what the relay adds as it takes any job (#46).
async fn jobs_committed_through_the_outbox_run_in_batches(db: AnyDb) {
    let redis = TestRedis::new("outbox-batches");
    let batches = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = batches.clone();
    let send = move |batch: queue_core::worker::Batch<WelcomeEmail>| {
        let seen = seen.clone();
        async move {
            let ids: Vec<String> = batch.iter().map(|job| job.id().to_owned()).collect();
            seen.lock().unwrap().push(ids);
            Ok::<_, JobError>(queue_core::worker::BatchResult::new())
        }
    };
    let app = redis
        .app(|b| {
            b.outbox(db.outbox())
                .processor(Processor::new("email").batch(10, Duration::from_millis(300), send))
        })
        .await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    let jobs = (1..=3)
        .map(|n| {
            (
                "welcome",
                welcome(n),
                JobOptions::new().job_id(format!("welcome-{n}")),
            )
        })
        .collect();
    db.add_in(&email, jobs, true).await;
    let workers = app.start_workers().await.unwrap();
    for n in 1..=3 {
        wait_for_state(&email, &format!("welcome-{n}"), JobState::Completed, SOON).await;
    }
    workers.shutdown(SOON).await;
    let mut ran: Vec<String> = batches.lock().unwrap().concat();
    ran.sort();
    assert_eq!(
        ran,
        ["welcome-1", "welcome-2", "welcome-3"],
        "each once, {}",
        db.kind()
    );
}
