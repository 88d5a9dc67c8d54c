#![doc = include_str!("../docs/overview.md")]
// docs.rs builds with `--cfg docsrs` (Cargo.toml) and marks each feature-gated item.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod app;
mod backend;
mod claims;
mod clock;
mod cluster;
mod contract;
mod deps;
mod error;
mod events;
mod flow;
mod group;
mod handler;
mod health;
mod job;
mod options;
mod outage;
mod processor;
mod queue;
mod registry;
#[cfg(feature = "sqlx")]
mod relay;
mod sentinel;
mod slab;
mod snapshot;
#[cfg(feature = "sqlx")]
mod store;
mod tls;
mod watch;
mod worker;

pub mod __private;
#[doc(hidden)]
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
pub mod prelude;
pub mod testing;
pub mod trace;

pub use app::{
    FromApp, QueueApp, QueueAppBuilder, Registrations, DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_PREFIX, DEFAULT_REDIS_URL,
};
pub use claims::{Claim, ClaimToken, Claims};
pub use cluster::queue_slot;
pub use contract::{DeclaredJob, JobOf, JobType, OutputOf, QueueType, SchemaError};
pub use deps::Dep;
pub use error::{Error, PayloadError, RegistryError, Result};
pub use events::{
    EventJob, JobFailure, QueueEvent, QueueEvents, WorkerEvent, WorkerEvents, QUEUE_EVENTS_CAPACITY,
};
pub use flow::{AddedFlow, ExistingJob, FlowError, FlowJob, OnChildFailure};
pub use group::{GroupInfo, GroupLimits, GroupPage, MAX_GROUP_PAGE};
pub use handler::Handler;
pub use health::{
    Check, CheckStatus, Health, HealthReport, HealthSettings, MemoryGuard, ProcessInfo,
    ProcessWorker, RedisInfo,
};
pub use job::{
    ChildKey, ChildResults, FailedChild, Job, JobCounts, JobError, JobInfo, JobState, ParentJob,
    TestJobHandle,
};
pub use options::{
    could_be_job_id, Backoff, BackoffContext, Deduplication, JobOptions, Keep, Schedule, MAX_DELAY,
    MAX_GROUP_BYTES, MAX_JOB_ID_BYTES, MAX_PRIORITY,
};
pub use processor::{AnyQueue, Processor};
pub use queue::{
    AddedJob, BulkJob, CancelOutcome, ChildJob, Children, GlobalLimits, JobFilter, JobLogs,
    JobScan, JobSummary, Outcome, Queue, ScanLimits, SchedulerInfo, WorkerInfo,
};
#[cfg(feature = "sqlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
pub use relay::{Relay, RelayStats};
pub use sentinel::Sentinel;
#[cfg(feature = "sqlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
pub use store::{
    Backend, DoneStage, Effect, Operation, OperationError, Operations, Outbox, OutboxConnection,
    OutboxCounts, OutboxEntry, Stages,
};
pub use tls::Tls;
pub use watch::{JobOutcome, JobWatcher, WatchStats};
pub use worker::{ListenerStats, ShutdownReport, Workers, LISTENER_MAILBOX};

#[doc = include_str!("../docs/registration.md")]
pub mod guide_registration {}
#[cfg(feature = "macros")]
#[doc = include_str!("../docs/contracts.md")]
pub mod guide_contracts {}
#[cfg(feature = "macros")]
#[doc = include_str!("../docs/flows.md")]
pub mod guide_flows {}
#[cfg(feature = "sqlx")]
#[doc = include_str!("../docs/exactly-once.md")]
pub mod guide_exactly_once {}
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use queue_macros::{inject_queue, job, job_queue, on_queue_event, on_worker_event, processor};
