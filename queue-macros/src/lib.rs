//! Attribute macros for `queue-core`; use them through `queue_core` (they are
//! re-exported there, and in `queue_core::prelude`), not from this crate directly.
//!
//! The quick start's worker side: a declared queue, a processor and a listener.
//! `queue_core`'s crate page has the whole program, and `queue_axum`'s the route that
//! adds the job and answers 202.
//!
//! ```no_run
//! use std::time::Duration;
//! use queue_core::prelude::*;
//!
//! #[derive(Serialize, Deserialize)]
//! struct WelcomeEmail { to: String }
//!
//! #[job_queue("email")]
//! enum Email {
//!     #[job("welcome")]
//!     Welcome(WelcomeEmail),
//! }
//!
//! #[processor(Email, concurrency = 5, timeout = "30s")]
//! async fn send_welcome(job: Job<WelcomeEmail>) -> Result<(), JobError> {
//!     println!("welcome, {}", job.data.to);
//!     Ok(())
//! }
//!
//! #[on_worker_event(Email, failed)]
//! async fn gave_up(event: WorkerEvent) {
//!     if let WorkerEvent::Failed { job_id, is_final: true, .. } = event {
//!         eprintln!("job {job_id} gave up");
//!     }
//! }
//!
//! # async fn demo() -> queue_core::Result<()> {
//! let app = QueueApp::builder().build().await?; // collects and checks the registrations
//! let workers = app.start_workers().await?;
//! app.add_job(WelcomeEmail { to: "ada@example.com".into() }, JobOptions::new()).await?;
//! workers.shutdown(Duration::from_secs(30)).await;
//! # Ok(()) }
//! ```
//!
//! Each expansion re-emits the user's item, adds spanned compile-time checks, and
//! submits one static record (through `queue_core::__private`) that `QueueApp::build`
//! reads, checks and runs. Every decision lives in `queue-core`.

mod args;
mod crate_path;
mod diagnostics;
mod inject_queue;
mod job_queue;
mod listener;
mod processor;

use proc_macro::TokenStream;

/// With `QUEUE_MACROS_DEBUG` set, prints each expansion to stderr at compile time.
fn debug(attribute: &str, expansion: proc_macro2::TokenStream) -> TokenStream {
    if std::env::var_os("QUEUE_MACROS_DEBUG").is_some() {
        eprintln!("#[{attribute}] expands to:\n{expansion}\n");
    }
    expansion.into()
}

/// Registers an `async fn(Job<T>, Dep<A>, ..) -> Result<R, JobError>` as the handler of
/// a queue, or an `impl` block whose `#[job("name")]` methods handle one job name each.
///
/// The queue is a string literal, or a queue type declared with `#[job_queue]`
/// (`#[processor(Email)]`: each handler's job is the one its payload type declares).
///
/// Options: `concurrency = 5`, `job = "welcome"` (on a fn of a queue named by string:
/// the job name it handles; default every name nobody else claims), `timeout = "30s"`,
/// `lock_duration = "30s"`, `limiter(max = 10, per = "1s")`, `per_minute_metrics = 1440`,
/// `also_serve = ["email-eu"]` (more queues, the same handlers), `groups` (fair groups,
/// `Processor::groups`), `batch(size = 100, wait = "20ms")` (a batch handler,
/// `Processor::batch`), `crate = "path::to::queue_core"`.
///
/// `batch(..)` goes on an `async fn(Batch<T>, Dep<A>, ..) -> Result<BatchResult,
/// JobError>`: it gets up to `size` jobs a call (1 to 1,000), or those that arrived
/// within `wait` after the first (none by default), and handles every job name of its
/// queue (of a declared queue, the job its payload declares); `concurrency` counts
/// batches and `timeout` is the batch's.
///
/// ```no_run
/// use queue_core::prelude::*;
///
/// #[derive(Serialize, Deserialize)]
/// struct Row { id: u64 }
///
/// #[processor("rows", concurrency = 2, batch(size = 100, wait = "20ms"))]
/// async fn insert(batch: Batch<Row>) -> Result<BatchResult, JobError> {
///     let ids: Vec<u64> = batch.iter().map(|job| job.data.id).collect();
///     // .. one INSERT for every row; a row that fails alone: `result.fail(job, ..)` ..
///     # let _ = ids;
///     Ok(BatchResult::new())
/// }
/// ```
///
/// `groups` alone makes the queue's groups take turns (`GroupLimits::new()`);
/// `groups(concurrency = 2)`, `groups(rate = "30/1m")` or both also limit each group,
/// over every worker: at most `concurrency` (at least 1) of its jobs at once, at most
/// `max` (at least 1) started per window with `rate = "<max>/<window>"`. The window is
/// written as `timeout` is (`"500ms"`, `"30s"`, `"1m"`, `"1h"`), or as a bare unit for one
/// of it (`"30/s"`).
///
/// ```no_run
/// use queue_core::prelude::*;
///
/// #[derive(Serialize, Deserialize)]
/// struct Render { page: u32 }
///
/// #[job_queue("reports")]
/// enum Reports {
///     #[job("render")]
///     Render(Render),
/// }
///
/// // Up to 20 jobs at once in this process, and each group (`JobOptions::group`) at
/// // most 2 at once and 30 started a minute, counted over every worker of the queue.
/// #[processor(Reports, concurrency = 20, groups(concurrency = 2, rate = "30/1m"))]
/// async fn render(job: Job<Render>) -> Result<(), JobError> {
///     let _ = job.data.page;
///     Ok(())
/// }
/// ```
#[proc_macro_attribute]
pub fn processor(attr: TokenStream, item: TokenStream) -> TokenStream {
    debug("processor", processor::processor(attr.into(), item.into()))
}

