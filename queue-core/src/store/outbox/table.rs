//! The outbox's table operations, with the database type erased so that the app can
//! hold any backend's outbox.

use std::sync::Arc;

use futures::future::BoxFuture;
use sqlx::Pool;
use tokio::sync::Notify;

use crate::store::backend::{Backend, ClaimedRow, ListedRow};

/// The outbox's table operations, with the database type erased so that the app can
/// hold any backend's outbox.
pub(crate) trait OutboxStore: Send + Sync {
    fn migrate(&self) -> BoxFuture<'_, sqlx::Result<()>>;
    /// Leases up to `limit` rows to `owner` in a transaction of its own.
    fn claim<'a>(
        &'a self,
        owner: &'a str,
        lease_ms: i64,
        limit: i64,
    ) -> BoxFuture<'a, sqlx::Result<Vec<ClaimedRow>>>;
    fn delete<'a>(&'a self, ids: &'a [i64]) -> BoxFuture<'a, sqlx::Result<()>>;
    fn release<'a>(&'a self, ids: &'a [i64], owner: &'a str) -> BoxFuture<'a, sqlx::Result<()>>;
    fn set_aside<'a>(&'a self, id: i64, error: &'a str) -> BoxFuture<'a, sqlx::Result<()>>;
    /// Gives back `owner`'s lease on a row it cannot add; any relay may take it again
    /// `after_ms` from now.
    fn retry_later<'a>(
        &'a self,
        id: i64,
        owner: &'a str,
        error: &'a str,
        after_ms: i64,
    ) -> BoxFuture<'a, sqlx::Result<()>>;
    fn requeue(&self, id: i64) -> BoxFuture<'_, sqlx::Result<bool>>;
    fn find<'a>(
        &'a self,
        queue: &'a str,
        job_id: &'a str,
    ) -> BoxFuture<'a, sqlx::Result<Option<ListedRow>>>;
    fn list(&self, failed: bool, limit: i64) -> BoxFuture<'_, sqlx::Result<Vec<ListedRow>>>;
    fn counts(&self) -> BoxFuture<'_, sqlx::Result<(i64, i64, Option<i64>)>>;
    /// Wakes `wake` on rows other processes commit, for as long as it runs.
    fn listen(&self, wake: Arc<Notify>) -> BoxFuture<'static, ()>;
}

impl<DB: Backend> OutboxStore for Pool<DB> {
    fn migrate(&self) -> BoxFuture<'_, sqlx::Result<()>> {
        DB::migrate(self)
    }

    fn claim<'a>(
        &'a self,
        owner: &'a str,
        lease_ms: i64,
        limit: i64,
    ) -> BoxFuture<'a, sqlx::Result<Vec<ClaimedRow>>> {
        Box::pin(async move {
            let mut tx = DB::begin_write(self).await?;
            let rows = DB::outbox_claim(&mut *tx, owner, lease_ms, limit).await?;
            tx.commit().await?;
            Ok(rows)
        })
    }

    fn delete<'a>(&'a self, ids: &'a [i64]) -> BoxFuture<'a, sqlx::Result<()>> {
        DB::outbox_delete(self, ids)
    }

    fn release<'a>(&'a self, ids: &'a [i64], owner: &'a str) -> BoxFuture<'a, sqlx::Result<()>> {
        DB::outbox_release(self, ids, owner)
    }

    fn set_aside<'a>(&'a self, id: i64, error: &'a str) -> BoxFuture<'a, sqlx::Result<()>> {
        DB::outbox_set_aside(self, id, error)
    }

    fn retry_later<'a>(
        &'a self,
        id: i64,
        owner: &'a str,
        error: &'a str,
        after_ms: i64,
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        DB::outbox_retry_later(self, id, owner, error, after_ms)
    }

    fn requeue(&self, id: i64) -> BoxFuture<'_, sqlx::Result<bool>> {
        DB::outbox_requeue(self, id)
    }

    fn find<'a>(
        &'a self,
        queue: &'a str,
        job_id: &'a str,
    ) -> BoxFuture<'a, sqlx::Result<Option<ListedRow>>> {
        DB::outbox_find(self, queue, job_id)
    }

    fn list(&self, failed: bool, limit: i64) -> BoxFuture<'_, sqlx::Result<Vec<ListedRow>>> {
        DB::outbox_list(self, failed, limit)
    }

    fn counts(&self) -> BoxFuture<'_, sqlx::Result<(i64, i64, Option<i64>)>> {
        DB::outbox_counts(self)
    }

    fn listen(&self, wake: Arc<Notify>) -> BoxFuture<'static, ()> {
        DB::outbox_listen(self.clone(), wake)
    }
}
