//! The two databases the store runs on, behind one sealed trait: each statement is
//! written once per dialect (`sqlite.rs`, `postgres.rs`); the Rust around them is
//! shared (the `glue!` macro) so that both backends behave alike by construction.

mod postgres;
mod sqlite;

use std::sync::Arc;

use futures::future::BoxFuture;
use sqlx::{Pool, Transaction};
use tokio::sync::Notify;

/// A database the store runs on: [`sqlx::Sqlite`] or [`sqlx::Postgres`]. Sealed.
pub trait Backend: sqlx::Database + sealed::Store {}

impl Backend for sqlx::Sqlite {}
impl Backend for sqlx::Postgres {}

/// A connection `Queue::add_in` writes through: a `SqliteConnection` or a
/// `PgConnection` (what `&mut *tx` gives for a transaction). It names its database, so
/// `add_in(&mut *tx, ..)` needs no type annotation. Sealed.
pub trait OutboxConnection: Send + sealed::Connection {
    /// The database.
    type Backend: Backend;
    /// The connection, as its database's connection type.
    #[doc(hidden)]
    fn as_backend(&mut self) -> &mut <Self::Backend as sqlx::Database>::Connection;
}

impl OutboxConnection for sqlx::SqliteConnection {
    type Backend = sqlx::Sqlite;
    fn as_backend(&mut self) -> &mut Self {
        self
    }
}

impl OutboxConnection for sqlx::PgConnection {
    type Backend = sqlx::Postgres;
    fn as_backend(&mut self) -> &mut Self {
        self
    }
}

/// An outbox row as written by `add_in`.
#[derive(Debug)]
pub(crate) struct NewRow<'a> {
    pub(crate) queue: &'a str,
    pub(crate) job_id: &'a str,
    pub(crate) job_name: &'a str,
    pub(crate) data: String,
    pub(crate) options: String,
    pub(crate) created_at_ms: i64,
}

/// An outbox row a relay claimed: `(id, queue, job_id, job_name, data, options,
/// created_at_ms)`.
pub(crate) type ClaimedRow = (i64, String, String, String, String, String, i64);

/// An outbox row as listed: `(id, queue, job_id, job_name, data, options,
/// created_at_ms, attempts, last_error, failed_at_ms)`.
pub(crate) type ListedRow = (
    i64,
    String,
    String,
    String,
    String,
    String,
    i64,
    i32,
    Option<String>,
    Option<i64>,
);

/// A stage row: `(stage, position, result, done_at_ms)`.
pub(crate) type StageRow = (String, i32, Option<String>, i64);

pub(crate) mod sealed {
    //! The statements themselves. The trait is public only so that [`Backend`]
    //! (public, sealed) can name it; nothing outside the crate can reach it.
    #![allow(unreachable_pub)]

    use super::*;

    /// Seals [`OutboxConnection`](super::OutboxConnection).
    pub trait Connection {}
    impl Connection for sqlx::SqliteConnection {}
    impl Connection for sqlx::PgConnection {}