/// Marks a method of a `#[processor]` impl block as the handler of one job name:
/// `#[job("welcome")]`, or a bare `#[job]` in a processor of a declared queue
/// (`#[processor(Email)]`), whose job is the one its payload type declares. Anywhere
/// else it is an error. (Inside a `#[job_queue]` enum, `#[job("name", output = T)]`
/// declares a job; that enum's macro reads it.)
#[proc_macro_attribute]
pub fn job(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let error = syn::Error::new(
        proc_macro2::Span::call_site(),
        "#[job(\"..\")] only works on a method inside an `impl` block marked #[processor(\"queue\")]",
    );
    diagnostics::item_with_errors(item.into(), &error).into()
}

/// On a struct whose fields are `#[queue("email")] email: Queue<T>` (or, for a queue
/// declared with `#[job_queue]`, `email: Queue<Email>` with no `#[queue]`): builds it
/// from a `QueueApp` (`Service::from_app(&app)`) and registers each field as a producer
/// for the start-up checks. The NestJS service with `@InjectQueue`.
///
/// Options: `axum`, `axum = false` and `crate = "path::to::queue_core"`.
///
/// **In a crate that depends on `queue-axum`, the struct is also an axum extractor**: a
/// route takes it as an argument, as NestJS injects a service. The attribute reads the
/// crate's `Cargo.toml`: with `queue-axum` among its `[dependencies]` (under that name,
/// not optional) it implements axum's `FromRequestParts` for the struct, through
/// `queue_axum`; with `queue-axum` among its `[dev-dependencies]` only, in its tests.
/// Elsewhere it does not (the implementation would name a crate the crate cannot see),
/// and a route taking the struct fails at the `.route(..)` line with axum's "the
/// handler does not implement `Handler<_, _>`": depend on `queue-axum` by that name,
/// write `#[inject_queue(axum)]` (a renamed or optional dependency), or take
/// `queue_axum::Inject<Service>`. `#[inject_queue(axum = false)]` leaves the extractor
/// out, for a struct with an extractor of its own.
///
/// ```no_run
/// use queue_core::prelude::*;
///
/// #[derive(Serialize, Deserialize)]
/// struct WelcomeEmail { to: String }
///
/// #[inject_queue] // with queue-axum a dependency, also a route's argument
/// struct Producers {
///     #[queue("email")]
///     email: Queue<WelcomeEmail>,
/// }
///
/// # async fn demo(app: QueueApp) -> queue_core::Result<()> {
/// let producers = Producers::from_app(&app)?;
/// let to = "ada@example.com".to_owned();
/// producers.email.add("welcome", WelcomeEmail { to }, JobOptions::new()).await?;
/// # Ok(()) }
/// ```
///
/// `queue_axum`'s crate docs show it in a whole service.
#[proc_macro_attribute]
pub fn inject_queue(attr: TokenStream, item: TokenStream) -> TokenStream {
    debug(
        "inject_queue",
        inject_queue::inject_queue(attr.into(), item.into()),
    )
}

