//! PostgreSQL: relays claim with `FOR NO KEY UPDATE SKIP LOCKED`, so any number of
//! them share the rows without waiting on each other, and a row written by `add_in`
//! sends a `NOTIFY` that is delivered when (and only if) the caller's transaction
//! commits, to this process's relay and every other one.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use sqlx::postgres::PgListener;
use sqlx::{Pool, Postgres, Transaction};
use tokio::sync::Notify;

use super::glue::glue;
use super::sealed::Store;
use super::{statements, ClaimedRow, ClaimedTuple, ListedRow, NewRow, StageRow};

/// The channel `add_in` notifies on commit.
pub(crate) const CHANNEL: &str = "queue_outbox";

mod sql {
    /// Now, in milliseconds since the epoch, by the database's clock: the time of the
    /// statement (`clock_timestamp`), not of the transaction's start (`now()`), which
    /// in a caller's long transaction could be long past.
    macro_rules! now {
        () => {
            "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
        };
    }
    pub(super) const MIGRATION: &str =
        include_str!("../../../migrations/postgres/queue_tables.sql");
    // The notification is part of the caller's transaction: PostgreSQL delivers it on
    // commit and drops it on rollback. It is sent only when a row was written. A
    // set-aside row with the job id is replaced (the `WHERE` of the upsert); a pending
    // one is left alone, and no id comes back: a duplicate.
    pub(super) const INSERT: &str = concat!(
        "WITH ins AS (\
            INSERT INTO queue_outbox (queue, job_id, job_name, data, options, created_at_ms) \
            VALUES ($1, $2, $3, $4, $5, ",
        now!(),
        ") ON CONFLICT (queue, job_id) DO UPDATE SET job_name = excluded.job_name, \
            data = excluded.data, options = excluded.options, \
            created_at_ms = excluded.created_at_ms, attempts = 0, lease_owner = NULL, \
            lease_until_ms = NULL, last_error = NULL, failed_at_ms = NULL, row_key = NULL \
            WHERE queue_outbox.failed_at_ms IS NOT NULL RETURNING id) \
        SELECT ins.id FROM ins CROSS JOIN LATERAL (SELECT pg_notify('queue_outbox', '')) AS notified"
    );
    // NO KEY UPDATE, not UPDATE: the claim changes no key, and the weaker lock does not
    // conflict with readers holding KEY SHARE (foreign keys, and the crash test). The
    // row key is random: md5 of a random number, the time and the row's id.
    pub(super) const CLAIM: &str = concat!(
        "UPDATE queue_outbox SET lease_owner = $1, lease_until_ms = ",
        now!(),
        " + $2, attempts = attempts + 1, \
         row_key = COALESCE(row_key, md5(random()::text || clock_timestamp()::text || id::text)) \
         WHERE id IN (SELECT id FROM queue_outbox WHERE failed_at_ms IS NULL \
            AND (lease_until_ms IS NULL OR lease_until_ms <= ",
        now!(),
        ") ORDER BY id LIMIT $3 FOR NO KEY UPDATE SKIP LOCKED) \
         RETURNING id, queue, job_id, job_name, data, options, ",
        now!(),
        " - created_at_ms AS waited_ms, attempts, row_key"
    );
    pub(super) const DELETE: &str = "DELETE FROM queue_outbox WHERE id = ANY($1)";
    pub(super) const RELEASE: &str =
        "UPDATE queue_outbox SET lease_owner = NULL, lease_until_ms = NULL \
        WHERE lease_owner = $1 AND id = ANY($2)";
    pub(super) const SET_ASIDE: &str = concat!(
        "UPDATE queue_outbox SET failed_at_ms = ",
        now!(),
        ", last_error = $2, lease_owner = NULL, lease_until_ms = NULL WHERE id = $1"
    );
    pub(super) const RETRY_LATER: &str = concat!(
        "UPDATE queue_outbox SET lease_owner = NULL, last_error = $3, lease_until_ms = ",
        now!(),
        " + $4 WHERE id = $1 AND lease_owner = $2"
    );
    pub(super) const REQUEUE: &str =
        "UPDATE queue_outbox SET failed_at_ms = NULL, last_error = NULL, \
        lease_owner = NULL, lease_until_ms = NULL WHERE id = $1 AND failed_at_ms IS NOT NULL";
    macro_rules! listed {
        ($tail:literal) => {
            concat!(
                "SELECT id, queue, job_id, job_name, data, options, created_at_ms, attempts, last_error, failed_at_ms \
                 FROM queue_outbox",
                $tail
            )
        };
    }
    pub(super) const FIND: &str = listed!(" WHERE queue = $1 AND job_id = $2");
    pub(super) const LIST_PENDING: &str =
        listed!(" WHERE failed_at_ms IS NULL ORDER BY id LIMIT $1");
    pub(super) const LIST_FAILED: &str =
        listed!(" WHERE failed_at_ms IS NOT NULL ORDER BY id LIMIT $1");
    pub(super) const COUNTS: &str = concat!(
        "SELECT COUNT(*) FILTER (WHERE failed_at_ms IS NULL), \
        COUNT(*) FILTER (WHERE failed_at_ms IS NOT NULL), ",
        now!(),
        " - MIN(created_at_ms) FILTER (WHERE failed_at_ms IS NULL) FROM queue_outbox"
    );
    pub(super) const OPERATION_CLAIM: &str = concat!(
        "INSERT INTO queue_operations (operation_key, done_at_ms) VALUES ($1, ",
        now!(),
        ") ON CONFLICT (operation_key) DO NOTHING RETURNING operation_key"
    );
    pub(super) const OPERATION_STORE: &str =
        "UPDATE queue_operations SET result = $2 WHERE operation_key = $1";
    pub(super) const OPERATION_READ: &str =
        "SELECT result FROM queue_operations WHERE operation_key = $1";
    pub(super) const STAGE_CLAIM: &str = concat!(
        "INSERT INTO queue_stages (record_key, stage, position, done_at_ms) VALUES ($1, $2, $3, ",
        now!(),
        ") ON CONFLICT (record_key, stage) DO NOTHING RETURNING stage"
    );
    pub(super) const STAGE_STORE: &str =
        "UPDATE queue_stages SET result = $3 WHERE record_key = $1 AND stage = $2";
    pub(super) const STAGE_LIST: &str =
        "SELECT stage, position, result, done_at_ms FROM queue_stages \
        WHERE record_key = $1 ORDER BY position";
}

