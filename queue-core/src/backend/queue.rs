//! One queue's backend: the engine's queue handle, opened on first use, or the inline
//! runner. Adds go through here whichever runs; the rest of a queue's calls need Redis
//! and ask for the engine's handle, which an inline app refuses.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::OnceCell;

use super::engine::{self, Connection, EngineQueue};
use super::inline::InlineRunner;
use crate::error::Error;
use crate::job::JobState;
use crate::options::JobOptions;

/// What an add did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddOutcome {
    pub(crate) id: String,
    /// A job with this id (or deduplication id) existed: nothing was added.
    pub(crate) duplicate: bool,
    /// The job's state where the backend knows it without asking again (an inline job
    /// has run by then); `None`: a new job's starting state, or a duplicate's to read.
    pub(crate) state: Option<JobState>,
}

impl From<engine::AddOutcome> for AddOutcome {
    fn from(added: engine::AddOutcome) -> Self {
        AddOutcome {
            id: added.id,
            duplicate: added.duplicate,
            state: None,
        }
    }
}

/// A queue's backend.
// One per queue, inside the queue's shared `Arc`: the inline variant's unused room
// costs a test app a few hundred bytes a queue, where a box would cost every add a hop.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum QueueBackend {
    Redis {
        name: String,
        conn: Arc<Connection>,
        engine: OnceCell<EngineQueue>,
    },
    Inline {
        name: String,
        runner: Arc<InlineRunner>,
    },
}

impl QueueBackend {
    pub(super) fn redis(conn: Arc<Connection>, name: &str) -> Self {
        QueueBackend::Redis {
            name: name.to_owned(),
            conn,
            engine: OnceCell::new(),
        }
    }

    pub(super) fn inline(runner: Arc<InlineRunner>, name: &str) -> Self {
        QueueBackend::Inline {
            name: name.to_owned(),
            runner,
        }
    }

    /// The engine's handle of the queue, opened on first use; an inline app refuses.
    pub(crate) async fn engine(&self) -> Result<&EngineQueue, Error> {
        match self {
            // Boxed: opening runs once per queue, and its large future would otherwise
            // be part of every call's (an opened cell returns at once, calling nothing).
            QueueBackend::Redis { name, conn, engine } => {
                engine
                    .get_or_try_init(|| Box::pin(EngineQueue::open(conn, name)))
                    .await
            }
            QueueBackend::Inline { .. } => Err(Error::Inline {
                operation: "this queue call",
            }),
        }
    }

    /// Whether the add itself checks the payload's size, on the JSON it writes anyway
    /// (an opened engine queue); else the caller checks it first, so that a payload too
    /// big is refused as such before any I/O, even with Redis down.
    pub(crate) fn checks_payload_size(&self) -> bool {
        matches!(self, QueueBackend::Redis { engine, .. } if engine.initialized())
    }

    /// Whether an add of a job that cannot be a duplicate needs no deadline of its
    /// caller's: it is one command, and the connection of an opened queue on a
    /// standalone Redis ends a command once nothing has been heard on it for the command
    /// timeout (the engine's renewing connection), answering [`Error::Timeout`]. A cluster's or Sentinel's
    /// connection, an unopened queue (its opening asks Redis first) and an add that
    /// reads whether its id is taken keep the caller's one deadline over the whole add.
    pub(crate) fn bounds_single_adds(&self) -> bool {
        matches!(self, QueueBackend::Redis { engine, .. }
            if engine.get().is_some_and(EngineQueue::bounds_each_command))
    }

    /// Whether an add runs the job before it returns (an inline app's runner): then
    /// nothing waits for a relay or a worker.
    #[cfg(feature = "sqlx")]
    pub(crate) fn runs_when_added(&self) -> bool {
        matches!(self, QueueBackend::Inline { .. })
    }

    /// Adds one job whose options are prepared; a payload over `limit` bytes is refused.
    ///
    /// Every add passes here: no async function of the way down takes the payload or
    /// the options by value, and the rare branches are boxed.
    pub(crate) async fn add(
        &self,
        name: &str,
        data: serde_json::Value,
        options: &JobOptions,
        limit: usize,
    ) -> Result<AddOutcome, Error> {
        match self {
            QueueBackend::Redis { engine, .. } => {
                let engine = match engine.get() {
                    Some(engine) => engine,
                    None => Box::pin(self.engine()).await?,
                };
                Ok(engine.add(name, data, options, limit).await?.into())
            }
            QueueBackend::Inline {
                name: queue,
                runner,
            } => Ok(Self::run_inline(runner, queue, name, data, options).await),
        }
    }

    /// Adds several jobs, each checked already: pipelined, in the order given (engine
    /// change 37), or one after the other inline.
    pub(crate) async fn add_bulk(
        &self,
        jobs: Vec<(String, serde_json::Value, JobOptions)>,
    ) -> Result<Vec<AddOutcome>, Error> {
        match self {
            QueueBackend::Redis { .. } => {
                let added = self.engine().await?.add_bulk(jobs).await?;
                Ok(added.into_iter().map(AddOutcome::from).collect())
            }
            QueueBackend::Inline {
                name: queue,
                runner,
            } => {
                let mut added = Vec::with_capacity(jobs.len());
                for (name, data, options) in jobs {
                    added.push(Self::run_inline(runner, queue, &name, data, &options).await);
                }
                Ok(added)
            }
        }
    }

    /// An inline add: the handler runs now (boxed: a handler may add again, nested).
    fn run_inline<'a>(
        runner: &'a InlineRunner,
        queue: &'a str,
        name: &'a str,
        data: serde_json::Value,
        options: &'a JobOptions,
    ) -> BoxFuture<'a, AddOutcome> {
        Box::pin(async move {
            let (id, duplicate, state) = runner.add(queue, name, data, options).await;
            AddOutcome {
                id,
                duplicate,
                state: Some(state),
            }
        })
    }
}
