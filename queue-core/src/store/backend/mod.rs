//! The two databases the store runs on, behind one sealed trait: each statement is
//! written once per dialect (`sqlite.rs`, `postgres.rs`); the Rust around them is
//! shared (the `glue!` macro, `glue.rs`) so that both backends behave alike by
//! construction.
//!
//! Time is the database's: every statement that stamps or compares a time reads the
//! database's clock (`sql::NOW`), never the host's. Hosts' clocks drift apart; a lease
//! written by a host whose clock runs ahead would hold a row for as long as it is ahead,
//! and a row written by a host whose clock runs behind would count its delay as spent.

mod glue;
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

/// The statements of a migration file: comment lines dropped, split at `;` (the files
/// have no `;` inside a statement).
pub(crate) fn statements(file: &str) -> Vec<String> {
    let code: String = file
        .lines()
        .map(|line| line.split("--").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    code.split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// An outbox row as written by `add_in` (the database stamps its time).
#[derive(Debug)]
pub(crate) struct NewRow<'a> {
    pub(crate) queue: &'a str,
    pub(crate) job_id: &'a str,
    pub(crate) job_name: &'a str,
    pub(crate) data: String,
    pub(crate) options: String,
}

/// An outbox row a relay claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimedRow {
    pub(crate) id: i64,
    pub(crate) queue: String,
    pub(crate) job_id: String,
    pub(crate) job_name: String,
    pub(crate) data: String,
    pub(crate) options: String,
    /// How long the row has waited since `add_in` wrote it, in the database's time.
    pub(crate) waited_ms: i64,
    /// How many times a relay has taken it, this claim included.
    pub(crate) attempts: i32,
    /// The row's own random key, fixed at its first claim: what the relay marks it
    /// relayed under in Redis (see `relay/`).
    pub(crate) row_key: String,
}

/// A [`ClaimedRow`] as the claim returns it, in its field order.
pub(crate) type ClaimedTuple = (
    i64,
    String,
    String,
    String,
    String,
    String,
    i64,
    i32,
    String,
);

impl From<ClaimedTuple> for ClaimedRow {
    fn from(row: ClaimedTuple) -> Self {
        let (id, queue, job_id, job_name, data, options, waited_ms, attempts, row_key) = row;
        ClaimedRow {
            id,
            queue,
            job_id,
            job_name,
            data,
            options,
            waited_ms,
            attempts,
            row_key,
        }
    }
}

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
        /// Creates the tables if they are missing and brings older ones up to date,
        /// under a lock: any number of processes may run it at once.
        fn migrate(pool: &Pool<Self>) -> BoxFuture<'_, sqlx::Result<()>>;
        /// A transaction that holds the write lock from its first statement (SQLite's
        /// `BEGIN IMMEDIATE`), so that it waits for a commit in progress instead of
        /// reading past it.
        fn begin_write(
            pool: &Pool<Self>,
        ) -> BoxFuture<'_, sqlx::Result<Transaction<'static, Self>>>;
        /// Writes an outbox row inside the caller's transaction; `false` when the
        /// queue already has a pending row with this job id. A set-aside row with this
        /// job id is replaced: it could never be added, and the new row is what the
        /// caller means now. Arranges for `wake` to be told when the transaction
        /// commits.
        #[allow(private_interfaces)]
        fn outbox_insert<'c>(
            conn: &'c mut Self::Connection,
            row: &'c NewRow<'c>,
            wake: &'c Arc<Notify>,
        ) -> BoxFuture<'c, sqlx::Result<bool>>;
        /// Tells `wake` about rows other processes commit, for as long as the future
        /// runs (PostgreSQL `LISTEN`); SQLite has no such channel and returns at once.
        fn outbox_listen(pool: Pool<Self>, wake: Arc<Notify>) -> BoxFuture<'static, ()>;
        /// Leases up to `limit` ready rows to `owner` for `lease_ms`, giving each row
        /// its key if it has none yet.
        #[allow(private_interfaces)]
        fn outbox_claim<'c>(
            conn: &'c mut Self::Connection,
            owner: &'c str,
            lease_ms: i64,
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
        ) -> BoxFuture<'a, sqlx::Result<()>>;
        /// Gives back `owner`'s lease on a row it cannot add, with the reason, to be
        /// taken again (by any relay) no sooner than `after_ms` from now.
        fn outbox_retry_later<'a>(
            pool: &'a Pool<Self>,
            id: i64,
            owner: &'a str,
            error: &'a str,
            after_ms: i64,
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
        /// How many rows are pending and how many are set aside, and how old the oldest
        /// pending row is (ms, by the database's clock).
        fn outbox_counts(pool: &Pool<Self>)
            -> BoxFuture<'_, sqlx::Result<(i64, i64, Option<i64>)>>;
        /// Inserts the operation key; `false` when it exists (done, or being done).
        fn operation_claim<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
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