fn id_list(ids: &[i64]) -> Vec<i64> {
    ids.to_vec()
}

/// How long the listener waits before connecting again after losing its connection.
const RELISTEN_AFTER: Duration = Duration::from_secs(1);

/// The advisory lock that serialises the migration of processes starting together:
/// `CREATE TABLE IF NOT EXISTS` run by two at once can still fail on PostgreSQL.
const MIGRATION_LOCK: i64 = 0x7175_6575_655f_7462; // "queue_tb"

/// Whether every table, index and column the migration makes is there already. Read
/// first, because the migration's `IF NOT EXISTS` statements lock their table before
/// they look: run at every start, they waited for any open transaction that had
/// written an outbox row, and every `add_in` then queued behind them.
const UP_TO_DATE: &str = "SELECT to_regclass('queue_outbox') IS NOT NULL \
    AND to_regclass('queue_outbox_ready') IS NOT NULL \
    AND to_regclass('queue_operations') IS NOT NULL \
    AND to_regclass('queue_stages') IS NOT NULL \
    AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('queue_outbox') \
        AND attname = 'row_key' AND NOT attisdropped)";

impl Store for Postgres {
    glue!();

    fn migrate(pool: &Pool<Self>) -> BoxFuture<'_, sqlx::Result<()>> {
        Box::pin(async move {
            let mut tx = pool.begin().await?;
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(MIGRATION_LOCK)
                .execute(&mut *tx)
                .await?;
            let up_to_date: bool = sqlx::query_scalar(UP_TO_DATE).fetch_one(&mut *tx).await?;
            if !up_to_date {
                for statement in statements(sql::MIGRATION) {
                    sqlx::query(&statement).execute(&mut *tx).await?;
                }
            }
            tx.commit().await
        })
    }

    fn begin_write(pool: &Pool<Self>) -> BoxFuture<'_, sqlx::Result<Transaction<'static, Self>>> {
        Box::pin(pool.begin())
    }

    // `NewRow` is crate-private; the trait is sealed, so no one outside sees it.
    #[allow(private_interfaces)]
    fn outbox_insert<'c>(
        conn: &'c mut Self::Connection,
        row: &'c NewRow<'c>,
        _wake: &'c Arc<Notify>,
    ) -> BoxFuture<'c, sqlx::Result<bool>> {
        Box::pin(async move {
            let inserted: Option<i64> = sqlx::query_scalar(sql::INSERT)
                .bind(row.queue)
                .bind(row.job_id)
                .bind(row.job_name)
                .bind(&row.data)
                .bind(&row.options)
                .fetch_optional(conn)
                .await?;
            Ok(inserted.is_some())
        })
    }

    fn outbox_listen(pool: Pool<Self>, wake: Arc<Notify>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut failing = false;
            loop {
                let listened = async {
                    let mut listener = PgListener::connect_with(&pool).await?;
                    listener.listen(CHANNEL).await?;
                    // Rows committed while no one listened are found by this first look.
                    wake.notify_one();
                    loop {
                        // `try_recv` reports a lost connection as `None`, where `recv`
                        // would reconnect quietly and drop what was sent meanwhile.
                        match listener.try_recv().await? {
                            Some(_) => wake.notify_one(),
                            None => return Ok::<(), sqlx::Error>(()),
                        }
                    }
                };
                match listened.await {
                    Ok(()) => {
                        tracing::debug!("outbox listener lost its connection; listening again")
                    }
                    Err(e) if !failing => {
                        tracing::warn!(error = %e, "outbox listener cannot LISTEN; polling until it can");
                    }
                    Err(_) => {}
                }
                failing = true;
                tokio::time::sleep(RELISTEN_AFTER).await;
            }
        })
    }
}
