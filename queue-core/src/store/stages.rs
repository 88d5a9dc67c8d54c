//! Stage records: multi-step work whose progress lives in the database, so that a step
//! run again (a retry, a worker killed halfway) skips what is done.

use std::future::Future;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use sqlx::Pool;

use super::backend::{Backend, StageRow};
use super::operations::{effect_in, Effect, OnceOutcome, OperationError};
use crate::error::Error;

/// A stage that is done, as stored.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DoneStage {
    /// The stage's name.
    pub stage: String,
    /// Its result, as JSON.
    pub result: serde_json::Value,
    /// When it was recorded (ms since the epoch).
    pub done_at_ms: u64,
}

/// A persisted stage machine: an ordered list of stages (`generated → uploaded →
/// notified`) and, per record key (one report, one export), which of them are done with
/// their results. Each step checks the stored stages first, skips what is done
/// (returning the stored result), refuses to run before the stages it follows, and
/// stores its own result. Nothing is kept in worker memory.
///
/// [`step_in`](Self::step_in) runs a database effect in the transaction that records
/// the stage: done once. [`step`](Self::step) runs any other effect (an upload, a
/// mail) and records it afterwards: a worker that dies between the effect and the
/// record runs the effect again, so make it idempotent (a deterministic object name, an
/// idempotency key upstream).
///
/// ```no_run
/// # async fn demo(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// use queue_core::store::Stages;
///
/// let report = Stages::new(pool, ["generated", "uploaded", "notified"]);
/// let key = "report-2026-11";
/// let pdf: String = report.step(key, "generated", || async { Ok::<_, std::io::Error>("/tmp/r.pdf".to_owned()) })
///     .await?
///     .into_result();
/// let url: String = report.step(key, "uploaded", || async move { Ok::<_, std::io::Error>(format!("s3://reports/{pdf}")) })
///     .await?
///     .into_result();
/// assert_eq!(report.current(key).await?.as_deref(), Some("uploaded"));
/// # let _ = url; Ok(()) }
/// ```
#[derive(Debug)]
pub struct Stages<DB: Backend> {
    pool: Pool<DB>,
    stages: Arc<[String]>,
}

// By hand: a derive would ask for `DB: Clone`, which the database types are not.
impl<DB: Backend> Clone for Stages<DB> {
    fn clone(&self) -> Self {
        Stages {
            pool: self.pool.clone(),
            stages: self.stages.clone(),
        }
    }
}

impl<DB: Backend> Stages<DB> {
    /// A stage machine with these stages, in order, in `pool`'s database (table
    /// `queue_stages`).
    pub fn new<I, S>(pool: Pool<DB>, stages: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Stages {
            pool,
            stages: stages.into_iter().map(Into::into).collect(),
        }
    }

    /// Creates the tables if they are missing (the same SQL as the outbox's).
    pub async fn migrate(&self) -> Result<(), Error> {
        DB::migrate(&self.pool).await.map_err(super::database)
    }

    /// The stages of `key` that are done, in order.
    pub async fn done(&self, key: &str) -> Result<Vec<DoneStage>, Error> {
        let mut conn = self.pool.acquire().await.map_err(super::database)?;
        let rows = DB::stage_list(&mut conn, key)
            .await
            .map_err(super::database)?;
        Ok(rows.into_iter().map(done_stage).collect())
    }

    /// The last stage of `key` that is done, if any.
    pub async fn current(&self, key: &str) -> Result<Option<String>, Error> {
        Ok(self.done(key).await?.pop().map(|s| s.stage))
    }

