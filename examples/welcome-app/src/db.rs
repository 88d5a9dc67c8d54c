//! The database: SQLite by default, PostgreSQL when `DATABASE_URL` says so. Each query
//! is written once, with PostgreSQL's `$N` placeholders (SQLite gets `?N`); the results
//! are the same types.

use std::str::FromStr;
use std::time::Duration;

use chrono::{Datelike, NaiveDate};
use queue_core::{
    contract::JobOf, store::DoneStage, store::OnceOutcome, store::OperationError,
    store::Operations, store::Stages, AddedJob, JobOptions, Queue, QueueType,
};
use serde::Serialize;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use sqlx::{Connection, Postgres, Sqlite, Transaction};

/// What an insert guarded by a unique constraint did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    /// A new row.
    New(i64),
    /// The unique constraint said the row exists: nothing was written.
    AlreadyThere,
}

/// A user as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct User {
    /// The internal id (never shown: it counts users).
    pub id: i64,
    /// The public id: random, unique for ever.
    pub public_id: String,
    /// The email address, normalised.
    pub email: String,
    /// The name.
    pub name: String,
    /// `YYYY-MM-DD`.
    pub birthday: String,
    /// SHA-256 (hex) of the access token the user was given at sign-up.
    pub token_hash: Option<String>,
}

/// A user about to be stored.
#[derive(Debug, Clone)]
pub struct NewUser<'a> {
    /// The public id.
    pub public_id: &'a str,
    /// The email address, normalised.
    pub email: &'a str,
    /// The name.
    pub name: &'a str,
    /// `YYYY-MM-DD`.
    pub birthday: &'a str,
    /// SHA-256 (hex) of the access token.
    pub token_hash: &'a str,
}

/// A coupon grant as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// The campaign (`birthday`).
    pub campaign_id: String,
    /// The day it was granted for, `YYYY-MM-DD`.
    pub date: String,
}

/// The monthly report's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct MonthTotals {
    /// Users whose birthday falls in the month.
    pub birthdays: i64,
    /// Coupons granted for days of the month.
    pub coupons: i64,
}

/// A pool of either kind.
#[derive(Debug, Clone)]
pub enum Db {
    /// SQLite (the default): WAL mode and a busy timeout, so that several processes
    /// writing at once wait for each other instead of failing.
    Sqlite(SqlitePool),
    /// PostgreSQL.
    Postgres(PgPool),
}

