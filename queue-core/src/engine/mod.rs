//! The wall around the engine: the only module that names `bullmq`.
//!
//! It turns our options into the engine's, the engine's jobs, states, events and
//! errors into ours, and runs the engine's worker with our dispatcher. When the
//! engine changes version, this folder changes and nothing else.

mod cancel;
mod connection;
mod convert;
mod events;
mod job;
mod lock_keeper;
mod queue;
mod raw_data;
mod runtime;
mod worker;

pub(crate) use cancel::CancelSignal;
pub(crate) use connection::Connection;
pub(crate) use events::EngineQueueEvents;
pub(crate) use job::LiveJob;
pub(crate) use queue::{AddOutcome, EngineQueue};
pub(crate) use worker::{
    AttemptFailure, BackoffFn, EngineWorker, EventSink, ProcessFn, RawAttempt, WorkerSettings,
};