    /// Every statement the store runs, for one database.
    pub trait Store: sqlx::Database {
        /// Creates the tables if they are missing.
        fn migrate(pool: &Pool<Self>) -> BoxFuture<'_, sqlx::Result<()>>;
        /// A transaction that holds the write lock from its first statement (SQLite's
        /// `BEGIN IMMEDIATE`), so that it waits for a commit in progress instead of
        /// reading past it.
        fn begin_write(
            pool: &Pool<Self>,
        ) -> BoxFuture<'_, sqlx::Result<Transaction<'static, Self>>>;
        /// Writes an outbox row inside the caller's transaction; `false` when the
        /// queue already has a pending row with this job id. Arranges for `wake` to be
        /// told when the transaction commits.
        #[allow(private_interfaces)]
        fn outbox_insert<'c>(
            conn: &'c mut Self::Connection,
            row: &'c NewRow<'c>,
            wake: &'c Arc<Notify>,
        ) -> BoxFuture<'c, sqlx::Result<bool>>;
        /// Tells `wake` about rows other processes commit, for as long as the future
        /// runs (PostgreSQL `LISTEN`); SQLite has no such channel and returns at once.
        fn outbox_listen(pool: Pool<Self>, wake: Arc<Notify>) -> BoxFuture<'static, ()>;
        /// Leases up to `limit` ready rows to `owner` until `until_ms`.
        fn outbox_claim<'c>(
            conn: &'c mut Self::Connection,
            owner: &'c str,
            now_ms: i64,
            until_ms: i64,
            limit: i64,
        ) -> BoxFuture<'c, sqlx::Result<Vec<ClaimedRow>>>;
        /// Deletes rows whose jobs Redis acknowledged.
        fn outbox_delete<'a>(
            pool: &'a Pool<Self>,
            ids: &'a [i64],
        ) -> BoxFuture<'a, sqlx::Result<()>>;
        /// Gives back `owner`'s leases on rows it could not add.
        fn outbox_release<'a>(
            pool: &'a Pool<Self>,
            ids: &'a [i64],
            owner: &'a str,
        ) -> BoxFuture<'a, sqlx::Result<()>>;
        /// Sets a row aside with the reason it can never be added.
        fn outbox_set_aside<'a>(
            pool: &'a Pool<Self>,
            id: i64,
            error: &'a str,
            now_ms: i64,
        ) -> BoxFuture<'a, sqlx::Result<()>>;
        /// Puts a set-aside row back in line; `false` when there is no such row.
        fn outbox_requeue(pool: &Pool<Self>, id: i64) -> BoxFuture<'_, sqlx::Result<bool>>;
        /// The row of `queue`'s job `job_id`, if it is still in the outbox.
        fn outbox_find<'a>(
            pool: &'a Pool<Self>,
            queue: &'a str,
            job_id: &'a str,
        ) -> BoxFuture<'a, sqlx::Result<Option<ListedRow>>>;
        /// Pending (`failed == false`) or set-aside rows, oldest first.
        fn outbox_list(
            pool: &Pool<Self>,
            failed: bool,
            limit: i64,
        ) -> BoxFuture<'_, sqlx::Result<Vec<ListedRow>>>;
        /// How many rows are pending and how many are set aside.
        fn outbox_counts(pool: &Pool<Self>) -> BoxFuture<'_, sqlx::Result<(i64, i64)>>;
        /// Inserts the operation key; `false` when it exists (done, or being done).
        fn operation_claim<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
            now_ms: i64,
        ) -> BoxFuture<'c, sqlx::Result<bool>>;
        /// Stores the result of a claimed operation.
        fn operation_store<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
            result: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<()>>;
        /// The stored result: `None` when the key is unknown.
        fn operation_read<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<Option<Option<String>>>>;
        /// Inserts a finished stage; `false` when it was recorded already.
        fn stage_claim<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
            stage: &'c str,
            position: i32,
            now_ms: i64,
        ) -> BoxFuture<'c, sqlx::Result<bool>>;
        /// Stores a claimed stage's result.
        fn stage_store<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
            stage: &'c str,
            result: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<()>>;
        /// The finished stages of `key`, in stage order.
        fn stage_list<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<Vec<StageRow>>>;
    }
}