/// Declares a queue and the jobs it carries, on an enum whose variants wrap each job's
/// payload type:
///
/// ```
/// # use queue_core::prelude::*;
/// # #[derive(Serialize, Deserialize)] pub struct WelcomeEmail { pub to: String }
/// # #[derive(Serialize, Deserialize)] pub struct WeeklyDigest { pub week: u32 }
/// # #[derive(Serialize, Deserialize)] pub enum Delivery { Sent }
/// #[job_queue("email")]
/// pub enum Email {
///     #[job("welcome", output = Delivery)]
///     Welcome(WelcomeEmail),
///     #[job("digest")] // output `()`
///     Digest(WeeklyDigest),
/// }
/// ```
///
/// Each payload type then carries its queue, job name and output (`JobType`): adding it
/// needs no string, a processor takes it by type, and a mismatch is a compile error.
/// A job name or payload type declared twice in one queue is refused here.
#[proc_macro_attribute]
pub fn job_queue(attr: TokenStream, item: TokenStream) -> TokenStream {
    debug("job_queue", job_queue::job_queue(attr.into(), item.into()))
}

/// `#[on_worker_event("email", failed)]` on an `async fn(event: WorkerEvent)`: called for
/// each event of that kind from this process's workers of the queue.
///
/// NestJS's shape, `@OnWorkerEvent('failed') onFailed(job, err)`, takes the job with its
/// payload typed, then what happened to it, then any `Dep<T>`:
///
/// ```no_run
/// use queue_core::prelude::*;
///
/// #[derive(Serialize, Deserialize)]
/// pub struct WelcomeEmail { pub to: String }
/// #[derive(Serialize, Deserialize)]
/// pub struct Delivery { pub id: String }
///
/// #[job_queue("email")]
/// pub enum Email {
///     #[job("welcome", output = Delivery)]
///     Welcome(WelcomeEmail),
/// }
///
/// // Every failed attempt; with `final_only`, only those no retry follows.
/// #[on_worker_event(Email, failed, final_only)]
/// async fn lost(job: EventJob<WelcomeEmail>, failure: JobFailure) {
///     eprintln!("welcome email to {} lost: {}", job.data.to, failure.reason);
/// }
///
/// // The typed output, checked against the job's declaration.
/// #[on_worker_event(Email, completed)]
/// async fn sent(job: EventJob<WelcomeEmail>, delivery: Delivery) {
///     println!("welcome email to {} sent as {}", job.data.to, delivery.id);
/// }
///
/// // The progress value, as any deserializable type (`serde_json::Value` takes all).
/// #[on_worker_event(Email, progress)]
/// async fn moving(job: EventJob<WelcomeEmail>, percent: u32) {
///     println!("welcome email to {}: {percent}%", job.data.to);
/// }
/// ```
///
/// On a declared queue, `EventJob<T>` names the job type (`T: JobOf<Queue>`): the
/// listener hears of those jobs only. On a queue named by string it hears of every job
/// whose payload reads as `T` (`job = "name"` narrows it to one job name), and a job
/// whose payload does not fit is logged and skipped.
#[proc_macro_attribute]
pub fn on_worker_event(attr: TokenStream, item: TokenStream) -> TokenStream {
    debug(
        "on_worker_event",
        listener::listener(listener::Source::Worker, attr.into(), item.into()),
    )
}

/// `#[on_queue_event("email", completed)]` on an `async fn(event: QueueEvent)`: called for
/// each event of that kind in the queue's Redis event stream (every process).
#[proc_macro_attribute]
pub fn on_queue_event(attr: TokenStream, item: TokenStream) -> TokenStream {
    debug(
        "on_queue_event",
        listener::listener(listener::Source::Queue, attr.into(), item.into()),
    )
}
