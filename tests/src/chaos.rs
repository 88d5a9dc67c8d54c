//! What the chaos run's worker processes and its driver share: the task, the
//! side-effect database and the worker's settings.
//!
//! Every attempt writes a row to `attempts`; the effect itself is a row in `effects`,
//! whose primary key is the job id. A job that runs again after a kill (at-least-once)
//! finds its effect already there and adds nothing: that is a duplicate prevented.

use std::path::Path;
use std::time::Duration;

use queue_core::{Dep, Job, JobError, Processor};
use serde::{Deserialize, Serialize};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

/// The queue the chaos run uses.
pub const QUEUE: &str = "chaos";

/// One unit of work: grant `amount` to `account`, failing the first attempt when
/// `fail_first` (a third of the jobs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Grant {
    /// The job's number, 0-based.
    pub n: u64,
    /// The account credited.
    pub account: String,
    /// The amount.
    pub amount: i64,
    /// The first attempt fails on purpose.
    pub fail_first: bool,
}

/// Opens (and creates) the side-effect database shared by every process of a run.
pub async fn open_db(path: &Path) -> Result<SqlitePool, sqlx::Error> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // Three processes write at once; a writer waits for the lock rather than fail.
        .busy_timeout(Duration::from_secs(30));
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS effects (
             job_id TEXT PRIMARY KEY,
             account TEXT NOT NULL,
             amount INTEGER NOT NULL)",
    )
    .execute(&pool)
    .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS attempts (
             job_id TEXT NOT NULL,
             attempt INTEGER NOT NULL,
             recovered INTEGER NOT NULL,
             duplicate INTEGER NOT NULL,
             pid INTEGER NOT NULL)",
    )
    .execute(&pool)
    .await?;
    Ok(pool)
}

/// The handler: record the attempt, fail a first attempt where asked, apply the
/// effect at most once, then linger a moment (so that kills land mid-job).
pub async fn grant(job: Job<Grant>, db: Dep<SqlitePool>) -> Result<(), JobError> {
    if job.data.fail_first && job.attempt() == 1 {
        record_attempt(&job, &db, false).await?;
        return Err(JobError::retry("planned failure of a first attempt"));
    }
    let applied = sqlx::query(
        "INSERT INTO effects (job_id, account, amount) VALUES (?1, ?2, ?3)
         ON CONFLICT (job_id) DO NOTHING",
    )
    .bind(job.id())
    .bind(&job.data.account)
    .bind(job.data.amount)
    .execute(&*db)
    .await
    .map_err(JobError::retry)?;
    record_attempt(&job, &db, applied.rows_affected() == 0).await?;
    // The rest of the job's work (a call to a mail or payment service, say).
    tokio::time::sleep(Duration::from_millis(20 + job.data.n % 40)).await;
    Ok(())
}

async fn record_attempt(
    job: &Job<Grant>,
    db: &SqlitePool,
    duplicate: bool,
) -> Result<(), JobError> {
    sqlx::query("INSERT INTO attempts (job_id, attempt, recovered, duplicate, pid) VALUES (?1, ?2, ?3, ?4, ?5)")
        .bind(job.id())
        .bind(job.attempt())
        .bind(job.recovered_from_stall())
        .bind(duplicate)
        .bind(std::process::id())
        .execute(db)
        .await
        .map_err(JobError::retry)?;
    Ok(())
}

/// The chaos worker's processor: short locks so that a killed worker's jobs come back
/// within seconds, and room for many stalls, as kills are frequent here.
pub fn processor() -> Processor {
    Processor::new(QUEUE)
        .concurrency(8)
        .lock_duration(Duration::from_secs(2))
        .stalled_interval(Duration::from_secs(1))
        .max_stalled_count(50)
        .job("grant", grant)
}