    /// Runs `stage` of `key` unless it is done, then records its result. The effect
    /// runs outside any transaction; see the type's docs for what that means.
    pub async fn step<R, E, F, Fut>(
        &self,
        key: &str,
        stage: &str,
        effect: F,
    ) -> Result<OnceOutcome<R>, OperationError<E>>
    where
        R: Serialize + DeserializeOwned + Send,
        E: Send,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<R, E>> + Send,
    {
        let position = self.position(stage)?;
        let mut conn = self.pool.acquire().await?;
        let done = DB::stage_list(&mut conn, key).await?;
        drop(conn);
        if let Some(stored) = self.check_order(stage, position, &done)? {
            return Ok(OnceOutcome::AlreadyDone(stored));
        }
        let result = effect().await.map_err(OperationError::Effect)?;
        let json = serde_json::to_string(&result)?;
        let mut tx = DB::begin_write(&self.pool).await?;
        if DB::stage_claim(&mut tx, key, stage, position).await? {
            DB::stage_store(&mut tx, key, stage, &json).await?;
            tx.commit().await?;
            return Ok(OnceOutcome::Ran(result));
        }
        // Another run recorded the stage meanwhile: its result is the one on record.
        Ok(
            match self.recorded_by_racer(tx, key, stage, position).await? {
                Some(stored) => OnceOutcome::AlreadyDone(stored),
                None => OnceOutcome::Ran(result),
            },
        )
    }

    /// Runs `stage` of `key` unless it is done, with the effect's writes and the
    /// stage's record in one transaction: done exactly once.
    pub async fn step_in<R, E, F>(
        &self,
        key: &str,
        stage: &str,
        effect: F,
    ) -> Result<OnceOutcome<R>, OperationError<E>>
    where
        R: Serialize + DeserializeOwned + Send,
        E: Send,
        F: for<'c> FnOnce(&'c mut DB::Connection) -> Effect<'c, R, E> + Send,
    {
        let position = self.position(stage)?;
        let mut tx = DB::begin_write(&self.pool).await?;
        let done = DB::stage_list(&mut tx, key).await?;
        if let Some(stored) = self.check_order(stage, position, &done)? {
            tx.rollback().await?;
            return Ok(OnceOutcome::AlreadyDone(stored));
        }
        if !DB::stage_claim(&mut tx, key, stage, position).await? {
            // A racer holding the stage committed while we waited for its lock.
            let stored = self.recorded_by_racer(tx, key, stage, position).await?;
            return Ok(OnceOutcome::AlreadyDone(stored.ok_or_else(|| {
                OperationError::Database(sqlx::Error::RowNotFound)
            })?));
        }
        let (mut tx, result, json) = effect_in(tx, effect).await?;
        DB::stage_store(&mut tx, key, stage, &json).await?;
        tx.commit().await?;
        Ok(OnceOutcome::Ran(result))
    }

    /// The result a racer recorded for `stage` (its claim beat ours), read in `tx`,
    /// which is then given up.
    async fn recorded_by_racer<R: DeserializeOwned, E>(
        &self,
        mut tx: sqlx::Transaction<'static, DB>,
        key: &str,
        stage: &str,
        position: i32,
    ) -> Result<Option<R>, OperationError<E>> {
        let done = DB::stage_list(&mut tx, key).await?;
        tx.rollback().await?;
        self.check_order(stage, position, &done)
    }

    fn position<E>(&self, stage: &str) -> Result<i32, OperationError<E>> {
        self.stages
            .iter()
            .position(|s| s == stage)
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| OperationError::UnknownStage {
                stage: stage.to_owned(),
                known: self.stages.join(" → "),
            })
    }

    /// The stored result when `stage` is done; `None` when it may run now; an error
    /// when a stage before it is not done.
    fn check_order<R: DeserializeOwned, E>(
        &self,
        stage: &str,
        position: i32,
        done: &[StageRow],
    ) -> Result<Option<R>, OperationError<E>> {
        if let Some((_, _, result, _)) = done.iter().find(|row| row.0 == stage) {
            let json = result.as_deref().unwrap_or("null");
            return Ok(Some(serde_json::from_str(json)?));
        }
        let before = usize::try_from(position).unwrap_or(0);
        if let Some(missing) = self.stages[..before]
            .iter()
            .find(|s| !done.iter().any(|row| &row.0 == *s))
        {
            return Err(OperationError::OutOfOrder {
                stage: stage.to_owned(),
                missing: missing.clone(),
            });
        }
        Ok(None)
    }
}

fn done_stage(row: StageRow) -> DoneStage {
    let (stage, _, result, done_at_ms) = row;
    DoneStage {
        stage,
        result: result
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or(serde_json::Value::Null),
        done_at_ms: u64::try_from(done_at_ms).unwrap_or(0),
    }
}
