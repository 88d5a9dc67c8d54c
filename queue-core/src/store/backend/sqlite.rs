//! SQLite: one writer at a time, which is what keeps two relays from claiming one row.
//! A relay claims under `BEGIN IMMEDIATE`, so it waits for a commit in progress; the
//! producer's commit wakes this process's relay through the connection's commit hook.

use std::sync::Arc;

use futures::future::BoxFuture;
use sqlx::{Pool, Sqlite, Transaction};
use tokio::sync::Notify;

use super::sealed::Store;
use super::{glue, ClaimedRow, ListedRow, NewRow, StageRow};

mod sql {
    pub(super) const MIGRATION: &str = include_str!("../../../migrations/sqlite/queue_tables.sql");
    pub(super) const INSERT: &str =
        "INSERT INTO queue_outbox (queue, job_id, job_name, data, options, created_at_ms) \
        VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (queue, job_id) DO NOTHING RETURNING id";
    pub(super) const CLAIM: &str =
        "UPDATE queue_outbox SET lease_owner = ?1, lease_until_ms = ?2, attempts = attempts + 1 \
        WHERE id IN (SELECT id FROM queue_outbox WHERE failed_at_ms IS NULL \
            AND (lease_until_ms IS NULL OR lease_until_ms < ?3) ORDER BY id LIMIT ?4) \
        RETURNING id, queue, job_id, job_name, data, options, created_at_ms";
    pub(super) const DELETE: &str =
        "DELETE FROM queue_outbox WHERE id IN (SELECT value FROM json_each(?1))";
    pub(super) const RELEASE: &str =
        "UPDATE queue_outbox SET lease_owner = NULL, lease_until_ms = NULL \
        WHERE lease_owner = ?1 AND id IN (SELECT value FROM json_each(?2))";
    pub(super) const SET_ASIDE: &str =
        "UPDATE queue_outbox SET failed_at_ms = ?3, last_error = ?2, \
        lease_owner = NULL, lease_until_ms = NULL WHERE id = ?1";
    pub(super) const REQUEUE: &str =
        "UPDATE queue_outbox SET failed_at_ms = NULL, last_error = NULL, \
        lease_owner = NULL, lease_until_ms = NULL WHERE id = ?1 AND failed_at_ms IS NOT NULL";
    macro_rules! listed {
        ($tail:literal) => {
            concat!(
                "SELECT id, queue, job_id, job_name, data, options, created_at_ms, attempts, last_error, failed_at_ms \
                 FROM queue_outbox",
                $tail
            )
        };
    }
    pub(super) const FIND: &str = listed!(" WHERE queue = ?1 AND job_id = ?2");
    pub(super) const LIST_PENDING: &str =
        listed!(" WHERE failed_at_ms IS NULL ORDER BY id LIMIT ?1");
    pub(super) const LIST_FAILED: &str =
        listed!(" WHERE failed_at_ms IS NOT NULL ORDER BY id LIMIT ?1");
    pub(super) const COUNTS: &str =
        "SELECT COALESCE(SUM(CASE WHEN failed_at_ms IS NULL THEN 1 ELSE 0 END), 0), \
        COALESCE(SUM(CASE WHEN failed_at_ms IS NULL THEN 0 ELSE 1 END), 0) FROM queue_outbox";
    pub(super) const OPERATION_CLAIM: &str =
        "INSERT INTO queue_operations (operation_key, done_at_ms) VALUES (?1, ?2) \
        ON CONFLICT (operation_key) DO NOTHING RETURNING operation_key";
    pub(super) const OPERATION_STORE: &str =
        "UPDATE queue_operations SET result = ?2 WHERE operation_key = ?1";
    pub(super) const OPERATION_READ: &str =
        "SELECT result FROM queue_operations WHERE operation_key = ?1";
    pub(super) const STAGE_CLAIM: &str =
        "INSERT INTO queue_stages (record_key, stage, position, done_at_ms) \
        VALUES (?1, ?2, ?3, ?4) ON CONFLICT (record_key, stage) DO NOTHING RETURNING stage";
    pub(super) const STAGE_STORE: &str =
        "UPDATE queue_stages SET result = ?3 WHERE record_key = ?1 AND stage = ?2";
    pub(super) const STAGE_LIST: &str =
        "SELECT stage, position, result, done_at_ms FROM queue_stages \
        WHERE record_key = ?1 ORDER BY position";
}

/// SQLite has no arrays: a list of ids is bound as a JSON array for `json_each`.
fn id_list(ids: &[i64]) -> String {
    serde_json::to_string(ids).unwrap_or_else(|_| "[]".to_owned())
}

impl Store for Sqlite {
    glue!();

    // Concurrent starts are serialised by SQLite's single writer.
    fn migrate(pool: &Pool<Self>) -> BoxFuture<'_, sqlx::Result<()>> {
        Box::pin(async move {
            sqlx::raw_sql(sql::MIGRATION).execute(pool).await?;
            Ok(())
        })
    }

    fn begin_write(pool: &Pool<Self>) -> BoxFuture<'_, sqlx::Result<Transaction<'static, Self>>> {
        Box::pin(pool.begin_with("BEGIN IMMEDIATE"))
    }

    // `NewRow` is crate-private; the trait is sealed, so no one outside sees it.
    #[allow(private_interfaces)]
    fn outbox_insert<'c>(
        conn: &'c mut Self::Connection,
        row: &'c NewRow<'c>,
        wake: &'c Arc<Notify>,
    ) -> BoxFuture<'c, sqlx::Result<bool>> {
        Box::pin(async move {
            let inserted: Option<i64> = sqlx::query_scalar(sql::INSERT)
                .bind(row.queue)
                .bind(row.job_id)
                .bind(row.job_name)
                .bind(&row.data)
                .bind(&row.options)
                .bind(row.created_at_ms)
                .fetch_optional(&mut *conn)
                .await?;
            if inserted.is_some() {
                // Wake this process's relay when the caller's transaction commits. The
                // hook fires once: later commits on this pooled connection cost nothing.
                // It runs while the commit still holds the write lock, which the relay's
                // `BEGIN IMMEDIATE` waits for, so the relay then sees the row.
                let wake = wake.clone();
                let mut armed = true;
                conn.lock_handle().await?.set_commit_hook(move || {
                    if std::mem::take(&mut armed) {
                        wake.notify_one();
                    }
                    true
                });
            }
            Ok(inserted.is_some())
        })
    }

    fn outbox_listen(_pool: Pool<Self>, _wake: Arc<Notify>) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}
