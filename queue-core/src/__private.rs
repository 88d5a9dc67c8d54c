//! Not public API: what macro expansions and trait signatures need to name.
//! Nothing here follows semver.

pub use futures::future::BoxFuture;
pub use inventory;
pub use serde::de::DeserializeOwned;
pub use serde_json;

pub use crate::app::{Dep, FromApp, QueueApp};
pub use crate::contract::{JobOf, JobType, NoSchema, OutputOf, QueueType, SchemaProbe, WithSchema};
pub use crate::deps::{DepInfo, Deps};
pub use crate::error::Result;
pub use crate::events::TypedListener;
pub use crate::handler::ErasedHandler;
pub use crate::registry::{
    Instance, JobTypeRecord, MakeInstance, ProcessorRecord, ProducerRecord, QueueListenerRecord,
    TypeInfo, WorkerListenerRecord,
};

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

/// Compile-time check that a handler's payload can be deserialized.
pub fn assert_payload<T: DeserializeOwned>() {}

/// Compile-time check that `Q` is a declared queue.
pub fn assert_queue_type<Q: crate::contract::QueueType>() {}

/// Compile-time check that `J` is a job of the declared queue `Q`.
pub fn assert_job_of<Q, J: crate::contract::JobOf<Q>>() {}

/// Compile-time check that `R` is what job `J` declares its handler returns.
pub fn assert_output_of<J, R: crate::contract::OutputOf<J>>() {}

/// Compile-time check that `T` can be a job's payload type (the declaration's
/// `JobType` impl says so too, later and less clearly).
pub fn assert_job_payload<T: serde::Serialize + DeserializeOwned + Send + Sync + 'static>() {}

/// Compile-time check that `T` can be a job's output type.
pub fn assert_job_output<T: serde::Serialize + DeserializeOwned + Send + 'static>() {}

/// What a flow parent's second argument may be: `ChildResults<C>` with a
/// deserializable `C`.
#[diagnostic::on_unimplemented(
    message = "a flow parent's second argument must be `ChildResults<C>` with `C: DeserializeOwned`",
    label = "what the children return must implement `serde::Deserialize`"
)]
pub trait ChildResultsArg {}
impl<C: DeserializeOwned> ChildResultsArg for crate::job::ChildResults<C> {}

/// Compile-time check of a flow parent's children type.
pub fn assert_child_results<T: ChildResultsArg>() {}

/// What a handler may return: `Result<R, JobError>` with a serializable `R`.
#[diagnostic::on_unimplemented(
    message = "a job handler must return `Result<R, JobError>` with `R: Serialize`, not `{Self}`",
    label = "change this to `Result<(), JobError>` (or `Result<YourOutput, JobError>`)"
)]
pub trait HandlerReturn {}
impl<R: serde::Serialize> HandlerReturn for Result<R, crate::job::JobError> {}

/// Compile-time check of a handler's return type.
pub fn assert_handler_return<T: HandlerReturn>() {}

/// What a batch handler returns: `Result<BatchResult, JobError>`.
#[diagnostic::on_unimplemented(
    message = "a batch handler must return `Result<BatchResult, JobError>`, not `{Self}`",
    label = "change this to `Result<BatchResult, JobError>`"
)]
pub trait BatchReturn {}
impl BatchReturn for Result<crate::handler::BatchResult, crate::job::JobError> {}

/// Compile-time check of a batch handler's return type.
pub fn assert_batch_return<T: BatchReturn>() {}

/// What an `#[inject_queue]` field may be.
#[diagnostic::on_unimplemented(
    message = "an #[inject_queue] field must have type `Queue<T>`, not `{Self}`",
    label = "change this to `Queue<YourPayload>` with #[queue(\"name\")], or to `Queue<DeclaredQueue>`"
)]
pub trait QueueField {
    /// The payload type.
    type Payload: 'static;
}
impl<T: 'static> QueueField for crate::queue::Queue<T> {
    type Payload = T;
}

/// The payload type of an `#[inject_queue]` field.
pub const fn producer_payload<F: QueueField>() -> TypeInfo {
    TypeInfo::of::<F::Payload>()
}

/// Finds out, in a non-generic context, whether `T: Default`, to make an impl-block
/// processor's struct when nobody provided one (autoref specialisation: the impl on
/// `&DefaultProbe<T>` is picked when its bound holds, the one on `DefaultProbe<T>` when not).
#[derive(Debug)]
pub struct DefaultProbe<T>(PhantomData<T>);

impl<T> DefaultProbe<T> {
    /// A probe for `T`.
    pub const fn new() -> Self {
        DefaultProbe(PhantomData)
    }
}

impl<T> Default for DefaultProbe<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Chosen when `T: Default`.
pub trait ViaDefault {
    /// `Some` maker.
    fn maker(&self) -> Option<MakeInstance>;
}

impl<T: Default + Send + Sync + 'static> ViaDefault for &DefaultProbe<T> {
    fn maker(&self) -> Option<MakeInstance> {
        Some(|| -> Arc<dyn Any + Send + Sync> { Arc::new(T::default()) })
    }
}

/// Chosen when `T` has no `Default`.
pub trait WithoutDefault {
    /// No maker.
    fn maker(&self) -> Option<MakeInstance>;
}

impl<T> WithoutDefault for DefaultProbe<T> {
    fn maker(&self) -> Option<MakeInstance> {
        None
    }
}
