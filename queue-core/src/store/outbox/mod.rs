//! `Outbox`: the table jobs wait in between the application's commit and Redis, what
//! the relay reads it with, and what an operator sees of it.

use std::any::TypeId;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Pool;
use tokio::sync::Notify;

use super::backend::{Backend, ListedRow};
use crate::error::Error;

mod table;

pub(crate) use table::OutboxStore;

/// The transactional outbox: jobs written with [`Queue::add_in`](crate::Queue::add_in)
/// inside the application's own transaction, and moved to Redis by a relay once that
/// transaction commits. A job commits with the application's data or not at all.
///
/// Give it to the app with [`QueueAppBuilder::outbox`](crate::QueueAppBuilder::outbox);
/// `build` creates its table (`queue_outbox`) if missing and starts the relay.
///
/// ```no_run
/// # async fn demo(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// use queue_core::{JobOptions, store::Outbox, QueueApp};
///
/// let app = QueueApp::builder()
///     .outbox(Outbox::new(pool.clone()))
///     .build()
///     .await?;
/// let email = app.queue::<String>("email")?;
///
/// let mut tx = pool.begin().await?;
/// sqlx::query("INSERT INTO users (email) VALUES ($1)")
///     .bind("ada@example.com")
///     .execute(&mut *tx)
///     .await?;
/// let job = email
///     .add_in(&mut *tx, "welcome", "ada@example.com".into(), JobOptions::new().job_id("welcome-ada"))
///     .await?;
/// tx.commit().await?; // the relay adds the job to Redis now; on rollback, never
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Outbox {
    pub(crate) store: Arc<dyn OutboxStore>,
    /// Which [`Backend`] the table lives in: `add_in` must write to the same one.
    pub(crate) backend: TypeId,
    pub(crate) backend_name: &'static str,
    /// Told when this process commits a row (and, on PostgreSQL, when any does).
    pub(crate) wake: Arc<Notify>,
    pub(crate) settings: RelaySettings,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("backend", &self.backend_name)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// How a relay works through the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RelaySettings {
    pub(crate) batch_size: usize,
    pub(crate) poll_interval: Duration,
    pub(crate) lease: Duration,
    pub(crate) dedup_window: Duration,
    pub(crate) start_relay: bool,
}

impl Default for RelaySettings {
    fn default() -> Self {
        RelaySettings {
            batch_size: 500,
            poll_interval: Duration::from_secs(1),
            lease: Duration::from_secs(30),
            dedup_window: Duration::from_secs(3600),
            start_relay: true,
        }
    }
}

/// A job waiting in the outbox (or set aside there).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OutboxEntry {
    /// The row's id (what [`Outbox::requeue`] takes).
    pub id: i64,
    /// The queue the job goes to.
    pub queue: String,
    /// The job's id, fixed when the row was written.
    pub job_id: String,
    /// The job's name.
    pub job_name: String,
    /// The payload (`null` if the row's data is not JSON).
    pub data: serde_json::Value,
    /// The job's options, as `add_in` stored them (`None` if unreadable).
    pub(crate) options: Option<crate::options::JobOptions>,
    /// When `add_in` wrote it (ms since the epoch, by the database's clock).
    pub created_at_ms: u64,
    /// How many times a relay has taken it.
    pub attempts: u32,
    /// Why the job could not be added: for a row set aside, why it never can be; for a
    /// pending row, why the last relay that took it could not (it waits for one that
    /// can, see [`RelayStats::deferred`](crate::relay::RelayStats::deferred)).
    pub last_error: Option<String>,
    /// When the row was set aside: it can never be added as it is, and waits for a
    /// person (see [`Outbox::failed`] and [`Outbox::requeue`]).
    pub set_aside_at_ms: Option<u64>,
}

/// How many rows the outbox holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxCounts {
    /// Waiting for a relay.
    pub pending: u64,
    /// Set aside: they can never be added as they are.
    pub set_aside: u64,
    /// How long the oldest pending row has waited, by the database's clock: the
    /// relay's lag (readiness fails past the lag the app allows).
    pub oldest_pending: Option<std::time::Duration>,
}

fn entry(row: ListedRow) -> OutboxEntry {
    let (
        id,
        queue,
        job_id,
        job_name,
        data,
        options,
        created_at_ms,
        attempts,
        last_error,
        failed_at_ms,
    ) = row;
    let unsigned = |n: i64| u64::try_from(n).unwrap_or(0);
    let options = serde_json::from_str::<super::record::StoredOptions>(&options)
        .ok()
        .map(|stored| stored.into_options(job_id.clone()));
    OutboxEntry {
        id,
        queue,
        data: serde_json::from_str(&data).unwrap_or(serde_json::Value::Null),
        options,
        job_id,
        job_name,
        created_at_ms: unsigned(created_at_ms),
        attempts: u32::try_from(attempts).unwrap_or(0),
        last_error,
        set_aside_at_ms: failed_at_ms.map(unsigned),
    }
}

