//! Exactly-once effects across the application's database and the queue (feature
//! `sqlx`; SQLite and PostgreSQL). See the guide, [`guide_exactly_once`](crate::guide_exactly_once).
//!
//! - [`Outbox`] and its [`Relay`]: a job commits with the application's data, or not
//!   at all ([`Queue::add_in`](crate::Queue::add_in)).
//! - [`Operations`]: an effect and its record commit together; a repeat returns the
//!   stored result instead of repeating the effect.
//! - [`Stages`]: multi-step work keeps its stage in the database; each step skips
//!   what is done.

mod backend;
mod operations;
mod outbox;
mod record;
mod relay;
mod stages;

pub use backend::{Backend, OutboxConnection};
pub use operations::{Effect, Operation, OperationError, Operations};
pub use outbox::{Outbox, OutboxCounts, OutboxEntry};
pub use relay::{Relay, RelayStats};
pub use stages::{DoneStage, Stages};

pub(crate) use backend::sealed::Store;
pub(crate) use backend::NewRow;
pub(crate) use outbox::database;
pub(crate) use record::StoredOptions;

/// Now, as the store's tables keep time: milliseconds since the epoch, from this
/// application's clock, as the columns' `BIGINT`.
pub(crate) fn db_now_ms() -> i64 {
    i64::try_from(crate::clock::now_ms()).unwrap_or(i64::MAX)
}
