//! Typed job contracts: a queue declared as a type, with the jobs it carries, each tying
//! a job name to its payload type and its output type. Declared with
//! [`#[job_queue]`](crate::job_queue); see the guide, [`guide_contracts`](crate::guide_contracts).
//!
//! Producers add a payload, and the queue and the job name come from its declaration;
//! processors take `Job<Payload>`, and are matched to the job by that type. A payload
//! added to a queue that does not carry it, a payload type nobody declared, or a handler
//! that returns something other than the declared output is a compile error.

mod declared;
mod schema;

pub use declared::DeclaredJob;
pub(crate) use schema::check_schema;
pub use schema::SchemaError;
#[doc(hidden)]
pub use schema::{NoSchema, SchemaProbe, WithSchema};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A queue declared as a type by [`#[job_queue("name")]`](crate::job_queue): its name,
/// and through [`JobType`] the jobs it carries.
///
/// ```
/// use queue_core::prelude::*;
///
/// #[derive(Serialize, Deserialize)]
/// pub struct WelcomeEmail { pub to: String }
///
/// #[job_queue("email")]
/// pub enum Email {
///     #[job("welcome")]
///     Welcome(WelcomeEmail),
/// }
///
/// assert_eq!(<Email as queue_core::QueueType>::NAME, "email");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a declared queue",
    label = "not declared with #[job_queue]",
    note = "declare a queue as a type: `#[job_queue(\"name\")] enum YourQueue {{ #[job(\"job-name\")] Variant(Payload), .. }}`",
    note = "or name the queue with a string: `app.queue::<Payload>(\"name\")`, and in an #[inject_queue] struct `#[queue(\"name\")] field: Queue<Payload>`"
)]
pub trait QueueType: 'static {
    /// The queue's name in Redis (before any [`rename_queue`](crate::QueueAppBuilder::rename_queue)).
    const NAME: &'static str;
}

/// A job's payload type, declared in its queue's [`#[job_queue]`](crate::job_queue)
/// enum: the queue, the job name and what its handler returns travel with the type.
///
/// Implemented by the declaration; you never implement it yourself.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a declared job type",
    label = "no #[job_queue] declares this payload",
    note = "list it in its queue's declaration: `#[job(\"job-name\")] Variant({Self})` inside a `#[job_queue(\"queue\")] enum`",
    note = "for a job only known by name (from another system), use `app.queue::<T>(\"queue\")?.add(\"name\", data, options)`"
)]
pub trait JobType: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The queue that carries it.
    type Queue: QueueType;
    /// Its job name.
    const NAME: &'static str;
    /// What its handler returns (stored as the job's return value).
    type Output: Serialize + DeserializeOwned + Send + 'static;
}

/// `Self` is a job of queue `Q`: what a typed add and a typed processor ask for.
/// Implemented by the declaration.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a job of queue `{Q}`",
    label = "this payload belongs to another queue, or to none",
    note = "add it through the queue its #[job_queue] declaration lists it in (`app.add_job(payload, ..)` finds that queue itself), or move its `#[job(..)]` line into `{Q}`'s declaration"
)]
pub trait JobOf<Q>: JobType {}

/// `Self` is what job `J`'s handler returns, as its declaration says. Implemented by the
/// declaration (`output = ..`, default `()`).
#[diagnostic::on_unimplemented(
    message = "a handler of `{J}` must return the output its declaration names, not `{Self}`",
    label = "not the declared output of this job",
    note = "return `Result<Output, JobError>` with the `output = ..` of `{J}`'s #[job(..)] line (none written means `()`), or change that line"
)]
pub trait OutputOf<J> {}
