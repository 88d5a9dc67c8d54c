//! The outbox at its edges (issue #27, items 4 to 8), on real SQLite and PostgreSQL
//! databases and a real Redis: a job id used again after its job was removed, a row
//! left behind by a relay that died before its delete, relays built differently from
//! their producers, the default delay, and a set-aside row's job id.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queue_core::{
    store::Outbox, Backoff, Job, JobError, JobOptions, JobState, Processor, Queue, Retention,
};
use queue_tests::db::AnyDb;
use queue_tests::fixtures::{welcome, WelcomeEmail};
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};

queue_tests::on_both_databases!(
    add_in_of_a_finished_and_removed_job_id_runs_the_job_again,
    a_row_left_by_a_dead_relay_adds_no_second_job_after_remove_clean_drain_or_obliterate,
    a_row_this_relay_cannot_add_waits_for_a_relay_that_can,
    the_relay_does_not_apply_the_default_delay_again,
    a_set_aside_row_does_not_block_its_job_id,
);

/// A relay that polls often, so that tests need not wait for its second-long poll.
fn quick(outbox: Outbox) -> Outbox {
    outbox.poll_interval(Duration::from_millis(20))
}

async fn wait_for_empty(outbox: &Outbox) {
    wait_until(SOON, "the outbox to have no pending row", || async {
        (outbox.counts().await.unwrap().pending == 0).then_some(())
    })
    .await;
}

/// Whether Redis holds the job, read from Redis itself (`get_job` also finds rows
/// still in the outbox).
fn in_redis(redis: &TestRedis, queue: &str, id: &str) -> bool {
    redis.job_field(queue, id, "name").is_some()
}

