//! SQLite: one writer at a time, which is what keeps two relays from claiming one row.
//! A relay claims under `BEGIN IMMEDIATE`, so it waits for a commit in progress; the
//! producer's commit wakes this process's relay through the connection's commit hook.

use std::sync::Arc;

use futures::future::BoxFuture;
use sqlx::{Pool, Sqlite, Transaction};
use tokio::sync::Notify;

use super::glue::glue;
use super::sealed::Store;
use super::{statements, ClaimedRow, ClaimedTuple, ListedRow, NewRow, StageRow};

mod sql {
    /// Now, in milliseconds since the epoch, by the database's clock (SQLite's `'now'`
    /// has millisecond resolution; Julian day 2440587.5 is the Unix epoch).
    macro_rules! now {
        () => {
            "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
        };
    }
    pub(super) const MIGRATION: &str = include_str!("../../../migrations/sqlite/queue_tables.sql");
    /// Whether every table, index and column the migration makes is there already.
    pub(super) const UP_TO_DATE: &str = "SELECT (SELECT COUNT(*) FROM sqlite_master \
        WHERE name IN ('queue_outbox', 'queue_outbox_ready', 'queue_operations', 'queue_stages')) = 4 \
        AND EXISTS (SELECT 1 FROM pragma_table_info('queue_outbox') WHERE name = 'row_key')";
    pub(super) const HAS_ROW_KEY: &str =
        "SELECT COUNT(*) FROM pragma_table_info('queue_outbox') WHERE name = 'row_key'";
    pub(super) const ADD_ROW_KEY: &str = "ALTER TABLE queue_outbox ADD COLUMN row_key TEXT";
    // A set-aside row with the job id is replaced (the `WHERE` of the upsert); a pending
    // one is left alone, and no id comes back: a duplicate.
    pub(super) const INSERT: &str = concat!(
        "INSERT INTO queue_outbox (queue, job_id, job_name, data, options, created_at_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ",
        now!(),
        ") ON CONFLICT (queue, job_id) DO UPDATE SET job_name = excluded.job_name, \
         data = excluded.data, options = excluded.options, \
         created_at_ms = excluded.created_at_ms, attempts = 0, lease_owner = NULL, \
         lease_until_ms = NULL, last_error = NULL, failed_at_ms = NULL, row_key = NULL \
         WHERE queue_outbox.failed_at_ms IS NOT NULL RETURNING id"
    );
    pub(super) const CLAIM: &str = concat!(
        "UPDATE queue_outbox SET lease_owner = ?1, lease_until_ms = ",
        now!(),
        " + ?2, attempts = attempts + 1, \
         row_key = COALESCE(row_key, lower(hex(randomblob(16)))) \
         WHERE id IN (SELECT id FROM queue_outbox WHERE failed_at_ms IS NULL \
            AND (lease_until_ms IS NULL OR lease_until_ms <= ",
        now!(),
        ") ORDER BY id LIMIT ?3) \
         RETURNING id, queue, job_id, job_name, data, options, ",
        now!(),
        " - created_at_ms AS waited_ms, attempts, row_key"
    );
    pub(super) const DELETE: &str =
        "DELETE FROM queue_outbox WHERE id IN (SELECT value FROM json_each(?1))";
    pub(super) const RELEASE: &str =
        "UPDATE queue_outbox SET lease_owner = NULL, lease_until_ms = NULL \
        WHERE lease_owner = ?1 AND id IN (SELECT value FROM json_each(?2))";
    pub(super) const SET_ASIDE: &str = concat!(
        "UPDATE queue_outbox SET failed_at_ms = ",
        now!(),
        ", last_error = ?2, lease_owner = NULL, lease_until_ms = NULL WHERE id = ?1"
    );
    pub(super) const RETRY_LATER: &str = concat!(
        "UPDATE queue_outbox SET lease_owner = NULL, last_error = ?3, lease_until_ms = ",
        now!(),
        " + ?4 WHERE id = ?1 AND lease_owner = ?2"
    );
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
    pub(super) const COUNTS: &str = concat!(
        "SELECT COALESCE(SUM(CASE WHEN failed_at_ms IS NULL THEN 1 ELSE 0 END), 0), \
        COALESCE(SUM(CASE WHEN failed_at_ms IS NULL THEN 0 ELSE 1 END), 0), ",
        now!(),
        " - MIN(CASE WHEN failed_at_ms IS NULL THEN created_at_ms END) FROM queue_outbox"
    );
    pub(super) const OPERATION_CLAIM: &str = concat!(
        "INSERT INTO queue_operations (operation_key, done_at_ms) VALUES (?1, ",
        now!(),
        ") ON CONFLICT (operation_key) DO NOTHING RETURNING operation_key"
    );
    pub(super) const OPERATION_STORE: &str =
        "UPDATE queue_operations SET result = ?2 WHERE operation_key = ?1";
    pub(super) const OPERATION_READ: &str =
        "SELECT result FROM queue_operations WHERE operation_key = ?1";
    pub(super) const STAGE_CLAIM: &str = concat!(
        "INSERT INTO queue_stages (record_key, stage, position, done_at_ms) VALUES (?1, ?2, ?3, ",
        now!(),
        ") ON CONFLICT (record_key, stage) DO NOTHING RETURNING stage"
    );
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

    // Up to date (every start but the first after an upgrade): nothing to write, and
    // no write lock to wait for behind an application's open transaction. Otherwise one
    // `BEGIN IMMEDIATE` transaction around the check and the change: processes starting
    // together wait for the first one's write lock (their busy timeout) and then find
    // the tables as it left them. Without it, two of them could both find `row_key`
    // missing and the second die on "duplicate column name". SQLite's DDL is
    // transactional: a failed migration leaves nothing behind.
    fn migrate(pool: &Pool<Self>) -> BoxFuture<'_, sqlx::Result<()>> {
        Box::pin(async move {
            let up_to_date: bool = sqlx::query_scalar(sql::UP_TO_DATE).fetch_one(pool).await?;
            if up_to_date {
                return Ok(());
            }
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
            for statement in statements(sql::MIGRATION) {
                sqlx::query(&statement).execute(&mut *tx).await?;
            }
            let has_row_key: i64 = sqlx::query_scalar(sql::HAS_ROW_KEY)
                .fetch_one(&mut *tx)
                .await?;
            if has_row_key == 0 {
                sqlx::query(sql::ADD_ROW_KEY).execute(&mut *tx).await?;
            }
            tx.commit().await
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
