//! The wall around the engine: the only module that names `bullmq`, and the Redis side
//! of the backend.
//!
//! It turns our options into the engine's, the engine's jobs, states, events and
//! errors into ours, and runs the engine's worker with our dispatcher. When the
//! engine changes version, this folder changes and nothing else.

mod backlog;
mod cancel;
mod claims;
mod connection;
mod convert;
mod endpoint;
mod events;
mod flow;
mod flow_gate;
mod job;
mod lock_keeper;
mod queue;
mod raw_data;
mod runtime;
mod sentinel;
mod server_version;
mod sink;
mod watch;
mod worker;

pub(crate) use backlog::Backlog;
pub(crate) use claims::RedisClaims;
pub(crate) use connection::{Connection, Endpoint};
pub(crate) use events::EngineQueueEvents;
pub(crate) use flow::add_flow;
pub(crate) use queue::{AddOutcome, EngineQueue};
pub(crate) use sink::{EngineEvent, EventSink};
pub(crate) use worker::{
    bounded_stack, AttemptFailure, EngineWorker, ProcessFn, RawAttempt, WorkerSettings,
    STACK_TEXT_LIMIT,
};