/// Item 4: the relay's deduplication was keyed by the job id, so a new row for the id
/// of a job that ran and was removed was taken for the old one and dropped.
async fn add_in_of_a_finished_and_removed_job_id_runs_the_job_again(db: AnyDb) {
    let redis = TestRedis::new("outbox-reused-id");
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let app = redis
        .app(|b| {
            b.outbox(quick(db.outbox()))
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
    let workers = app.start_workers().await.unwrap();
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    let options = || {
        JobOptions::new()
            .job_id("welcome-1")
            .remove_on_complete(Retention::None)
    };
    db.add_in(&email, vec![("welcome", welcome(1), options())], true)
        .await;
    let outbox = app.outbox().unwrap();
    wait_until(SOON, "the job to run and be removed", || async {
        let done = runs.load(Ordering::SeqCst) == 1 && !in_redis(&redis, "email", "welcome-1");
        (done && outbox.counts().await.unwrap().pending == 0).then_some(())
    })
    .await;

    // The id is free again: `add` would add the job, and so must `add_in`.
    let again = db
        .add_in(&email, vec![("welcome", welcome(1), options())], true)
        .await;
    assert!(!again[0].duplicate, "{again:?}");
    assert_eq!(again[0].state, Some(JobState::Pending));
    wait_until(SOON, "the job added again to run", || async {
        (runs.load(Ordering::SeqCst) == 2).then_some(())
    })
    .await;
    wait_for_empty(outbox).await;
    let stats = app.relay_stats().unwrap();
    assert_eq!((stats.added, stats.duplicates), (2, 0), "{stats:?}");
    workers.shutdown(SOON).await;
}

/// Makes every delete of an outbox row fail, as if the relay died between Redis's
/// acknowledgement and its delete: the row stays, leased.
async fn relay_dies_before_its_deletes(db: &AnyDb) {
    match db {
        AnyDb::Sqlite(..) => {
            db.execute(
                "CREATE TRIGGER relay_dies BEFORE DELETE ON queue_outbox \
                 BEGIN SELECT RAISE(ABORT, 'the relay died before its delete'); END",
            )
            .await
        }
        AnyDb::Postgres(..) => {
            db.execute(
                "CREATE FUNCTION relay_dies() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'the relay died before its delete'; END $$; \
                 CREATE TRIGGER relay_dies BEFORE DELETE ON queue_outbox \
                 FOR EACH ROW EXECUTE FUNCTION relay_dies()",
            )
            .await
        }
    }
}

async fn relays_delete_again(db: &AnyDb) {
    match db {
        AnyDb::Sqlite(..) => db.execute("DROP TRIGGER relay_dies").await,
        AnyDb::Postgres(..) => db.execute("DROP TRIGGER relay_dies ON queue_outbox").await,
    }
}

/// Item 5: BullMQ deletes a job's deduplication key with the job, so the relay's
/// window did not survive an operator's remove, clean, drain or obliterate: a row left
/// behind by a relay that died before its delete became a second job.
async fn a_row_left_by_a_dead_relay_adds_no_second_job_after_remove_clean_drain_or_obliterate(
    db: AnyDb,
) {
    let redis = TestRedis::new("outbox-left-behind");
    let app = redis
        .app(|b| b.outbox(quick(db.outbox()).lease(Duration::from_secs(1))))
        .await;
    let ways = ["remove", "clean", "drain", "obliterate"];
    let queues: Vec<Queue<WelcomeEmail>> = ways
        .iter()
        .map(|way| app.queue(&format!("email-{way}")).unwrap())
        .collect();

    relay_dies_before_its_deletes(&db).await;
    for queue in &queues {
        let job = ("welcome", welcome(1), JobOptions::new().job_id("welcome-1"));
        db.add_in(queue, vec![job], true).await;
    }
    wait_until(SOON, "every job in Redis", || async {
        queues
            .iter()
            .all(|q| in_redis(&redis, q.name(), "welcome-1"))
            .then_some(())
    })
    .await;
    app.stop_relay().await;
    let outbox = app.outbox().unwrap();
    assert_eq!(outbox.counts().await.unwrap().pending, 4, "the rows stayed");

    // An operator removes each job, each a different way.
    queues[0].remove("welcome-1").await.unwrap();
    queues[1]
        .clean(Duration::ZERO, 0, JobState::Waiting)
        .await
        .unwrap();
    queues[2].drain(true).await.unwrap();
    queues[3].obliterate(true).await.unwrap();
    for (queue, way) in queues.iter().zip(ways) {
        assert!(!in_redis(&redis, queue.name(), "welcome-1"), "{way}");
    }

    // The next relay takes the rows once their lease ran out: each was added already.
    relays_delete_again(&db).await;
    let relay = app.start_relay().unwrap();
    wait_for_empty(outbox).await;
    let added_again: Vec<&str> = queues
        .iter()
        .zip(ways)
        .filter(|(queue, _)| in_redis(&redis, queue.name(), "welcome-1"))
        .map(|(_, way)| way)
        .collect();
    assert!(
        added_again.is_empty(),
        "rows relayed once were added again after {added_again:?} ({})",
        db.kind()
    );
    let stats = relay.stats();
    assert_eq!((stats.added, stats.duplicates), (0, 4), "{stats:?}");
    relay.shutdown().await;
}

/// Item 6: a relay built without the producer's custom backoff set the row aside for
/// good, and the producer saw its job as failed. A relay that cannot add a row as its
/// producer wrote it leaves it for one that can.
async fn a_row_this_relay_cannot_add_waits_for_a_relay_that_can(db: AnyDb) {
    let redis = TestRedis::new("outbox-other-build");
    let producer = redis
        .app(|b| {
            b.backoff_strategy("gentle", |_ctx| Some(Duration::from_secs(1)))
                .outbox(quick(db.outbox()).start_relay(false))
        })
        .await;
    // Another process, of an older build: it knows no `gentle` backoff.
    let older_outbox = quick(db.another_outbox().await);
    let older = redis.app(|b| b.outbox(older_outbox)).await;
    let email = producer.queue::<WelcomeEmail>("email").unwrap();
    let options = JobOptions::new()
        .job_id("welcome-1")
        .attempts(3)
        .backoff(Backoff::custom("gentle"));
    db.add_in(&email, vec![("welcome", welcome(1), options)], true)
        .await;
    // Until the older relay has tried the row and settled it, one way or the other.
    wait_until(SOON, "the older relay to try the row", || async {
        let tried = db
            .count(
                "SELECT COUNT(*) FROM queue_outbox \
                 WHERE job_id = 'welcome-1' AND last_error IS NOT NULL",
            )
            .await;
        let stats = older.relay_stats().unwrap();
        (tried == 1 && stats.deferred + stats.set_aside >= 1).then_some(())
    })
    .await;
    let outbox = producer.outbox().unwrap();
    assert_eq!(
        outbox.counts().await.unwrap().set_aside,
        0,
        "not set aside: {:?}",
        outbox.failed(10).await.unwrap()
    );
    assert_eq!(
        email.get_job_state("welcome-1").await.unwrap(),
        Some(JobState::Pending),
        "the producer sees its job on its way, not failed"
    );
    let waiting = outbox.pending(10).await.unwrap();
    let reason = waiting[0].last_error.clone().unwrap_or_default();
    assert!(reason.contains("gentle"), "{reason}");

    let stats = older.relay_stats().unwrap();
    assert!(stats.deferred >= 1 && stats.set_aside == 0, "{stats:?}");

    // The older process is replaced by the new build: the row goes through.
    older.stop_relay().await;
    let relay = producer.start_relay().unwrap();
    wait_for_state(&email, "welcome-1", JobState::Waiting, SOON).await;
    assert!(in_redis(&redis, "email", "welcome-1"));
    wait_for_empty(outbox).await;
    assert_eq!(relay.stats().added, 1);
    relay.shutdown().await;
}

/// Item 7: `add_in` applied the queue's default delay; the relay applied it again when
/// the delay had been spent while the row waited.
async fn the_relay_does_not_apply_the_default_delay_again(db: AnyDb) {
    let redis = TestRedis::new("outbox-default-delay");
    let app = redis
        .app(|b| {
            // Its workers are elsewhere: this app only produces, through the outbox.
            b.external_queue("email")
                .queue_defaults("email", JobOptions::new().delay(Duration::from_secs(5)))
                .outbox(quick(db.outbox()).start_relay(false))
        })
        .await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    let added = db
        .add_in(
            &email,
            vec![("welcome", welcome(1), JobOptions::new().job_id("welcome-1"))],
            true,
        )
        .await;
    assert!(!added[0].duplicate);
    // The row waited a minute for a relay (Redis was down, say): its delay is spent.
    db.execute("UPDATE queue_outbox SET created_at_ms = created_at_ms - 60000")
        .await;

    let relay = app.start_relay().unwrap();
    wait_until(SOON, "the job in Redis", || async {
        in_redis(&redis, "email", "welcome-1").then_some(())
    })
    .await;
    assert_eq!(
        email.get_job_state("welcome-1").await.unwrap(),
        Some(JobState::Waiting),
        "its delay was spent in the outbox ({})",
        db.kind()
    );
    relay.shutdown().await;
}

/// Item 8: a set-aside row kept its job id, and a later `add_in` of that id answered
/// "duplicate, pending" for a row that would never be added.
async fn a_set_aside_row_does_not_block_its_job_id(db: AnyDb) {
    let redis = TestRedis::new("outbox-set-aside-id");
    let app = redis.app(|b| b.outbox(quick(db.outbox()))).await;
    let outbox = app.outbox().unwrap();
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    // A row another version of the app wrote, which no relay can ever add.
    db.execute(
        "INSERT INTO queue_outbox (queue, job_id, job_name, data, options, created_at_ms) \
         VALUES ('email', 'welcome-1', 'welcome', '{not json', '{}', 1800000000000)",
    )
    .await;
    wait_until(SOON, "the row to be set aside", || async {
        (outbox.counts().await.unwrap().set_aside == 1).then_some(())
    })
    .await;
    assert_eq!(
        email.get_job_state("welcome-1").await.unwrap(),
        Some(JobState::Failed)
    );

    let again = db
        .add_in(
            &email,
            vec![("welcome", welcome(1), JobOptions::new().job_id("welcome-1"))],
            true,
        )
        .await;
    assert!(!again[0].duplicate, "{again:?}");
    assert_eq!(again[0].state, Some(JobState::Pending));
    // The new row's job, not the set-aside one's failure: still in the outbox, or
    // already relayed (the relay polls every few milliseconds here).
    let state = email.get_job_state("welcome-1").await.unwrap();
    assert!(
        matches!(state, Some(JobState::Pending | JobState::Waiting)),
        "the new row, not the set-aside one: {state:?}"
    );
    wait_for_state(&email, "welcome-1", JobState::Waiting, SOON).await;
    let job = email.get_job("welcome-1").await.unwrap().unwrap();
    assert_eq!(job.data_as::<WelcomeEmail>().unwrap(), welcome(1));
    wait_for_empty(outbox).await;
    // The set-aside row was replaced by the new one: nothing is left of it.
    assert_eq!(outbox.counts().await.unwrap().set_aside, 0);
}
