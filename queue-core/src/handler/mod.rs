//! Handlers: plain async functions `fn(Job<T>, Dep<A>, ...) -> Result<R, JobError>`,
//! and their type-erased form that the worker dispatches to.

mod attempt;
mod batch;
pub(crate) mod panic;
mod plan;

pub(crate) use attempt::attempt;
pub(crate) use batch::alone as batch_of_one;
pub use batch::{Batch, BatchHandler, BatchResult};
#[cfg(feature = "metrics")]
pub use plan::ANY_JOB_NAME;
pub(crate) use plan::{plan_of, PlannedHandler, QueuePlan};

use std::any::type_name;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::deps::{Dep, DepInfo, Deps};
use crate::job::{ChildResults, Job, JobError};

/// An async function that handles a job: its first argument is `Job<T>`, the others are
/// [`Dep`]s, and it returns `Result<R, JobError>` with `R: Serialize` (stored as the
/// job's return value). A flow parent takes its children's results,
/// [`ChildResults<C>`](crate::ChildResults), right after the job.
///
/// Implemented for functions and closures of up to six dependencies; you never
/// implement it yourself.
///
/// ```
/// use queue_core::{Dep, Job, JobError, Processor};
///
/// struct Db;
/// async fn grant(job: Job<u64>, _db: Dep<Db>) -> Result<String, JobError> {
///     Ok(format!("granted to {}", job.data))
/// }
/// let processor = Processor::new("coupon").job("grant", grant);
/// # let _ = processor;
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a job handler",
    label = "a job handler is `async fn(Job<T>, Dep<A>, ..) -> Result<R, JobError>` with `T: DeserializeOwned`, `R: Serialize`",
    note = "the error above, if any, points at the part that does not fit",
    note = "a flow parent takes `ChildResults<C>` right after the job, with `C: DeserializeOwned`"
)]
pub trait Handler<Args>: Clone + Send + Sync + Sized + 'static {
    /// The payload type the job's data is deserialized into.
    type Payload: DeserializeOwned + Send + 'static;
    /// The return value type.
    type Output: Serialize + Send + 'static;
    /// The handler's future.
    type Future: Future<Output = Result<Self::Output, JobError>> + Send + 'static;

    /// Calls the handler, or returns `None` when a dependency was not provided.
    #[doc(hidden)]
    fn call(&self, job: Job<Self::Payload>, deps: &Deps) -> Option<Self::Future>;

    /// The dependency types the handler asks for.
    #[doc(hidden)]
    fn dependencies() -> Vec<DepInfo>;

    /// Whether the handler reads the job's flow children (takes `ChildResults`).
    #[doc(hidden)]
    fn reads_children() -> bool {
        false
    }
}

