//! The engine's queue, behind our types, one responsibility per file: adds and their
//! duplicate detection ([`add`]), reads ([`read`]), what an operator inspects
//! ([`inspect`]), management ([`manage`]), job schedulers ([`schedulers`]), cancel
//! publishing and deferred failures ([`cancel`]), and the outbox relay's marks
//! ([`relayed`]).

mod add;
mod cancel;
mod groups;
mod inspect;
mod manage;
mod operator;
mod read;
mod relayed;
mod schedulers;

pub(crate) use add::AddOutcome;
pub(super) use cancel::cancel_channel;
pub(super) use groups::limits_to_engine;

use super::connection::Connection;
use super::convert::engine_error_in;
use crate::error::Error;

/// One queue's engine handle plus the shared connection for plain commands.
#[derive(Clone)]
pub(crate) struct EngineQueue {
    inner: bullmq::Queue,
    conn: Connection,
}

impl std::fmt::Debug for EngineQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineQueue")
            .field("name", &self.inner.name())
            .finish()
    }
}

impl EngineQueue {
    pub(crate) async fn open(conn: &Connection, name: &str) -> Result<Self, Error> {
        Ok(EngineQueue {
            inner: conn.engine_queue(name).await?,
            conn: conn.clone(),
        })
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The engine's error, naming this queue.
    fn error(&self, e: bullmq::Error) -> Error {
        engine_error_in(e, self.name())
    }

    fn job_key(&self, id: &str) -> String {
        format!("{}:{id}", self.conn.queue_base(self.name()))
    }
}