/// An open transaction of either kind: the application's writes and the jobs it adds
/// through the outbox commit together.
#[derive(Debug)]
pub enum Tx {
    /// SQLite.
    Sqlite(Transaction<'static, Sqlite>),
    /// PostgreSQL.
    Postgres(Transaction<'static, Postgres>),
}

/// Database errors (connecting, migrating, querying).
pub type DbError = sqlx::Error;

fn unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

fn guarded(result: Result<i64, sqlx::Error>) -> Result<Inserted, sqlx::Error> {
    match result {
        Ok(id) => Ok(Inserted::New(id)),
        Err(e) if unique_violation(&e) => Ok(Inserted::AlreadyThere),
        Err(e) => Err(e),
    }
}

/// Runs one statement on whichever pool (or transaction). The SQL is written once,
/// with PostgreSQL's `$N` placeholders; SQLite gets them as `?N`, its numbered form.
macro_rules! on_pool {
    ($db:expr, [$($query:tt)+], $sql:expr $(, $bind:expr)* ; $fetch:ident) => {
        match $db {
            Db::Sqlite(pool) => {
                let sql = $sql.replace('$', "?");
                sqlx::$($query)+(&sql) $(.bind($bind))* .$fetch(pool).await
            }
            Db::Postgres(pool) => sqlx::$($query)+($sql) $(.bind($bind))* .$fetch(pool).await,
        }
    };
}

macro_rules! on_tx {
    ($tx:expr, [$($query:tt)+], $sql:expr $(, $bind:expr)* ; $fetch:ident) => {
        match $tx {
            Tx::Sqlite(tx) => {
                let sql = $sql.replace('$', "?");
                sqlx::$($query)+(&sql) $(.bind($bind))* .$fetch(&mut **tx).await
            }
            Tx::Postgres(tx) => sqlx::$($query)+($sql) $(.bind($bind))* .$fetch(&mut **tx).await,
        }
    };
}

const USER_COLUMNS: &str = "id, public_id, email, name, birthday, token_hash";

/// The month-days whose birthdays fall on `date`: 29 February birthdays are kept on
/// 28 February in years without a 29th.
fn birthday_month_days(date: NaiveDate) -> [String; 2] {
    let month_day = date.format("%m-%d").to_string();
    let leap = NaiveDate::from_ymd_opt(date.year(), 2, 29).is_some();
    if (date.month(), date.day()) == (2, 28) && !leap {
        [month_day, "02-29".to_owned()]
    } else {
        [month_day.clone(), month_day]
    }
}

/// queue-core's own tables (outbox, operation and stage records), beside ours.
async fn migrate_queue_tables<DB: queue_core::store::Backend>(
    ops: Operations<DB>,
) -> Result<(), DbError> {
    ops.migrate().await.map_err(|e| match e {
        queue_core::Error::Database(source) => {
            sqlx::Error::Migrate(Box::new(sqlx::migrate::MigrateError::Source(source)))
        }
        other => sqlx::Error::Protocol(other.to_string()),
    })
}

/// How long a process starting together with others retries a database that is busy.
const SQLITE_START_WAIT: Duration = Duration::from_secs(10);

fn is_busy(e: &sqlx::Error) -> bool {
    let code = e.as_database_error().and_then(|db| db.code());
    // SQLITE_BUSY, or one of its extended codes (the low byte is the primary code).
    code.and_then(|c| c.parse::<i32>().ok())
        .is_some_and(|c| c & 0xff == 5)
}

/// Opens the SQLite pool. The first connection to a new database switches it to WAL,
/// which needs the file to itself; a second process switching at the same moment is
/// answered "database is locked" at once, without the busy timeout's wait (seen in one
/// start of three, four processes at once). Such a start is tried again: once a process
/// has switched, switching again is a no-op.
async fn open_sqlite(options: SqliteConnectOptions) -> Result<SqlitePool, DbError> {
    let started = std::time::Instant::now();
    loop {
        let opened = SqlitePoolOptions::new()
            .max_connections(5)
            .connect_with(options.clone())
            .await;
        match opened {
            Err(e) if is_busy(&e) && started.elapsed() < SQLITE_START_WAIT => {
                tracing::debug!(error = %e, "the new database is busy; opening it again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

/// Our SQLite migrations, safe for processes starting together on a new database.
/// sqlx takes a lock around its migrations on PostgreSQL (an advisory lock) but none on
/// SQLite, where two processes both found migration 1 unapplied, and the second died on
/// `table users already exists` (or migration 2 on `duplicate column name`). Here the
/// whole run, check and apply, is one `BEGIN IMMEDIATE` transaction: the first process
/// holds the write lock, the others wait for it (the busy timeout) and then find every
/// migration applied. sqlx applies each migration in a savepoint of that transaction, and
/// SQLite's DDL is transactional, so a failed migration leaves nothing behind.
async fn migrate_sqlite(pool: &SqlitePool) -> Result<(), DbError> {
    let mut conn = pool.acquire().await?;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    // `run_direct`, not `run(&mut *tx)`: `run`'s `Acquire` bound makes the future fail
    // the `Send` check of `tokio::spawn` (a higher-ranked lifetime).
    sqlx::migrate!("./migrations/sqlite")
        .run_direct(&mut *tx)
        .await?;
    tx.commit().await
}

impl Db {
    /// Connects and runs the migrations (ours, then queue-core's).
    pub async fn connect(url: &str) -> Result<Self, DbError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = PgPoolOptions::new()
                .max_connections(10)
                .connect(url)
                .await?;
            sqlx::migrate!("./migrations/postgres").run(&pool).await?;
            migrate_queue_tables(Operations::new(pool.clone())).await?;
            Ok(Db::Postgres(pool))
        } else {
            let options = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(Duration::from_secs(10));
            let pool = open_sqlite(options).await?;
            migrate_sqlite(&pool).await?;
            migrate_queue_tables(Operations::new(pool.clone())).await?;
            Ok(Db::Sqlite(pool))
        }
    }

    /// The job outbox in this database.
    pub fn outbox(&self) -> queue_core::store::Outbox {
        match self {
            Db::Sqlite(pool) => queue_core::store::Outbox::new(pool.clone()),
            Db::Postgres(pool) => queue_core::store::Outbox::new(pool.clone()),
        }
    }

    /// Starts a transaction.
    pub async fn begin(&self) -> Result<Tx, DbError> {
        Ok(match self {
            Db::Sqlite(pool) => Tx::Sqlite(pool.begin().await?),
            Db::Postgres(pool) => Tx::Postgres(pool.begin().await?),
        })
    }

    /// A user by public id.
    pub async fn user(&self, public_id: &str) -> Result<Option<User>, DbError> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE public_id = $1");
        on_pool!(self, [query_as::<_, User>], &sql, public_id; fetch_optional)
    }

    /// Every user.
    pub async fn users(&self) -> Result<Vec<User>, DbError> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users ORDER BY id");
        on_pool!(self, [query_as::<_, User>], &sql; fetch_all)
    }

    /// Users whose birthday is on `date` (29 February ones on 28 February in years
    /// without a 29th).
    pub async fn users_born_on(&self, date: NaiveDate) -> Result<Vec<User>, DbError> {
        let [first, second] = birthday_month_days(date);
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM users WHERE substr(birthday, 6, 5) IN ($1, $2) ORDER BY id"
        );
        on_pool!(self, [query_as::<_, User>], &sql, &first, &second; fetch_all)
    }

    /// The last day the daily scan of `campaign` covered, if it ever ran.
    pub async fn scanned_through(&self, campaign: &str) -> Result<Option<NaiveDate>, DbError> {
        let sql = "SELECT day FROM scanned_through WHERE campaign = $1";
        let day: Option<String> = on_pool!(self, [query_scalar], sql, campaign; fetch_optional)?;
        Ok(day.and_then(|day| NaiveDate::parse_from_str(&day, "%Y-%m-%d").ok()))
    }

    /// Records that the daily scan of `campaign` covered every day through `day`; an
    /// earlier day than the one recorded (a slow scan finishing after a newer one)
    /// changes nothing.
    pub async fn scan_through(&self, campaign: &str, day: NaiveDate) -> Result<(), DbError> {
        let sql = "INSERT INTO scanned_through (campaign, day) VALUES ($1, $2) \
                   ON CONFLICT (campaign) DO UPDATE SET day = excluded.day \
                   WHERE excluded.day > scanned_through.day";
        let day = day.format("%Y-%m-%d").to_string();
        match self {
            Db::Sqlite(pool) => {
                let sql = sql.replace('$', "?");
                sqlx::query(&sql)
                    .bind(campaign)
                    .bind(&day)
                    .execute(pool)
                    .await?;
            }
            Db::Postgres(pool) => {
                sqlx::query(sql)
                    .bind(campaign)
                    .bind(&day)
                    .execute(pool)
                    .await?;
            }
        }
        Ok(())
    }

    /// Records a sent message; `AlreadyThere` when this idempotency key was sent before.
    pub async fn insert_sent(
        &self,
        key: &str,
        to: &str,
        subject: &str,
        body: &str,
    ) -> Result<Inserted, DbError> {
        let sql = "INSERT INTO sent_mail (idempotency_key, to_email, subject, body) VALUES ($1, $2, $3, $4) RETURNING id";
        guarded(on_pool!(self, [query_scalar], sql, key, to, subject, body; fetch_one))
    }

    /// How many messages went out under this idempotency key (0 or 1).
    pub async fn sent_count(&self, key: &str) -> Result<i64, DbError> {
        on_pool!(self, [query_scalar], "SELECT COUNT(*) FROM sent_mail WHERE idempotency_key = $1", key; fetch_one)
    }

    /// Grants a coupon once per user, campaign and day, through an operation record
    /// keyed on the three: a repeat returns the first grant's id and grants nothing.
    /// (The table's unique constraint stays as the last line.)
    pub async fn grant_once(
        &self,
        user_id: i64,
        campaign_id: &str,
        date: &str,
    ) -> Result<OnceOutcome<Option<i64>>, OperationError<DbError>> {
        let key = format!("grant-{user_id}-{campaign_id}-{date}");
        // ON CONFLICT: a grant recorded without its key (by an older version of the
        // service) means nothing new, and the key is recorded now.
        let sql = "INSERT INTO coupon_grants (user_id, campaign_id, date) VALUES ($1, $2, $3) \
                   ON CONFLICT (user_id, campaign_id, date) DO NOTHING RETURNING id";
        macro_rules! grant {
            ($pool:expr, $sql:expr) => {{
                let (campaign_id, date, sql) = (campaign_id.to_owned(), date.to_owned(), $sql);
                Operations::new($pool.clone())
                    .run_once(&key, move |tx| {
                        Box::pin(async move {
                            sqlx::query_scalar::<_, i64>(&sql)
                                .bind(user_id)
                                .bind(campaign_id)
                                .bind(date)
                                .fetch_optional(&mut *tx)
                                .await
                        })
                    })
                    .await
            }};
        }
        match self {
            Db::Sqlite(pool) => grant!(pool, sql.replace('$', "?")),
            Db::Postgres(pool) => grant!(pool, sql.to_owned()),
        }
    }

    /// Runs `stage` of the stage machine `stages` for `key` unless it is done (stage
    /// records in the database: a re-run skips what is done and gets its result).
    pub async fn step<R, E, F, Fut>(
        &self,
        stages: &[&str],
        key: &str,
        stage: &str,
        effect: F,
    ) -> Result<OnceOutcome<R>, OperationError<E>>
    where
        R: Serialize + serde::de::DeserializeOwned + Send,
        E: Send,
        F: FnOnce() -> Fut + Send,
        Fut: std::future::Future<Output = Result<R, E>> + Send,
    {
        let stages = stages.iter().copied();
        match self {
            Db::Sqlite(pool) => {
                Stages::new(pool.clone(), stages)
                    .step(key, stage, effect)
                    .await
            }
            Db::Postgres(pool) => {
                Stages::new(pool.clone(), stages)
                    .step(key, stage, effect)
                    .await
            }
        }
    }

    /// The monthly report's figures for `month` (`YYYY-MM`).
    pub async fn month_totals(&self, month: &str) -> Result<MonthTotals, DbError> {
        let month_part = month.get(5..7).unwrap_or_default();
        let birthdays: i64 = on_pool!(self, [query_scalar], "SELECT COUNT(*) FROM users WHERE substr(birthday, 6, 2) = $1", month_part; fetch_one)?;
        let coupons: i64 = on_pool!(self, [query_scalar], "SELECT COUNT(*) FROM coupon_grants WHERE substr(date, 1, 7) = $1", month; fetch_one)?;
        Ok(MonthTotals { birthdays, coupons })
    }

    /// Stores the report file of `month` unless one is there: `AlreadyThere` keeps the
    /// first (an upload run again writes nothing).
    pub async fn store_report_file(&self, month: &str, content: &str) -> Result<Inserted, DbError> {
        let sql = "INSERT INTO report_files (month, content) VALUES ($1, $2) \
                   ON CONFLICT (month) DO NOTHING RETURNING CAST(1 AS BIGINT)";
        let row: Option<i64> = on_pool!(self, [query_scalar], sql, month, content; fetch_optional)?;
        Ok(row.map_or(Inserted::AlreadyThere, Inserted::New))
    }

    /// The report files of `month` (zero or one).
    pub async fn report_files(&self, month: &str) -> Result<Vec<String>, DbError> {
        on_pool!(self, [query_scalar], "SELECT content FROM report_files WHERE month = $1", month; fetch_all)
    }

    /// Users in id order, `limit` of them after skipping `offset`: one export batch.
    pub async fn users_page(&self, offset: i64, limit: i64) -> Result<Vec<User>, DbError> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users ORDER BY id LIMIT $1 OFFSET $2");
        on_pool!(self, [query_as::<_, User>], &sql, limit, offset; fetch_all)
    }

    /// Stores batch `batch` of an export unless it is stored already.
    pub async fn store_export_batch(
        &self,
        export_id: &str,
        batch: i64,
        content: &str,
    ) -> Result<Inserted, DbError> {
        let sql = "INSERT INTO export_batches (export_id, batch, content) VALUES ($1, $2, $3) \
                   ON CONFLICT (export_id, batch) DO NOTHING RETURNING batch";
        let row: Option<i64> =
            on_pool!(self, [query_scalar], sql, export_id, batch, content; fetch_optional)?;
        Ok(row.map_or(Inserted::AlreadyThere, Inserted::New))
    }

    /// The stored batches of an export, in order.
    pub async fn export_batches(&self, export_id: &str) -> Result<Vec<String>, DbError> {
        on_pool!(self, [query_scalar], "SELECT content FROM export_batches WHERE export_id = $1 ORDER BY batch", export_id; fetch_all)
    }

    /// Stores a delivered export unless it is stored already.
    pub async fn store_export_file(
        &self,
        export_id: &str,
        rows: i64,
        content: &str,
    ) -> Result<Inserted, DbError> {
        let sql =
            "INSERT INTO export_files (export_id, rows_written, content) VALUES ($1, $2, $3) \
                   ON CONFLICT (export_id) DO NOTHING RETURNING rows_written";
        let row: Option<i64> =
            on_pool!(self, [query_scalar], sql, export_id, rows, content; fetch_optional)?;
        Ok(row.map_or(Inserted::AlreadyThere, Inserted::New))
    }

    /// A delivered export's row count, if it was delivered.
    pub async fn export_file_rows(&self, export_id: &str) -> Result<Option<i64>, DbError> {
        on_pool!(self, [query_scalar], "SELECT rows_written FROM export_files WHERE export_id = $1", export_id; fetch_optional)
    }

    /// The stages of `key` that are done, in order (of the stage machine `stages`).
    pub async fn stages_done(
        &self,
        stages: &[&str],
        key: &str,
    ) -> Result<Vec<DoneStage>, queue_core::Error> {
        let stages = stages.iter().copied();
        match self {
            Db::Sqlite(pool) => Stages::new(pool.clone(), stages).done(key).await,
            Db::Postgres(pool) => Stages::new(pool.clone(), stages).done(key).await,
        }
    }

    /// A user's grants, oldest first.
    pub async fn grants(&self, user_id: i64) -> Result<Vec<Grant>, DbError> {
        let sql =
            "SELECT campaign_id, date FROM coupon_grants WHERE user_id = $1 ORDER BY date, id";
        on_pool!(self, [query_as::<_, Grant>], sql, user_id; fetch_all)
    }
}

impl Tx {
    /// Creates a user; `AlreadyThere` when the email is taken.
    pub async fn insert_user(&mut self, user: &NewUser<'_>) -> Result<Inserted, DbError> {
        let sql = "INSERT INTO users (public_id, email, name, birthday, token_hash) VALUES ($1, $2, $3, $4, $5) \
                   ON CONFLICT (email) DO NOTHING RETURNING id";
        let id: Option<i64> = on_tx!(self, [query_scalar], sql, user.public_id, user.email, user.name, user.birthday, user.token_hash; fetch_optional)?;
        Ok(id.map_or(Inserted::AlreadyThere, Inserted::New))
    }

    /// Writes a job into the outbox, inside this transaction.
    pub async fn add_job<Q: QueueType, J: JobOf<Q>>(
        &mut self,
        queue: &Queue<Q>,
        job: J,
        options: JobOptions,
    ) -> Result<AddedJob, queue_core::Error> {
        match self {
            Tx::Sqlite(tx) => queue.add_job_in(&mut **tx, job, options).await,
            Tx::Postgres(tx) => queue.add_job_in(&mut **tx, job, options).await,
        }
    }

    /// Commits.
    pub async fn commit(self) -> Result<(), DbError> {
        match self {
            Tx::Sqlite(tx) => tx.commit().await,
            Tx::Postgres(tx) => tx.commit().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leap_day_birthdays_are_kept_on_the_28th_in_common_years() {
        let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
        assert_eq!(birthday_month_days(day(2026, 2, 28)), ["02-28", "02-29"]);
        assert_eq!(birthday_month_days(day(2028, 2, 28)), ["02-28", "02-28"]);
        assert_eq!(birthday_month_days(day(2028, 2, 29)), ["02-29", "02-29"]);
        assert_eq!(birthday_month_days(day(2026, 3, 1)), ["03-01", "03-01"]);
    }
}