/// The statements that are the same Rust for both databases, given that database's
/// SQL module (`sql::CLAIM`, ...) and how it binds a list of ids.
macro_rules! glue {
    () => {
        fn outbox_claim<'c>(
            conn: &'c mut Self::Connection,
            owner: &'c str,
            now_ms: i64,
            until_ms: i64,
            limit: i64,
        ) -> BoxFuture<'c, sqlx::Result<Vec<ClaimedRow>>> {
            Box::pin(async move {
                let mut rows: Vec<ClaimedRow> = sqlx::query_as(sql::CLAIM)
                    .bind(owner)
                    .bind(until_ms)
                    .bind(now_ms)
                    .bind(limit)
                    .fetch_all(conn)
                    .await?;
                rows.sort_unstable_by_key(|row| row.0);
                Ok(rows)
            })
        }

        fn outbox_delete<'a>(
            pool: &'a Pool<Self>,
            ids: &'a [i64],
        ) -> BoxFuture<'a, sqlx::Result<()>> {
            Box::pin(async move {
                sqlx::query(sql::DELETE)
                    .bind(id_list(ids))
                    .execute(pool)
                    .await?;
                Ok(())
            })
        }

        fn outbox_release<'a>(
            pool: &'a Pool<Self>,
            ids: &'a [i64],
            owner: &'a str,
        ) -> BoxFuture<'a, sqlx::Result<()>> {
            Box::pin(async move {
                sqlx::query(sql::RELEASE)
                    .bind(owner)
                    .bind(id_list(ids))
                    .execute(pool)
                    .await?;
                Ok(())
            })
        }

        fn outbox_set_aside<'a>(
            pool: &'a Pool<Self>,
            id: i64,
            error: &'a str,
            now_ms: i64,
        ) -> BoxFuture<'a, sqlx::Result<()>> {
            Box::pin(async move {
                sqlx::query(sql::SET_ASIDE)
                    .bind(id)
                    .bind(error)
                    .bind(now_ms)
                    .execute(pool)
                    .await?;
                Ok(())
            })
        }

        fn outbox_requeue(pool: &Pool<Self>, id: i64) -> BoxFuture<'_, sqlx::Result<bool>> {
            Box::pin(async move {
                let done = sqlx::query(sql::REQUEUE).bind(id).execute(pool).await?;
                Ok(done.rows_affected() == 1)
            })
        }

        fn outbox_find<'a>(
            pool: &'a Pool<Self>,
            queue: &'a str,
            job_id: &'a str,
        ) -> BoxFuture<'a, sqlx::Result<Option<ListedRow>>> {
            Box::pin(async move {
                sqlx::query_as(sql::FIND)
                    .bind(queue)
                    .bind(job_id)
                    .fetch_optional(pool)
                    .await
            })
        }

        fn outbox_list(
            pool: &Pool<Self>,
            failed: bool,
            limit: i64,
        ) -> BoxFuture<'_, sqlx::Result<Vec<ListedRow>>> {
            Box::pin(async move {
                let query = if failed {
                    sql::LIST_FAILED
                } else {
                    sql::LIST_PENDING
                };
                sqlx::query_as(query).bind(limit).fetch_all(pool).await
            })
        }

        fn outbox_counts(pool: &Pool<Self>) -> BoxFuture<'_, sqlx::Result<(i64, i64)>> {
            Box::pin(async move { sqlx::query_as(sql::COUNTS).fetch_one(pool).await })
        }

        fn operation_claim<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
            now_ms: i64,
        ) -> BoxFuture<'c, sqlx::Result<bool>> {
            Box::pin(async move {
                let claimed: Option<String> = sqlx::query_scalar(sql::OPERATION_CLAIM)
                    .bind(key)
                    .bind(now_ms)
                    .fetch_optional(conn)
                    .await?;
                Ok(claimed.is_some())
            })
        }

        fn operation_store<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
            result: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<()>> {
            Box::pin(async move {
                sqlx::query(sql::OPERATION_STORE)
                    .bind(key)
                    .bind(result)
                    .execute(conn)
                    .await?;
                Ok(())
            })
        }

        fn operation_read<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<Option<Option<String>>>> {
            Box::pin(async move {
                sqlx::query_scalar(sql::OPERATION_READ)
                    .bind(key)
                    .fetch_optional(conn)
                    .await
            })
        }

        fn stage_claim<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
            stage: &'c str,
            position: i32,
            now_ms: i64,
        ) -> BoxFuture<'c, sqlx::Result<bool>> {
            Box::pin(async move {
                let claimed: Option<String> = sqlx::query_scalar(sql::STAGE_CLAIM)
                    .bind(key)
                    .bind(stage)
                    .bind(position)
                    .bind(now_ms)
                    .fetch_optional(conn)
                    .await?;
                Ok(claimed.is_some())
            })
        }

        fn stage_store<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
            stage: &'c str,
            result: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<()>> {
            Box::pin(async move {
                sqlx::query(sql::STAGE_STORE)
                    .bind(key)
                    .bind(stage)
                    .bind(result)
                    .execute(conn)
                    .await?;
                Ok(())
            })
        }

        fn stage_list<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<Vec<StageRow>>> {
            Box::pin(async move {
                sqlx::query_as(sql::STAGE_LIST)
                    .bind(key)
                    .fetch_all(conn)
                    .await
            })
        }
    };
}
use glue;