macro_rules! impl_handler {
    ($($dep:ident),*) => {
        impl<F, Fut, T, R, $($dep,)*> Handler<(Job<T>, $(Dep<$dep>,)*)> for F
        where
            F: Fn(Job<T>, $(Dep<$dep>,)*) -> Fut + Clone + Send + Sync + 'static,
            Fut: Future<Output = Result<R, JobError>> + Send + 'static,
            T: DeserializeOwned + Send + 'static,
            R: Serialize + Send + 'static,
            $($dep: Send + Sync + 'static,)*
        {
            type Payload = T;
            type Output = R;
            type Future = Fut;

            #[allow(non_snake_case, unused_variables)]
            fn call(&self, job: Job<T>, deps: &Deps) -> Option<Fut> {
                $(let $dep = deps.get::<$dep>()?;)*
                Some((self)(job, $($dep,)*))
            }

            fn dependencies() -> Vec<DepInfo> {
                vec![$(DepInfo::of::<$dep>(),)*]
            }
        }
    };
}

/// A flow parent: `Fn(Job<T>, ChildResults<C>, Dep<A>, ..)`. Its children's results
/// are read (and typed) before it is called.
macro_rules! impl_parent_handler {
    ($($dep:ident),*) => {
        impl<F, Fut, T, C, R, $($dep,)*> Handler<(Job<T>, ChildResults<C>, $(Dep<$dep>,)*)> for F
        where
            F: Fn(Job<T>, ChildResults<C>, $(Dep<$dep>,)*) -> Fut + Clone + Send + Sync + 'static,
            Fut: Future<Output = Result<R, JobError>> + Send + 'static,
            T: DeserializeOwned + Send + Sync + 'static,
            C: DeserializeOwned + Send + 'static,
            R: Serialize + Send + 'static,
            $($dep: Send + Sync + 'static,)*
        {
            type Payload = T;
            type Output = R;
            type Future = BoxFuture<'static, Result<R, JobError>>;

            #[allow(non_snake_case, unused_variables)]
            fn call(&self, job: Job<T>, deps: &Deps) -> Option<Self::Future> {
                $(let $dep = deps.get::<$dep>()?;)*
                let handler = self.clone();
                // The worker has checked that no child it waits for still runs, and
                // dropped those not started (`OnChildFailure::ContinueParent`).
                Some(Box::pin(async move {
                    let children = job.child_results::<C>().await?;
                    handler(job, children, $($dep,)*).await
                }))
            }

            fn dependencies() -> Vec<DepInfo> {
                vec![$(DepInfo::of::<$dep>(),)*]
            }

            fn reads_children() -> bool {
                true
            }
        }
    };
}

impl_handler!();
impl_handler!(A1);
impl_handler!(A1, A2);
impl_handler!(A1, A2, A3);
impl_handler!(A1, A2, A3, A4);
impl_handler!(A1, A2, A3, A4, A5);
impl_handler!(A1, A2, A3, A4, A5, A6);
impl_parent_handler!();
impl_parent_handler!(A1);
impl_parent_handler!(A1, A2);
impl_parent_handler!(A1, A2, A3);
impl_parent_handler!(A1, A2, A3, A4);
impl_parent_handler!(A1, A2, A3, A4, A5);

type RunFn = dyn Fn(
        Job<serde_json::Value>,
        Arc<Deps>,
        Input,
    ) -> BoxFuture<'static, Result<serde_json::Value, JobError>>
    + Send
    + Sync;

/// A handler with its types erased: JSON in, JSON out. Built by `#[processor]`
/// expansions and by [`Processor::job`](crate::Processor::job).
#[doc(hidden)]
#[derive(Clone)]
pub struct ErasedHandler {
    pub(crate) payload_type: &'static str,
    pub(crate) payload_id: std::any::TypeId,
    pub(crate) dependencies: Vec<DepInfo>,
    /// The payload type takes JSON `null` (`()`, `Option<_>`, `Value`).
    pub(crate) accepts_null: bool,
    /// The handler takes its job's flow children (`ChildResults`).
    pub(crate) reads_children: bool,
    /// Whether a JSON value deserializes into the payload type, and serde's reason
    /// when it does not.
    pub(crate) check: fn(&serde_json::Value) -> Result<(), String>,
    /// A batch handler's (`ErasedHandler::batch`): its jobs run in batches.
    pub(crate) batch: bool,
    run: Arc<RunFn>,
}

/// The failure of a handler whose dependencies (`needed`) are not all in `deps`: it
/// names the missing ones.
fn missing_dependencies(needed: Vec<DepInfo>, deps: &Deps) -> JobError {
    let missing = needed
        .into_iter()
        .filter(|d| !deps.contains(d))
        .map(|d| d.type_name)
        .collect::<Vec<_>>()
        .join(", ");
    JobError::unrecoverable_msg(format!("dependency not provided: {missing}"))
}

/// Whether `value` deserializes into `T`.
fn fits<T: DeserializeOwned>(value: &serde_json::Value) -> Result<(), String> {
    T::deserialize(value).map(drop).map_err(|e| e.to_string())
}

impl ErasedHandler {
    /// Erases `handler`'s types.
    pub fn new<H: Handler<Args>, Args>(handler: H) -> Self {
        let payload_type = type_name::<H::Payload>();
        // One boxed future per attempt, which does everything when first polled (see
        // `run`): the payload's deserialization, the call, the return value's JSON.
        let run = move |job: Job<serde_json::Value>,
                        deps: Arc<Deps>,
                        input: Input|
              -> BoxFuture<'static, _> {
            let handler = handler.clone();
            Box::pin(async move {
                let typed = deserialize_payload::<H::Payload>(job, input)?;
                let Some(future) = handler.call(typed, &deps) else {
                    return Err(missing_dependencies(H::dependencies(), &deps));
                };
                let output = future.await?;
                serde_json::to_value(output).map_err(|e| {
                    JobError::unrecoverable_msg(format!(
                        "cannot serialize the return value ({}): {e}",
                        type_name::<H::Output>()
                    ))
                })
            })
        };
        ErasedHandler {
            payload_type,
            payload_id: std::any::TypeId::of::<H::Payload>(),
            dependencies: H::dependencies(),
            accepts_null: serde_json::from_value::<H::Payload>(serde_json::Value::Null).is_ok(),
            reads_children: H::reads_children(),
            check: fits::<H::Payload>,
            batch: false,
            run: Arc::new(run),
        }
    }

    /// Runs the handler: deserializes the payload, then awaits the handler. Both
    /// happen inside the returned future (so inside whatever `catch_unwind` polls it),
    /// never in this call: a `Deserialize` or a handler that panics before returning
    /// its future is a panic of the future, not of the caller.
    pub(crate) fn run(
        &self,
        job: Job<serde_json::Value>,
        deps: &Arc<Deps>,
    ) -> BoxFuture<'static, Result<serde_json::Value, JobError>> {
        (self.run)(job, deps.clone(), Input::Data)
    }

    /// [`run`](Self::run) for a job whose data was sealed, with `plain`, the JSON text
    /// it opened to: the payload is deserialized from it straight (no JSON value
    /// between), and one that does not fit fails without serde's detail, which can
    /// quote the payload (`invalid type: string "ada@example.com"`), into a failure
    /// reason Redis keeps in clear.
    pub(crate) fn run_opened(
        &self,
        mut job: Job<serde_json::Value>,
        plain: Vec<u8>,
        deps: &Arc<Deps>,
    ) -> BoxFuture<'static, Result<serde_json::Value, JobError>> {
        // The envelope is done with.
        job.data = serde_json::Value::Null;
        (self.run)(job, deps.clone(), Input::Opened(plain))
    }
}

