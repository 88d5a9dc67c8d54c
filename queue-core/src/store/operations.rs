//! OnceOutcome records: an effect that must happen once per key, run in one database
//! transaction with the record of its key and result.

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sqlx::{Pool, Transaction};

use super::backend::Backend;
use crate::error::Error;

/// What a once-only call did: ran the effect now, or found it done before and returned
/// the stored result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnceOutcome<R> {
    /// The effect ran in this call; its result is stored.
    Ran(R),
    /// The effect was done before (by an earlier attempt, or by a racer that won);
    /// this is the result stored then. Nothing ran.
    AlreadyDone(R),
}

impl<R> OnceOutcome<R> {
    /// The result, whichever call produced it.
    pub fn into_result(self) -> R {
        match self {
            OnceOutcome::Ran(r) | OnceOutcome::AlreadyDone(r) => r,
        }
    }

    /// Whether the effect had been done before this call.
    pub fn was_done_before(&self) -> bool {
        matches!(self, OnceOutcome::AlreadyDone(_))
    }
}

/// Why a once-only call failed. Every variant leaves nothing recorded, so the call can
/// be retried: a later attempt runs the effect (at most once).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OperationError<E> {
    /// The effect returned an error; its transaction was rolled back.
    #[error("{0}")]
    Effect(E),
    /// The database failed (or a racer's transaction was still open; retry).
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// The result could not be stored or read back as JSON.
    #[error("the stored result does not fit: {0}")]
    Result(#[source] serde_json::Error),
    /// A stage was asked for that the stage machine does not have.
    #[error("unknown stage `{stage}`; the stages are: {known}")]
    UnknownStage {
        /// The stage asked for.
        stage: String,
        /// The machine's stages, in order.
        known: String,
    },
    /// A stage was asked for before the stages it follows were done.
    #[error("stage `{stage}` cannot run before `{missing}` is done")]
    OutOfOrder {
        /// The stage asked for.
        stage: String,
        /// The first earlier stage not done yet.
        missing: String,
    },
}

impl<E> From<sqlx::Error> for OperationError<E> {
    fn from(e: sqlx::Error) -> Self {
        OperationError::Database(e)
    }
}

impl<E> From<serde_json::Error> for OperationError<E> {
    fn from(e: serde_json::Error) -> Self {
        OperationError::Result(e)
    }
}

/// The effect an [`Operations::run_once`] call runs, given the open transaction. The
/// same shape as sqlx's own `Connection::transaction`.
pub type Effect<'c, R, E> = BoxFuture<'c, Result<R, E>>;

/// Runs `effect` in `tx` and serialises its result for the record. On the effect's
/// error the transaction is rolled back, so nothing of it (nor the claim) is recorded.
pub(super) async fn effect_in<DB, R, E, F>(
    mut tx: Transaction<'static, DB>,
    effect: F,
) -> Result<(Transaction<'static, DB>, R, String), OperationError<E>>
where
    DB: Backend,
    R: Serialize,
    F: for<'c> FnOnce(&'c mut DB::Connection) -> Effect<'c, R, E>,
{
    match effect(&mut tx).await {
        Ok(result) => {
            let json = serde_json::to_string(&result)?;
            Ok((tx, result, json))
        }
        Err(e) => {
            tx.rollback().await?;
            Err(OperationError::Effect(e))
        }
    }
}

/// OnceOutcome records (`operation_key UNIQUE`): each effect runs once per key, in the
/// same transaction that records the key and its result. A repeat with the key returns
/// the stored result without running the effect; two workers racing on one key give
/// one effect, and the loser gets the winner's result.
///
/// The effect's own writes must go through the transaction it is given: that is what
/// makes them commit with the record, or not at all.
///
/// ```no_run
/// # async fn demo(pool: sqlx::SqlitePool) -> Result<(), Box<dyn std::error::Error>> {
/// use queue_core::{store::OnceOutcome, store::Operations};
///
/// let ops = Operations::new(pool);
/// ops.migrate().await?;
/// let grant = ops
///     .run_once("grant-7-birthday-2026-03-14", |tx| {
///         Box::pin(async move {
///             let id: i64 = sqlx::query_scalar(
///                 "INSERT INTO coupon_grants (user_id, campaign_id, date) VALUES (7, 'birthday', '2026-03-14') RETURNING id",
///             )
///             .fetch_one(&mut *tx)
///             .await?;
///             Ok::<_, sqlx::Error>(id)
///         })
///     })
///     .await?;
/// match grant {
///     OnceOutcome::Ran(id) => println!("granted: {id}"),
///     OnceOutcome::AlreadyDone(id) => println!("granted before: {id}"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Operations<DB: Backend> {
    pool: Pool<DB>,
}

// By hand: a derive would ask for `DB: Clone`, which the database types are not.
impl<DB: Backend> Clone for Operations<DB> {
    fn clone(&self) -> Self {
        Operations {
            pool: self.pool.clone(),
        }
    }
}

impl<DB: Backend> Operations<DB> {
    /// OnceOutcome records in `pool`'s database (table `queue_operations`).
    pub fn new(pool: Pool<DB>) -> Self {
        Operations { pool }
    }

    /// Creates the tables if they are missing (the same SQL as the outbox's).
    pub async fn migrate(&self) -> Result<(), Error> {
        DB::migrate(&self.pool).await.map_err(super::database)
    }

    /// Runs `effect` once for `key`: inserts the key, runs the effect in the same
    /// transaction, stores its result and commits. When the key exists, returns the
    /// stored result and runs nothing. A racer that holds the key in an open
    /// transaction is waited for.
    pub async fn run_once<R, E, F>(
        &self,
        key: &str,
        effect: F,
    ) -> Result<OnceOutcome<R>, OperationError<E>>
    where
        R: Serialize + DeserializeOwned + Send,
        E: Send,
        F: for<'c> FnOnce(&'c mut DB::Connection) -> Effect<'c, R, E> + Send,
    {
        let mut tx = DB::begin_write(&self.pool).await?;
        if !DB::operation_claim(&mut tx, key).await? {
            let stored = DB::operation_read(&mut tx, key).await?;
            tx.rollback().await?;
            let json = stored.flatten().unwrap_or_else(|| "null".to_owned());
            return Ok(OnceOutcome::AlreadyDone(serde_json::from_str(&json)?));
        }
        let (mut tx, result, json) = effect_in(tx, effect).await?;
        DB::operation_store(&mut tx, key, &json).await?;
        tx.commit().await?;
        Ok(OnceOutcome::Ran(result))
    }

    /// The stored result of `key`, if its effect was done.
    pub async fn result<R: DeserializeOwned>(&self, key: &str) -> Result<Option<R>, Error> {
        let mut conn = self.pool.acquire().await.map_err(super::database)?;
        let stored = DB::operation_read(&mut conn, key)
            .await
            .map_err(super::database)?;
        stored
            .map(|json| serde_json::from_str(&json.unwrap_or_else(|| "null".to_owned())))
            .transpose()
            .map_err(|source| Error::Serialize {
                what: "operation result",
                source,
            })
    }
}
