//! Exactly-once effects across the application's database and the queue (feature
//! `sqlx`; SQLite and PostgreSQL). See the guide, [`guide_exactly_once`](crate::guide_exactly_once).
//!
//! - [`Outbox`]: a job commits with the application's data, or not at all
//!   ([`Queue::add_in`](crate::Queue::add_in)); the relay (`crate::relay`) adds it.
//! - [`Operations`]: an effect and its record commit together; a repeat returns the
//!   stored result instead of repeating the effect.
//! - [`Stages`]: multi-step work keeps its stage in the database; each step skips
//!   what is done.
//!
//! What the outbox promises, and where:
//!
//! - **A row is added to Redis at most once.** A relay deletes a row only after Redis
//!   acknowledged its job, and marks the row relayed in Redis before that delete, under
//!   the row's own random key (`row_key`, given at its first claim), not the job id. The
//!   mark is a deduplication key BullMQ's add itself creates (`outbox-<row key>`, with
//!   the outbox's window as TTL), then set to a value no job owns, so that BullMQ's
//!   removal of the job (retention, remove, clean, drain, obliterate) leaves it. A relay
//!   that takes a row again (the one before died between add and delete) finds the mark
//!   and adds nothing. A new row for the id of a job that is gone has a new key, and
//!   adds it again, as `add` would. (`queue/relayed.rs`; the guide's "Each row is added
//!   once" says what is left of the window.)
//! - **A row is never lost to a relay of another build**: what a relay cannot add
//!   because of its own build or settings it gives back, with the reason, for any relay
//!   to take again later (`crate::relay`'s `batch.rs`); only rows no build could add are set
//!   aside, and a later `add_in` of their job id replaces them.
//! - **The options are the producer's**: `add_in` applies the defaults once; the relay
//!   adds the stored options as they are, their delay shortened by the time the row
//!   waited.
//! - **One clock**: leases, waits and stamps are the database's time, computed in SQL
//!   (`backend/`), never a host's.
//! - **Migrations are safe from any number of processes at once**: they run under a lock
//!   (SQLite `BEGIN IMMEDIATE`, PostgreSQL an advisory transaction lock).

mod backend;
mod operations;
mod outbox;
mod record;
mod stages;

pub use backend::{Backend, OutboxConnection};
pub use operations::{Effect, OnceOutcome, OperationError, Operations};

/// The old name of [`OnceOutcome`].
#[deprecated(since = "0.2.0", note = "renamed `OnceOutcome`")]
pub type Operation<R> = OnceOutcome<R>;
pub use outbox::{Outbox, OutboxCounts, OutboxEntry};
pub use stages::{DoneStage, Stages};

pub(crate) use backend::sealed::Store;
pub(crate) use backend::{ClaimedRow, NewRow};
pub(crate) use outbox::database;
pub(crate) use record::StoredOptions;
