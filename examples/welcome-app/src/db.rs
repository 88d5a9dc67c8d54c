//! The database: SQLite by default, PostgreSQL when `DATABASE_URL` says so. Each query
//! is written once per dialect; the results are the same types.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

/// What an insert guarded by a unique constraint did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    /// A new row.
    New(i64),
    /// The unique constraint said the row exists: nothing was written.
    AlreadyThere,
}

/// A user as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct User {
    /// The id.
    pub id: i64,
    /// The email address.
    pub email: String,
    /// The name.
    pub name: String,
    /// `YYYY-MM-DD`.
    pub birthday: String,
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

/// A pool of either kind.
#[derive(Debug, Clone)]
pub enum Db {
    /// SQLite (the default): WAL mode and a busy timeout, so that several processes
    /// writing at once wait for each other instead of failing.
    Sqlite(SqlitePool),
    /// PostgreSQL.
    Postgres(PgPool),
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

/// Runs one statement on whichever pool. The SQL is written once, with PostgreSQL's
/// `$N` placeholders; SQLite gets them as `?N`, its numbered form.
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

const USER_COLUMNS: &str = "id, email, name, birthday";

impl Db {
    /// Connects and runs the migrations.
    pub async fn connect(url: &str) -> Result<Self, DbError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = PgPoolOptions::new()
                .max_connections(10)
                .connect(url)
                .await?;
            sqlx::migrate!("./migrations/postgres").run(&pool).await?;
            Ok(Db::Postgres(pool))
        } else {
            let options = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(Duration::from_secs(10));
            let pool = SqlitePoolOptions::new()
                .max_connections(5)
                .connect_with(options)
                .await?;
            sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
            Ok(Db::Sqlite(pool))
        }
    }

    /// Creates a user; `AlreadyThere` when the email is taken.
    pub async fn insert_user(
        &self,
        email: &str,
        name: &str,
        birthday: &str,
    ) -> Result<Inserted, DbError> {
        let sql = "INSERT INTO users (email, name, birthday) VALUES ($1, $2, $3) RETURNING id";
        guarded(on_pool!(self, [query_scalar], sql, email, name, birthday; fetch_one))
    }

    /// A user by id.
    pub async fn user(&self, id: i64) -> Result<Option<User>, DbError> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1");
        on_pool!(self, [query_as::<_, User>], &sql, id; fetch_optional)
    }

    /// Users born on the month and day of `date` (`YYYY-MM-DD`).
    pub async fn users_born_on(&self, date: &str) -> Result<Vec<User>, DbError> {
        let month_day = date.get(5..10).unwrap_or_default();
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM users WHERE substr(birthday, 6, 5) = $1 ORDER BY id"
        );
        on_pool!(self, [query_as::<_, User>], &sql, month_day; fetch_all)
    }

    /// Records a sent message; `AlreadyThere` when this idempotency key was sent before.
    pub async fn insert_outbox(
        &self,
        key: &str,
        to: &str,
        subject: &str,
        body: &str,
    ) -> Result<Inserted, DbError> {
        let sql = "INSERT INTO outbox (idempotency_key, to_email, subject, body) VALUES ($1, $2, $3, $4) RETURNING id";
        guarded(on_pool!(self, [query_scalar], sql, key, to, subject, body; fetch_one))
    }

    /// How many messages went out under this idempotency key (0 or 1).
    pub async fn outbox_count(&self, key: &str) -> Result<i64, DbError> {
        on_pool!(self, [query_scalar], "SELECT COUNT(*) FROM outbox WHERE idempotency_key = $1", key; fetch_one)
    }

    /// Grants a coupon; `AlreadyThere` when this user has this campaign's grant for `date`.
    pub async fn insert_grant(
        &self,
        user_id: i64,
        campaign_id: &str,
        date: &str,
    ) -> Result<Inserted, DbError> {
        let sql = "INSERT INTO coupon_grants (user_id, campaign_id, date) VALUES ($1, $2, $3) RETURNING id";
        guarded(on_pool!(self, [query_scalar], sql, user_id, campaign_id, date; fetch_one))
    }

    /// A user's grants, oldest first.
    pub async fn grants(&self, user_id: i64) -> Result<Vec<Grant>, DbError> {
        let sql =
            "SELECT campaign_id, date FROM coupon_grants WHERE user_id = $1 ORDER BY date, id";
        on_pool!(self, [query_as::<_, Grant>], sql, user_id; fetch_all)
    }
}
