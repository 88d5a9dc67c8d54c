//! queue-core's tables (outbox, operation and stage records) are created and upgraded
//! safely by any number of processes starting at once, on SQLite and PostgreSQL (issue
//! #27, start-up).

use std::time::Duration;

use queue_core::{JobOptions, JobState};
use queue_tests::db::AnyDb;
use queue_tests::fixtures::{welcome, WelcomeEmail};
use queue_tests::{wait_for_state, TestRedis, SOON};

queue_tests::on_both_databases!(
    processes_starting_together_all_migrate,
    a_database_of_the_previous_release_is_upgraded_by_processes_starting_together,
    a_process_starting_during_an_open_add_in_transaction_does_not_wait_for_it,
);

/// Eight processes (each its own pool) migrate a fresh database at once, three times
/// over: none fails on another's table or column.
async fn processes_starting_together_all_migrate(db: AnyDb) {
    let mut outboxes = Vec::new();
    for _ in 0..8 {
        outboxes.push(db.another_outbox().await);
    }
    for round in 0..3 {
        let starts: Vec<_> = outboxes
            .iter()
            .cloned()
            .map(|outbox| tokio::spawn(async move { outbox.migrate().await }))
            .collect();
        for start in starts {
            start
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("round {round} on {}: {e}", db.kind()));
        }
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM queue_outbox").await, 0);
}

/// The outbox table as the release before issue #27 made it: no `row_key`.
const PREVIOUS_OUTBOX: &str = "CREATE TABLE queue_outbox (
    id             {id} PRIMARY KEY{autoincrement},
    queue          TEXT   NOT NULL,
    job_id         TEXT   NOT NULL,
    job_name       TEXT   NOT NULL,
    data           TEXT   NOT NULL,
    options        TEXT   NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    attempts       INT    NOT NULL DEFAULT 0,
    lease_owner    TEXT,
    lease_until_ms BIGINT,
    last_error     TEXT,
    failed_at_ms   BIGINT,
    UNIQUE (queue, job_id)
)";

/// A database whose outbox the previous release made, with a row it wrote, is upgraded
/// by processes starting together; the row is relayed.
async fn a_database_of_the_previous_release_is_upgraded_by_processes_starting_together(db: AnyDb) {
    let (id, autoincrement) = match db {
        AnyDb::Sqlite(..) => ("INTEGER", " AUTOINCREMENT"),
        AnyDb::Postgres(..) => ("BIGSERIAL", ""),
    };
    db.execute(
        &PREVIOUS_OUTBOX
            .replace("{id}", id)
            .replace("{autoincrement}", autoincrement),
    )
    .await;
    db.execute(
        "INSERT INTO queue_outbox (queue, job_id, job_name, data, options, created_at_ms) \
         VALUES ('email', 'welcome-1', 'welcome', '{\"userId\":1,\"to\":\"user1@example.com\"}', \
         '{\"attempts\":2}', 1800000000000)",
    )
    .await;
    let mut starts = Vec::new();
    for _ in 0..6 {
        let outbox = db.another_outbox().await;
        starts.push(tokio::spawn(async move { outbox.migrate().await }));
    }
    for start in starts {
        start.await.unwrap().expect("every process migrates");
    }

    let redis = TestRedis::new("outbox-upgraded");
    let app = redis
        .app(|b| b.outbox(db.outbox().poll_interval(Duration::from_millis(20))))
        .await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    wait_for_state(&email, "welcome-1", JobState::Waiting, SOON).await;
    let job = email.get_job("welcome-1").await.unwrap().unwrap();
    assert_eq!(job.data_as::<WelcomeEmail>().unwrap(), welcome(1));
    assert_eq!(job.max_attempts, 2);
    // New rows go through the upgraded table as well.
    let added = db
        .add_in(
            &email,
            vec![("welcome", welcome(2), JobOptions::new().job_id("welcome-2"))],
            true,
        )
        .await;
    assert!(!added[0].duplicate);
    wait_for_state(&email, "welcome-2", JobState::Waiting, SOON).await;
}

/// A process starting while another's transaction has written an outbox row (and holds
/// it until its commit) does not wait for that transaction: the tables exist already,
/// so its migration takes no lock on them. (PostgreSQL's `CREATE INDEX IF NOT EXISTS`
/// and `ALTER TABLE ... IF NOT EXISTS` lock the table before they look, and waited for
/// the transaction, with every `add_in` queued behind them; SQLite's `BEGIN IMMEDIATE`
/// waits for the open write transaction.)
async fn a_process_starting_during_an_open_add_in_transaction_does_not_wait_for_it(db: AnyDb) {
    let redis = TestRedis::new("outbox-migrate-open-tx");
    let app = redis
        .app(|b| b.outbox(db.outbox().start_relay(false)))
        .await;
    let email = app.queue::<WelcomeEmail>("email").unwrap();
    let starting = db.another_outbox().await;
    let job = || JobOptions::new().job_id("welcome-1");
    let migrated = match &db {
        AnyDb::Sqlite(_, pool) => {
            let mut open = pool.begin().await.unwrap();
            email
                .add_in(&mut *open, "welcome", welcome(1), job())
                .await
                .unwrap();
            let migrated = tokio::time::timeout(SOON, starting.migrate()).await;
            open.commit().await.unwrap();
            migrated
        }
        AnyDb::Postgres(_, pool) => {
            let mut open = pool.begin().await.unwrap();
            email
                .add_in(&mut *open, "welcome", welcome(1), job())
                .await
                .unwrap();
            let migrated = tokio::time::timeout(SOON, starting.migrate()).await;
            open.commit().await.unwrap();
            migrated
        }
    };
    assert!(
        matches!(migrated, Ok(Ok(()))),
        "the migration waited for the open transaction ({}): {migrated:?}",
        db.kind()
    );
}
