//! Real databases for the tests: a SQLite file and a PostgreSQL database of their own,
//! each removed when the test ends (even by a panic).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

/// `PG_URL`, or the machine's PostgreSQL (trust auth) as the `postgres` user.
pub fn postgres_admin_url() -> String {
    std::env::var("PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A PostgreSQL database made for one test, dropped on drop.
#[derive(Debug)]
pub struct TestPostgres {
    name: String,
    url: String,
}

fn unique_name(label: &str) -> String {
    let clean: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(30)
        .collect();
    format!(
        "qt_{clean}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

fn with_database(admin: &str, name: &str) -> String {
    match admin.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{name}"),
        None => format!("{admin}/{name}"),
    }
}

impl TestPostgres {
    /// Creates the database.
    pub async fn new(label: &str) -> Self {
        let name = unique_name(label);
        let admin = postgres_admin_url();
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect(&admin)
            .await
            .expect("the test PostgreSQL answers (PG_URL)");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&pool)
            .await
            .expect("CREATE DATABASE");
        pool.close().await;
        TestPostgres {
            url: with_database(&admin, &name),
            name,
        }
    }

    /// Its URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A pool of `size` connections to it.
    pub async fn pool(&self, size: u32) -> PgPool {
        PgPoolOptions::new()
            .max_connections(size)
            .acquire_timeout(Duration::from_secs(30))
            .connect(&self.url)
            .await
            .expect("connect to the test database")
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        // Its own thread and runtime: drop may run inside (or outside) a runtime, and
        // while a failed test unwinds.
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let pool = PgPoolOptions::new()
                    .max_connections(1)
                    .connect(&postgres_admin_url())
                    .await?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&pool)
                    .await?;
                Ok::<_, sqlx::Error>(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test database {}: {dropped:?}", self.name);
        }
    }
}

/// A SQLite database file made for one test (WAL, busy timeout), deleted on drop.
#[derive(Debug)]
pub struct TestSqlite {
    path: PathBuf,
}

impl TestSqlite {
    /// A new, empty file name.
    pub fn new(label: &str) -> Self {
        let path = std::env::temp_dir().join(format!("{}.db", unique_name(label)));
        TestSqlite { path }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("sqlite://{}", self.path.display())
    }

    /// A pool of `size` connections (creating the file).
    pub async fn pool(&self, size: u32) -> SqlitePool {
        let options = SqliteConnectOptions::from_str(&self.url())
            .expect("sqlite url")
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(30));
        SqlitePoolOptions::new()
            .max_connections(size)
            .connect_with(options)
            .await
            .expect("open the test database")
    }
}

impl Drop for TestSqlite {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut file = self.path.clone().into_os_string();
            file.push(suffix);
            let _ = std::fs::remove_file(file);
        }
    }
}

/// A test database of either kind, for scenarios that run on both.
#[derive(Debug)]
pub enum AnyDb {
    /// SQLite.
    Sqlite(TestSqlite, SqlitePool),
    /// PostgreSQL.
    Postgres(TestPostgres, PgPool),
}

impl AnyDb {
    /// A fresh SQLite database.
    pub async fn sqlite(label: &str) -> Self {
        let db = TestSqlite::new(label);
        let pool = db.pool(8).await;
        AnyDb::Sqlite(db, pool)
    }

    /// A fresh PostgreSQL database.
    pub async fn postgres(label: &str) -> Self {
        let db = TestPostgres::new(label).await;
        let pool = db.pool(16).await;
        AnyDb::Postgres(db, pool)
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn kind(&self) -> &'static str {
        match self {
            AnyDb::Sqlite(..) => "sqlite",
            AnyDb::Postgres(..) => "postgres",
        }
    }

    /// An outbox on this database.
    pub fn outbox(&self) -> queue_core::store::Outbox {
        match self {
            AnyDb::Sqlite(_, pool) => queue_core::store::Outbox::new(pool.clone()),
            AnyDb::Postgres(_, pool) => queue_core::store::Outbox::new(pool.clone()),
        }
    }

    /// Another pool on the same database (another "process").
    pub async fn another_outbox(&self) -> queue_core::store::Outbox {
        match self {
            AnyDb::Sqlite(db, _) => queue_core::store::Outbox::new(db.pool(4).await),
            AnyDb::Postgres(db, _) => queue_core::store::Outbox::new(db.pool(4).await),
        }
    }

    /// Runs SQL with no parameters.
    pub async fn execute(&self, sql: &str) {
        match self {
            AnyDb::Sqlite(_, pool) => sqlx::raw_sql(sql).execute(pool).await.map(drop),
            AnyDb::Postgres(_, pool) => sqlx::raw_sql(sql).execute(pool).await.map(drop),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// One integer from SQL with no parameters.
    pub async fn count(&self, sql: &str) -> i64 {
        match self {
            AnyDb::Sqlite(_, pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
            AnyDb::Postgres(_, pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Adds `jobs` to `queue` through the outbox in one transaction, which is committed,
    /// or rolled back when `commit` is false. Each transaction also inserts a row into
    /// `app_rows(id)` (created on first use) so that it writes application data too.
    pub async fn add_in<T: serde::Serialize>(
        &self,
        queue: &queue_core::Queue<T>,
        jobs: Vec<(&str, T, queue_core::JobOptions)>,
        commit: bool,
    ) -> Vec<queue_core::AddedJob> {
        self.execute("CREATE TABLE IF NOT EXISTS app_rows (id TEXT PRIMARY KEY)")
            .await;
        match self {
            AnyDb::Sqlite(_, pool) => in_tx(pool, queue, jobs, commit).await,
            AnyDb::Postgres(_, pool) => in_tx(pool, queue, jobs, commit).await,
        }
    }
}

async fn in_tx<DB, T>(
    pool: &sqlx::Pool<DB>,
    queue: &queue_core::Queue<T>,
    jobs: Vec<(&str, T, queue_core::JobOptions)>,
    commit: bool,
) -> Vec<queue_core::AddedJob>
where
    DB: queue_core::store::Backend,
    DB::Connection: queue_core::store::OutboxConnection,
    T: serde::Serialize,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    String: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query(&format!(
        "INSERT INTO app_rows (id) VALUES ('{}')",
        uuid::Uuid::new_v4().simple()
    ))
    .execute(&mut *tx)
    .await
    .expect("the application's own write");
    let mut added = Vec::new();
    for (name, data, options) in jobs {
        added.push(
            queue
                .add_in(&mut *tx, name, data, options)
                .await
                .expect("add_in"),
        );
    }
    if commit {
        tx.commit().await.expect("commit");
    } else {
        tx.rollback().await.expect("rollback");
    }
    added
}

/// Declares, in the calling test file, one test per database for each scenario
/// `async fn(AnyDb)` named: `sqlite::<name>` and `postgres::<name>`, each on a fresh
/// database labelled with the scenario's name.
#[macro_export]
macro_rules! on_both_databases {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $scenario() {
                super::$scenario($crate::db::AnyDb::sqlite(stringify!($scenario)).await).await;
            })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $scenario() {
                super::$scenario($crate::db::AnyDb::postgres(stringify!($scenario)).await).await;
            })*
        }
    };
}
