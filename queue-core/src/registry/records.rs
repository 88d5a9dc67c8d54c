//! The static records the attribute macros submit, and their collection with `inventory`.
//!
//! Records are const-built from `&'static str`, integers and `fn` pointers, as inventory
//! requires; every decision about them is made in `queue-core` (see `validate.rs`).

use std::any::{type_name, Any, TypeId};
use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::deps::{DepInfo, Deps};
use crate::events::{QueueEvent, WorkerEvent};
use crate::handler::ErasedHandler;

/// A type's identity, as a record can hold it (`TypeId::of` is not const).
#[derive(Debug, Clone, Copy)]
pub struct TypeInfo {
    /// The type's id.
    pub id: fn() -> TypeId,
    /// The type's name, for messages.
    pub name: fn() -> &'static str,
}

impl TypeInfo {
    /// The identity of `T`.
    pub const fn of<T: ?Sized + 'static>() -> Self {
        TypeInfo {
            id: TypeId::of::<T>,
            name: type_name::<T>,
        }
    }
}

/// A shared instance made from `Default`, for an impl-block processor nobody provided.
pub type MakeInstance = fn() -> Arc<dyn Any + Send + Sync>;

/// An impl-block processor's struct, and how to make it when nobody provided one
/// (the function answers `None` when the struct has no `Default`).
pub type Instance = (TypeInfo, fn() -> Option<MakeInstance>);

/// One handler registered by `#[processor]`.
#[derive(Debug)]
pub struct ProcessorRecord {
    /// The queue.
    pub queue: &'static str,
    /// The job name it claims; `None`: every name nobody else claims.
    pub job: Option<&'static str>,
    /// Worker concurrency asked for (the largest of a queue's records wins).
    pub concurrency: Option<usize>,
    /// Attempt timeout in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Lock duration in milliseconds.
    pub lock_duration_ms: Option<u64>,
    /// Rate limit: at most `.0` jobs per `.1` milliseconds.
    pub limiter: Option<(u64, u64)>,
    /// BullMQ's per-minute metrics, in minutes kept ([`Processor::per_minute_metrics`]).
    ///
    /// [`Processor::per_minute_metrics`]: crate::Processor::per_minute_metrics
    pub per_minute_metrics: Option<usize>,
    /// More queues the same handler serves ([`Processor::also_serve`]).
    ///
    /// [`Processor::also_serve`]: crate::Processor::also_serve
    pub also_serve: &'static [&'static str],
    /// Fair groups: builds the limits every group of the queue runs under
    /// ([`Processor::groups`]); `None` for a processor that is not grouped.
    ///
    /// [`Processor::groups`]: crate::Processor::groups
    pub groups: Option<fn() -> crate::group::GroupLimits>,
    /// Batches: at most `.0` jobs a call, waiting up to `.1` milliseconds after the
    /// first for the rest ([`Processor::batch`]); `None` for a single-job handler.
    ///
    /// [`Processor::batch`]: crate::Processor::batch
    pub batch: Option<(usize, u64)>,
    /// `path::to::function`, for messages and logs.
    pub label: &'static str,
    /// Builds the type-erased handler.
    pub handler: fn() -> ErasedHandler,
    /// For an impl-block processor: the struct, and how to make it when not provided
    /// (`None` from the function when it has no `Default`).
    pub instance: Option<Instance>,
}

/// One `#[queue("..")]` field of an `#[inject_queue]` struct.
#[derive(Debug)]
pub struct ProducerRecord {
    /// The queue.
    pub queue: &'static str,
    /// The payload type of the field's `Queue<T>`.
    pub payload: TypeInfo,
    /// The field is a declared queue's `Queue<Q>`: its jobs are typed by their
    /// declarations, not by `payload`.
    pub declared: bool,
    /// `Struct.field`, for messages.
    pub label: &'static str,
}

/// An `#[on_worker_event]` function.
#[derive(Debug)]
pub struct WorkerListenerRecord {
    /// The queue.
    pub queue: &'static str,
    /// The event kind (`"failed"`, `"completed"`, ...).
    pub event: &'static str,
    /// `path::to::function`, for messages and logs.
    pub label: &'static str,
    /// Calls the function with its dependencies; `None` when the event is not for it
    /// (another job type, a failure a retry follows for a `final_only` listener, a
    /// payload that does not fit; or a dependency not provided, which `build` rules
    /// out).
    pub call: fn(WorkerEvent, &Deps) -> Option<BoxFuture<'static, ()>>,
    /// The `Dep<T>` types the function takes after the event.
    pub dependencies: fn() -> Vec<DepInfo>,
}