/// Where a handler's payload comes from.
pub(crate) enum Input {
    /// The job's data, as it is; serde's reason shown when it does not fit.
    Data,
    /// The JSON text a sealed payload opened to; serde's reason withheld.
    Opened(Vec<u8>),
}

impl std::fmt::Debug for ErasedHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ErasedHandler")
            .field("payload_type", &self.payload_type)
            .finish_non_exhaustive()
    }
}

/// A payload that does not fit the handler's type is unrecoverable: retrying cannot fix it.
fn deserialize_payload<T: DeserializeOwned>(
    job: Job<serde_json::Value>,
    input: Input,
) -> Result<Job<T>, JobError> {
    let does_not_fit = |why: String| {
        JobError::unrecoverable_msg(format!("payload does not fit {}: {why}", type_name::<T>()))
    };
    let data = match input {
        Input::Data => T::deserialize(&job.data).map_err(|e| does_not_fit(e.to_string()))?,
        // Authenticated, so what sealed it wrote this text: one that is not JSON is a
        // peer's bug, said as such; serde's detail is withheld either way.
        Input::Opened(plain) => serde_json::from_slice(&plain).map_err(|e| match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                JobError::unrecoverable_msg("the job's data: the plaintext is not JSON")
            }
            _ => does_not_fit("the detail is withheld, as the payload is sealed".to_owned()),
        })?,
    };
    Ok(job.map_data(|_| data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Email {
        to: String,
    }

    async fn echo(job: Job<Email>, prefix: Dep<String>) -> Result<String, JobError> {
        Ok(format!("{}{}", *prefix, job.data.to))
    }

    fn deps_with_prefix() -> Arc<Deps> {
        let mut deps = Deps::default();
        deps.insert(Arc::new(String::from("to:")));
        Arc::new(deps)
    }

    #[tokio::test]
    async fn erased_handler_deserializes_calls_and_serializes() {
        let h = ErasedHandler::new(echo);
        assert!(h.payload_type.ends_with("Email"));
        assert_eq!(h.dependencies, vec![DepInfo::of::<String>()]);
        let job = Job::for_test(serde_json::json!({"to": "ada"}));
        let out = h.run(job, &deps_with_prefix()).await.unwrap();
        assert_eq!(out, serde_json::json!("to:ada"));
    }

    #[test]
    fn handlers_say_whether_their_payload_takes_null() {
        async fn unit(_job: Job<()>) -> Result<(), JobError> {
            Ok(())
        }
        async fn maybe(_job: Job<Option<u32>>) -> Result<(), JobError> {
            Ok(())
        }
        assert!(ErasedHandler::new(unit).accepts_null);
        assert!(ErasedHandler::new(maybe).accepts_null);
        assert!(!ErasedHandler::new(echo).accepts_null);
    }

    #[tokio::test]
    async fn wrong_payload_is_unrecoverable_with_the_serde_message() {
        let h = ErasedHandler::new(echo);
        let job = Job::for_test(serde_json::json!({"too": "ada"}));
        let err = h.run(job, &deps_with_prefix()).await.unwrap_err();
        assert!(!err.is_retryable());
        assert!(
            err.message().contains("missing field `to`"),
            "{}",
            err.message()
        );
        assert!(err.message().contains("Email"), "{}", err.message());
    }

    #[tokio::test]
    async fn an_opened_payload_is_read_from_its_text_and_its_misfits_say_nothing_of_it() {
        let h = ErasedHandler::new(echo);
        let deps = deps_with_prefix();
        let opened = |text: &str| {
            h.run_opened(
                Job::for_test(serde_json::Value::Null),
                text.as_bytes().to_vec(),
                &deps,
            )
        };
        let out = opened(r#"{"to": "ada"}"#).await.unwrap();
        assert_eq!(out, serde_json::json!("to:ada"));
        // Serde's reason would quote the payload: withheld.
        let err = opened(r#"{"to": 42, "secret": "ada@example.com"}"#)
            .await
            .unwrap_err();
        assert!(!err.is_retryable());
        assert!(err.message().contains("withheld"), "{}", err.message());
        assert!(!err.message().contains("42"), "{}", err.message());
        // Text that is not JSON is a peer's bug, said as such.
        let err = opened("NaN").await.unwrap_err();
        assert!(!err.is_retryable());
        assert!(err.message().contains("not JSON"), "{}", err.message());
    }

    #[tokio::test]
    async fn missing_dependency_is_named() {
        let h = ErasedHandler::new(echo);
        let job = Job::for_test(serde_json::json!({"to": "ada"}));
        let err = h.run(job, &Arc::new(Deps::default())).await.unwrap_err();
        assert!(
            err.message().contains("alloc::string::String"),
            "{}",
            err.message()
        );
    }
}
