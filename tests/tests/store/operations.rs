//! Operation records and stage records on real SQLite and PostgreSQL: an effect runs
//! once per key however many workers race for it, and multi-step work skips what is
//! done.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queue_core::{store::OnceOutcome, store::OperationError, store::Operations, store::Stages};
use queue_tests::db::AnyDb;
use sqlx::{Pool, Sqlite};
use tokio::sync::Barrier;

const RACERS: usize = 8;

/// `RACERS` tasks run one key's effect at once; each effect writes a row to
/// `effects` in the transaction it is given and returns who ran it.
async fn racers<DB>(pool: Pool<DB>) -> Vec<OnceOutcome<String>>
where
    DB: queue_core::store::Backend,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
{
    let ops = Operations::new(pool.clone());
    ops.migrate().await.unwrap();
    sqlx::raw_sql("CREATE TABLE effects (racer TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    let barrier = Arc::new(Barrier::new(RACERS));
    let tasks: Vec<_> = (0..RACERS)
        .map(|racer| {
            let ops = ops.clone();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                ops.run_once("grant-7-birthday-2026-03-14", move |tx| {
                    Box::pin(async move {
                        sqlx::query(&format!(
                            "INSERT INTO effects (racer) VALUES ('racer-{racer}')"
                        ))
                        .execute(&mut *tx)
                        .await?;
                        // Hold the key a moment, so that the others really wait on it.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok::<_, sqlx::Error>(format!("racer-{racer}"))
                    })
                })
                .await
                .expect("every racer gets an answer")
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    outcomes
}

async fn racing_on_one_key_gives_one_effect(db: AnyDb) {
    let outcomes = match &db {
        AnyDb::Sqlite(_, pool) => racers(pool.clone()).await,
        AnyDb::Postgres(_, pool) => racers(pool.clone()).await,
    };
    let ran: Vec<&String> = outcomes
        .iter()
        .filter_map(|o| match o {
            OnceOutcome::Ran(who) => Some(who),
            OnceOutcome::AlreadyDone(_) => None,
        })
        .collect();
    assert_eq!(ran.len(), 1, "{}: {outcomes:?}", db.kind());
    let winner = ran[0].clone();
    assert!(
        outcomes.iter().all(|o| o.clone().into_result() == winner),
        "the losers get the winner's result: {outcomes:?}"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM effects").await,
        1,
        "{}",
        db.kind()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_racing_on_one_key_gives_one_effect() {
    racing_on_one_key_gives_one_effect(AnyDb::sqlite("racers").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_racing_on_one_key_gives_one_effect() {
    racing_on_one_key_gives_one_effect(AnyDb::postgres("racers").await).await;
}

async fn sqlite_pool(db: &AnyDb) -> Pool<Sqlite> {
    match db {
        AnyDb::Sqlite(_, pool) => pool.clone(),
        AnyDb::Postgres(..) => unreachable!(),
    }
}

#[tokio::test]
async fn a_failed_effect_records_nothing_and_the_next_call_runs_it() {
    let db = AnyDb::sqlite("failed_effect").await;
    let ops = Operations::new(sqlite_pool(&db).await);
    ops.migrate().await.unwrap();
    db.execute("CREATE TABLE effects (n INTEGER)").await;
    let failed = ops
        .run_once("k", |tx| {
            Box::pin(async move {
                sqlx::query("INSERT INTO effects (n) VALUES (1)")
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| e.to_string())?;
                Err::<u32, _>("the mail server said no".to_owned())
            })
        })
        .await;
    assert!(matches!(failed, Err(OperationError::Effect(ref e)) if e == "the mail server said no"));
    assert_eq!(
        db.count("SELECT COUNT(*) FROM effects").await,
        0,
        "rolled back with it"
    );
    assert_eq!(ops.result::<u32>("k").await.unwrap(), None);

    let ran = ops
        .run_once("k", |_tx| Box::pin(async { Ok::<_, String>(42u32) }))
        .await
        .unwrap();
    assert_eq!(ran, OnceOutcome::Ran(42));
    let repeat = ops
        .run_once("k", |_tx| Box::pin(async { Ok::<_, String>(0u32) }))
        .await
        .unwrap();
    assert_eq!(repeat, OnceOutcome::AlreadyDone(42));
    assert_eq!(ops.result::<u32>("k").await.unwrap(), Some(42));
}

async fn a_report_in_stages_skips_what_is_done(db: AnyDb) {
    let effects = Arc::new(AtomicUsize::new(0));
    macro_rules! report {
        ($pool:expr) => {{
            let report = Stages::new($pool.clone(), ["generated", "uploaded", "notified"]);
            report.migrate().await.unwrap();
            let key = "report-2026-11";
            let count = |effects: &Arc<AtomicUsize>| {
                effects.fetch_add(1, Ordering::SeqCst);
            };
            // Out of order is refused.
            let early = report
                .step(key, "uploaded", || async { Ok::<_, String>("x".to_owned()) })
                .await;
            assert!(
                matches!(early, Err(OperationError::OutOfOrder { ref missing, .. }) if missing == "generated"),
                "{early:?}"
            );
            let unknown = report
                .step(key, "printed", || async { Ok::<_, String>(0) })
                .await;
            assert!(matches!(unknown, Err(OperationError::UnknownStage { .. })), "{unknown:?}");

            // First run: generated, then the upload fails (the worker "died").
            let pdf = report
                .step(key, "generated", || async {
                    count(&effects);
                    Ok::<_, String>("report-2026-11.pdf".to_owned())
                })
                .await
                .unwrap();
            assert_eq!(pdf, OnceOutcome::Ran("report-2026-11.pdf".to_owned()));
            let upload = report
                .step(key, "uploaded", || async { Err::<String, _>("S3 is down".to_owned()) })
                .await;
            assert!(matches!(upload, Err(OperationError::Effect(_))));
            assert_eq!(report.current(key).await.unwrap().as_deref(), Some("generated"));

            // The retry: generation is skipped with its stored result, the rest runs.
            let pdf = report
                .step(key, "generated", || async {
                    count(&effects);
                    Ok::<_, String>("never".to_owned())
                })
                .await
                .unwrap();
            assert_eq!(pdf, OnceOutcome::AlreadyDone("report-2026-11.pdf".to_owned()));
            let url = report
                .step(key, "uploaded", || async {
                    count(&effects);
                    Ok::<_, String>(format!("s3://reports/{}", pdf.into_result()))
                })
                .await
                .unwrap()
                .into_result();
            assert_eq!(url, "s3://reports/report-2026-11.pdf");
            // The last stage writes to the database in the stage's own transaction.
            sqlx::raw_sql("CREATE TABLE notices (url TEXT)").execute($pool).await.unwrap();
            for _ in 0..2 {
                let url = url.clone();
                report
                    .step_in(key, "notified", move |tx| {
                        Box::pin(async move {
                            sqlx::query(&format!("INSERT INTO notices (url) VALUES ('{url}')"))
                                .execute(&mut *tx)
                                .await?;
                            Ok::<_, sqlx::Error>(true)
                        })
                    })
                    .await
                    .unwrap();
            }
            let done = report.done(key).await.unwrap();
            assert_eq!(
                done.iter().map(|s| s.stage.as_str()).collect::<Vec<_>>(),
                ["generated", "uploaded", "notified"]
            );
            assert_eq!(done[1].result, serde_json::json!("s3://reports/report-2026-11.pdf"));
        }};
    }
    match &db {
        AnyDb::Sqlite(_, pool) => report!(pool),
        AnyDb::Postgres(_, pool) => report!(pool),
    }
    assert_eq!(
        effects.load(Ordering::SeqCst),
        2,
        "generated once, uploaded once"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM notices").await,
        1,
        "notified once"
    );
}

#[tokio::test]
async fn sqlite_a_report_in_stages_skips_what_is_done() {
    a_report_in_stages_skips_what_is_done(AnyDb::sqlite("stages").await).await;
}

#[tokio::test]
async fn postgres_a_report_in_stages_skips_what_is_done() {
    a_report_in_stages_skips_what_is_done(AnyDb::postgres("stages").await).await;
}