/// An `#[on_queue_event]` function.
#[derive(Debug)]
pub struct QueueListenerRecord {
    /// The queue.
    pub queue: &'static str,
    /// The event kind (`"completed"`, `"failed"`, ...).
    pub event: &'static str,
    /// `path::to::function`, for messages and logs.
    pub label: &'static str,
    /// Calls the function with its dependencies (`None`: one is not provided).
    pub call: fn(QueueEvent, &Deps) -> Option<BoxFuture<'static, ()>>,
    /// The `Dep<T>` types the function takes after the event.
    pub dependencies: fn() -> Vec<DepInfo>,
}

/// One job of a `#[job_queue]` declaration.
#[derive(Debug)]
pub struct JobTypeRecord {
    /// The queue, as declared.
    pub queue: &'static str,
    /// The job name.
    pub name: &'static str,
    /// The payload type.
    pub payload: TypeInfo,
    /// The output type.
    pub output: TypeInfo,
    /// The payload's JSON Schema, when it has one.
    pub payload_schema: fn() -> Option<serde_json::Value>,
    /// The output's JSON Schema, when it has one.
    pub output_schema: fn() -> Option<serde_json::Value>,
    /// `path::Queue::Variant`, for messages.
    pub label: &'static str,
    /// The queue's payloads are sealed (`#[job_queue("name", encrypted)]`).
    pub encrypted: bool,
}

inventory::collect!(JobTypeRecord);
inventory::collect!(ProcessorRecord);
inventory::collect!(ProducerRecord);
inventory::collect!(WorkerListenerRecord);
inventory::collect!(QueueListenerRecord);

/// Every record linked into this binary, sorted by queue (then job name / event), so
/// that start-up checks and logs do not depend on link order.
#[derive(Debug, Default)]
pub(crate) struct Registered {
    pub(crate) processors: Vec<&'static ProcessorRecord>,
    pub(crate) producers: Vec<&'static ProducerRecord>,
    pub(crate) worker_listeners: Vec<&'static WorkerListenerRecord>,
    pub(crate) queue_listeners: Vec<&'static QueueListenerRecord>,
    pub(crate) job_types: Vec<&'static JobTypeRecord>,
}

impl Registered {
    /// The `#[job_queue]` declarations of this binary, and no other record.
    pub(crate) fn declarations_only() -> Self {
        Registered {
            job_types: job_types(|_| true),
            ..Registered::default()
        }
    }

    /// Every queue these records name (as written, before renames).
    pub(crate) fn queues(&self) -> BTreeSet<&'static str> {
        let processors = self
            .processors
            .iter()
            .flat_map(|r| std::iter::once(r.queue).chain(r.also_serve.iter().copied()));
        processors
            .chain(self.producers.iter().map(|r| r.queue))
            .chain(self.worker_listeners.iter().map(|r| r.queue))
            .chain(self.queue_listeners.iter().map(|r| r.queue))
            .chain(self.job_types.iter().map(|r| r.queue))
            .collect()
    }

    /// The records of this binary whose queue `keep` accepts.
    pub(crate) fn collect(keep: impl Fn(&str) -> bool) -> Self {
        let mut processors: Vec<_> = inventory::iter::<ProcessorRecord>
            .into_iter()
            .filter(|r| keep(r.queue))
            .collect();
        processors.sort_by_key(|r| (r.queue, r.job, r.label));
        let mut producers: Vec<_> = inventory::iter::<ProducerRecord>
            .into_iter()
            .filter(|r| keep(r.queue))
            .collect();
        producers.sort_by_key(|r| (r.queue, r.label));
        let mut worker_listeners: Vec<_> = inventory::iter::<WorkerListenerRecord>
            .into_iter()
            .filter(|r| keep(r.queue))
            .collect();
        worker_listeners.sort_by_key(|r| (r.queue, r.event, r.label));
        let mut queue_listeners: Vec<_> = inventory::iter::<QueueListenerRecord>
            .into_iter()
            .filter(|r| keep(r.queue))
            .collect();
        queue_listeners.sort_by_key(|r| (r.queue, r.event, r.label));
        Registered {
            job_types: job_types(keep),
            processors,
            producers,
            worker_listeners,
            queue_listeners,
        }
    }
}

/// The `#[job_queue]` jobs of this binary whose queue `keep` accepts, sorted.
fn job_types(keep: impl Fn(&str) -> bool) -> Vec<&'static JobTypeRecord> {
    let mut job_types: Vec<_> = inventory::iter::<JobTypeRecord>
        .into_iter()
        .filter(|r| keep(r.queue))
        .collect();
    job_types.sort_by_key(|r| (r.queue, r.name, r.label));
    job_types
}