pub(crate) fn database(e: sqlx::Error) -> Error {
    Error::Database(Box::new(e))
}

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Outbox {
    /// An outbox in `pool`'s database (SQLite or PostgreSQL), with default settings:
    /// batches of 500, a poll every second as the fallback to being woken, a 30 s
    /// lease, a one-hour deduplication window.
    pub fn new<DB: Backend>(pool: Pool<DB>) -> Self {
        Outbox {
            store: Arc::new(pool),
            backend: TypeId::of::<DB>(),
            backend_name: std::any::type_name::<DB>(),
            wake: Arc::new(Notify::new()),
            settings: RelaySettings::default(),
        }
    }

    /// Rows a relay takes at once (default 500), added to Redis in one pipelined call.
    pub fn batch_size(mut self, rows: usize) -> Self {
        self.settings.batch_size = rows;
        self
    }

    /// How often a relay looks for rows when nothing woke it (default 1 s). A commit in
    /// this process, or on PostgreSQL in any process, wakes it at once.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.settings.poll_interval = every;
        self
    }

    /// How long a relay holds the rows it took (default 30 s), in the database's time. A
    /// relay that dies holding rows delays them by this much; another relay then takes
    /// them, and adds only those the first one had not added (see
    /// [`dedup_window`](Self::dedup_window)).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = lease;
        self
    }

    /// How long Redis remembers that a row was relayed (default 1 h): a relay that
    /// takes a row again (the one before died between the add and the row's delete)
    /// finds the mark and adds nothing, even if the job ran and was removed meanwhile,
    /// by retention or by an operator's remove, clean, drain or obliterate. The mark is
    /// keyed by the row, not the job id, so a later row with the id of a job that is
    /// gone adds it again, as `add` would. Keep the window longer than any outage of
    /// the database during which rows cannot be deleted. Each relayed job costs one
    /// small key for this long. See the guide's "added once" section.
    pub fn dedup_window(mut self, window: Duration) -> Self {
        self.settings.dedup_window = window;
        self
    }

    /// Whether `build` starts a relay in this app (default true). Turn it off for a
    /// process that only writes rows, and run [`QueueApp::start_relay`](crate::QueueApp::start_relay)
    /// elsewhere.
    pub fn start_relay(mut self, start: bool) -> Self {
        self.settings.start_relay = start;
        self
    }

    /// Refuses settings no relay can work with (checked by `build`).
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let s = &self.settings;
        if s.batch_size == 0 || s.batch_size > 10_000 {
            return Err(Error::invalid(
                "outbox batch_size",
                format!("{} is out of range; use 1 to 10000", s.batch_size),
            ));
        }
        if s.poll_interval < Duration::from_millis(10) {
            return Err(Error::invalid(
                "outbox poll_interval",
                "must be at least 10 ms (commits wake the relay at once anyway)",
            ));
        }
        if s.lease < Duration::from_secs(1) {
            return Err(Error::invalid(
                "outbox lease",
                "must be at least 1 s, longer than one batch takes",
            ));
        }
        if s.dedup_window <= s.lease {
            return Err(Error::invalid(
                "outbox dedup_window",
                format!(
                    "must be longer than the lease ({:?}): a row re-added after a lease ran out must still be recognised",
                    s.lease
                ),
            ));
        }
        Ok(())
    }

    /// Creates queue-core's tables if they are missing, and brings those of an older
    /// release up to date (`build` calls this). Any number of processes may run it at
    /// once: it runs under a lock (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: an advisory
    /// transaction lock). The SQL is in `queue-core/migrations/` for those who prefer
    /// their own migrations.
    pub async fn migrate(&self) -> Result<(), Error> {
        self.store.migrate().await.map_err(database)
    }

    /// Rows waiting for a relay, oldest first, at most `limit`.
    pub async fn pending(&self, limit_to: usize) -> Result<Vec<OutboxEntry>, Error> {
        let rows = self
            .store
            .list(false, limit(limit_to))
            .await
            .map_err(database)?;
        Ok(rows.into_iter().map(entry).collect())
    }

    /// Rows set aside because they can never be added as they are (data that is not
    /// JSON, an option BullMQ's rules refuse, a queue name BullMQ refuses), oldest
    /// first, with the reason. A later `add_in` of a set-aside row's job id replaces
    /// it.
    pub async fn failed(&self, limit_to: usize) -> Result<Vec<OutboxEntry>, Error> {
        let rows = self
            .store
            .list(true, limit(limit_to))
            .await
            .map_err(database)?;
        Ok(rows.into_iter().map(entry).collect())
    }

    /// How many rows wait, and how many are set aside.
    pub async fn counts(&self) -> Result<OutboxCounts, Error> {
        let (pending, set_aside, oldest) = self.store.counts().await.map_err(database)?;
        let unsigned = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(OutboxCounts {
            pending: unsigned(pending),
            set_aside: unsigned(set_aside),
            oldest_pending: oldest.map(|ms| std::time::Duration::from_millis(unsigned(ms))),
        })
    }

    /// `queue`'s job `job_id`, while it is still in the outbox.
    pub async fn find(&self, queue: &str, job_id: &str) -> Result<Option<OutboxEntry>, Error> {
        let row = self.store.find(queue, job_id).await.map_err(database)?;
        Ok(row.map(entry))
    }

    /// Puts a set-aside row back in line (after fixing what refused it); `false` when
    /// no set-aside row has this id.
    pub async fn requeue(&self, id: i64) -> Result<bool, Error> {
        let requeued = self.store.requeue(id).await.map_err(database)?;
        if requeued {
            self.wake.notify_one();
        }
        Ok(requeued)
    }
}
