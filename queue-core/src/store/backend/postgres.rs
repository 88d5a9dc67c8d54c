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

use super::sealed::Store;
use super::{glue, ClaimedRow, ListedRow, NewRow, StageRow};

/// The channel `add_in` notifies on commit.
pub(crate) const CHANNEL: &str = "queue_outbox";

mod sql {
    pub(super) const MIGRATION: &str =
        include_str!("../../../migrations/postgres/queue_tables.sql");
    // The notification is part of the caller's transaction: PostgreSQL delivers it on
    // commit and drops it on rollback. It is sent only when a row was inserted.
    pub(super) const INSERT: &str = "WITH ins AS (\
            INSERT INTO queue_outbox (queue, job_id, job_name, data, options, created_at_ms) \
            VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (queue, job_id) DO NOTHING RETURNING id) \
        SELECT ins.id FROM ins CROSS JOIN LATERAL (SELECT pg_notify('queue_outbox', '')) AS notified";
    // NO KEY UPDATE, not UPDATE: the claim changes no key, and the weaker lock does not
    // conflict with readers holding KEY SHARE (foreign keys, and the crash test).
    pub(super) const CLAIM: &str =
        "UPDATE queue_outbox SET lease_owner = $1, lease_until_ms = $2, attempts = attempts + 1 \
        WHERE id IN (SELECT id FROM queue_outbox WHERE failed_at_ms IS NULL \
            AND (lease_until_ms IS NULL OR lease_until_ms < $3) ORDER BY id LIMIT $4 \
            FOR NO KEY UPDATE SKIP LOCKED) \
        RETURNING id, queue, job_id, job_name, data, options, created_at_ms";
    pub(super) const DELETE: &str = "DELETE FROM queue_outbox WHERE id = ANY($1)";
    pub(super) const RELEASE: &str =
        "UPDATE queue_outbox SET lease_owner = NULL, lease_until_ms = NULL \
        WHERE lease_owner = $1 AND id = ANY($2)";
    pub(super) const SET_ASIDE: &str =
        "UPDATE queue_outbox SET failed_at_ms = $3, last_error = $2, \
        lease_owner = NULL, lease_until_ms = NULL WHERE id = $1";
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
    pub(super) const COUNTS: &str = "SELECT COUNT(*) FILTER (WHERE failed_at_ms IS NULL), \
        COUNT(*) FILTER (WHERE failed_at_ms IS NOT NULL) FROM queue_outbox";
    pub(super) const OPERATION_CLAIM: &str =
        "INSERT INTO queue_operations (operation_key, done_at_ms) VALUES ($1, $2) \
        ON CONFLICT (operation_key) DO NOTHING RETURNING operation_key";
    pub(super) const OPERATION_STORE: &str =
        "UPDATE queue_operations SET result = $2 WHERE operation_key = $1";
    pub(super) const OPERATION_READ: &str =
        "SELECT result FROM queue_operations WHERE operation_key = $1";
    pub(super) const STAGE_CLAIM: &str =
        "INSERT INTO queue_stages (record_key, stage, position, done_at_ms) \
        VALUES ($1, $2, $3, $4) ON CONFLICT (record_key, stage) DO NOTHING RETURNING stage";
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

/// The statements of a migration file: comment lines dropped, split at `;` (the files
/// have no `;` inside a statement).
fn statements(file: &str) -> Vec<String> {
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

impl Store for Postgres {
    glue!();

    fn migrate(pool: &Pool<Self>) -> BoxFuture<'_, sqlx::Result<()>> {
        Box::pin(async move {
            let mut tx = pool.begin().await?;
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(MIGRATION_LOCK)
                .execute(&mut *tx)
                .await?;
            for statement in statements(sql::MIGRATION) {
                sqlx::query(&statement).execute(&mut *tx).await?;
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
                .bind(row.created_at_ms)
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
