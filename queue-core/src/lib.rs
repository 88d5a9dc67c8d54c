#![doc = include_str!("../docs/overview.md")]
// docs.rs builds with `--cfg docsrs` (Cargo.toml) and marks each feature-gated item.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The crate is built in floors (the repository's `docs/architecture.md` draws them, and
// CI checks them): the model (jobs, options, errors, contracts), the storage (the
// backend: Redis through the engine, or the inline runner; the application's
// database), the services (queues, workers, flows, watches, metrics), the features on
// narrow handles (health, claims, the relay), and the app that ties them together.
// Modules without `pub` are the floors' inside; the public modules are by concept.

pub mod app;
mod backend;
pub mod claims;
mod clock;
pub mod connection;
pub mod contract;
mod deps;
pub mod encryption;
pub mod error;
pub mod events;
pub mod flow;
pub mod group;
mod handler;
pub mod health;
pub mod job;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
pub mod options;
mod outage;
pub mod queue;
mod registry;
#[cfg(feature = "sqlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
pub mod relay;
mod slab;
mod snapshot;
#[cfg(feature = "sqlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
pub mod store;
pub mod testing;
pub mod trace;
pub mod watch;
pub mod worker;

#[doc(hidden)]
pub mod __private;
pub mod prelude;

// What nearly every app names; the rest is in the modules above.
pub use app::{Dep, QueueApp, QueueAppBuilder};
pub use contract::{JobType, QueueType};
pub use error::{Error, Result};
pub use events::{QueueEvent, WorkerEvent};
pub use flow::{FlowJob, OnChildFailure};
pub use job::{ChildResults, Job, JobError, JobInfo, JobState};
pub use options::{Backoff, JobOptions, Retention};
pub use queue::{AddedJob, Queue};
pub use watch::JobOutcome;
pub use worker::{Processor, Workers};

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
