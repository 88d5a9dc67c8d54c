//! The example's processes (web and workers) started together on a new database all
//! migrate it: none dies on another's `CREATE TABLE` or `ALTER TABLE` (issue #27,
//! start-up). Each "process" here is a `Db::connect` with a pool of its own, all at once.

mod support;

use queue_tests::db::TestPostgres;
use welcome_app::db::Db;

use support::ScratchDir;

/// Connects `processes` times at once to `url`; every connect must succeed.
async fn start_together(url: &str, processes: usize) {
    let starts: Vec<_> = (0..processes)
        .map(|_| {
            let url = url.to_owned();
            tokio::spawn(async move { Db::connect(&url).await })
        })
        .collect();
    for (n, start) in starts.into_iter().enumerate() {
        if let Err(e) = start.await.unwrap() {
            panic!("process {n} of {processes} could not start on {url}: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_starting_together_on_a_new_sqlite_database_all_migrate() {
    // Five new databases: the race this guards against lost one or two processes of
    // three in five trials of eight.
    for round in 0..5 {
        let dir = ScratchDir::new(&format!("migrate-race-{round}"));
        start_together(&dir.sqlite_url(), 4).await;
        let db = Db::connect(&dir.sqlite_url()).await.unwrap();
        assert!(db.users().await.unwrap().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_starting_together_on_a_new_postgres_database_all_migrate() {
    for _ in 0..3 {
        let pg = TestPostgres::new("welcome_migrate_race").await;
        start_together(pg.url(), 4).await;
        let db = Db::connect(pg.url()).await.unwrap();
        assert!(db.users().await.unwrap().is_empty());
    }
}
