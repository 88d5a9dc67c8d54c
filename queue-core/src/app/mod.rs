//! `QueueApp`: the one object that holds the connection, the defaults, the
//! dependencies and the registered processors (the `BullModule.forRoot` equivalent).

mod builder;
mod claims;
mod from_app;
mod health;
mod keys;
#[cfg(feature = "metrics")]
mod metrics;
#[cfg(feature = "sqlx")]
mod outbox;
mod registrations;
mod renames;
mod typed;

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::broadcast;

pub use crate::deps::Dep;
pub use builder::QueueAppBuilder;
pub use from_app::FromApp;
pub use registrations::Registrations;

use crate::backend::{Backend, EngineQueueEvents, WorkerSettings, QUEUE_EVENTS};
use crate::deps::Deps;
use crate::error::{Error, PayloadError};
use crate::events::{QueueEvents, WorkerEvent, WorkerEvents};
use crate::handler::QueuePlan;
use crate::options::{BackoffRegistry, Retention};
use crate::queue::{ProducerSettings, Queue, QueueShared};
use crate::registry::{QueueListenerRecord, WorkerListenerRecord};
use crate::worker::{AttemptTracker, Dispatcher, ListenerSpec, Listeners, Workers};

/// Redis URL used when none is given.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// BullMQ's default key prefix.
pub const DEFAULT_PREFIX: &str = "bull";
/// How long a queue call waits for Redis unless configured otherwise.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(3);
/// Largest payload `add` accepts unless configured otherwise (serialized JSON bytes).
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 512 * 1024;

/// The configured queue system: connection, prefix, default job options, dependencies,
/// processors. Cheap to clone; every clone shares one Redis connection.
///
/// ```no_run
/// use std::time::Duration;
/// use queue_core::prelude::*;
///
/// #[derive(Serialize, Deserialize)]
/// struct WelcomeEmail { to: String }
///
/// struct Mailer;
///
/// async fn send_welcome(job: Job<WelcomeEmail>, _mailer: Dep<Mailer>) -> Result<(), JobError> {
///     println!("welcome, {}", job.data.to);
///     Ok(())
/// }
///
/// # async fn demo() -> queue_core::Result<()> {
/// let app = QueueApp::builder()
///     .redis("redis://127.0.0.1:6379")
///     .provide(Mailer)
///     .processor(Processor::new("email").concurrency(5).job("welcome", send_welcome))
///     .build()
///     .await?;
///
/// let email = app.queue::<WelcomeEmail>("email")?;
/// email.add("welcome", WelcomeEmail { to: "ada@example.com".into() }, JobOptions::new()).await?;
///
/// let workers = app.start_workers().await?;
/// workers.shutdown(Duration::from_secs(30)).await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct QueueApp {
    pub(crate) inner: Arc<AppInner>,
}

#[derive(Debug)]
pub(crate) struct AppInner {
    backend: Backend,
    plans: Vec<QueuePlan>,
    deps: Arc<Deps>,
    producer: ProducerSettings,
    backoffs: BackoffRegistry,
    queues: Mutex<HashMap<String, Arc<QueueShared>>>,
    worker_events: broadcast::Sender<WorkerEvent>,
    /// Each listener with the queue it listens to (after renames).
    worker_listeners: Vec<(String, &'static WorkerListenerRecord)>,
    queue_listeners: Vec<(String, &'static QueueListenerRecord)>,
    renames: renames::Renames,
    /// The job types the declarations linked into this binary declare.
    declared: Vec<crate::contract::DeclaredJob>,
    /// Queues with a processor or an `#[inject_queue]` producer in this app.
    registered_queues: std::collections::BTreeSet<String>,
    /// The relay `build` started, if the app has an outbox.
    #[cfg(feature = "sqlx")]
    relay: Mutex<Option<crate::relay::Relay>>,
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::Metrics>,
    /// The signs of life of the workers this process runs, for the liveness probe.
    pulses: Arc<crate::worker::PulseBoard>,
    /// This process's record in the roster, when it keeps one.
    roster: Option<Arc<crate::health::Roster>>,
    /// The Redis memory guard, unless Redis hides its memory (or the app is inline).
    memory: Option<Arc<crate::health::MemoryWatch>>,
    /// Where the keyring comes from, when it is read again on a rotation.
    key_source: Option<Arc<dyn crate::encryption::KeySource>>,
}

impl QueueApp {
    /// A typed producer for `name` (or the name the app renamed it to). Cheap: handles
    /// are cached and share the connection.
    pub fn queue<T>(&self, name: &str) -> Result<Queue<T>, Error> {
        self.inner.queue(name)
    }

    /// Starts a worker for every queue with a registered processor, and every
    /// `#[on_worker_event]` / `#[on_queue_event]` listener.
    pub async fn start_workers(&self) -> Result<Workers, Error> {
        self.start(&self.processor_queues(), |_| true, None).await
    }

    /// Like [`start_workers`](Self::start_workers), but no job is fetched before `ready`
    /// resolves: the app says when it is ready (its database migrated, its caches
    /// warm). The checks run and the event listeners start now, so a mistake is
    /// reported at once; [`Workers::started`] waits for the workers themselves, and a
    /// shutdown before `ready` starts nothing.
    ///
    /// ```no_run
    /// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
    /// let (ready, is_ready) = tokio::sync::oneshot::channel::<()>();
    /// let mut workers = app.start_workers_when(async move { let _ = is_ready.await; }).await?;
    /// // ... migrate the database, warm the caches ...
    /// let _ = ready.send(());
    /// workers.started().await?;
    /// # Ok(()) }
    /// ```
    pub async fn start_workers_when<F>(&self, ready: F) -> Result<Workers, Error>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.start(&self.processor_queues(), |_| true, Some(Box::pin(ready)))
            .await
    }

    /// Stops the app in the order its parts depend on each other: the workers first
    /// (they stop fetching, and their running jobs finish within `deadline`, free to add
    /// follow-up jobs), their event listeners with them, then the outbox relay (after its
    /// batch in flight; rows left wait for the next relay). The connection closes when
    /// the last clone of the app is dropped, so nothing a running job uses is closed
    /// under it.
    pub async fn shutdown(
        &self,
        workers: Workers,
        deadline: Duration,
    ) -> crate::worker::ShutdownReport {
        let report = workers.shutdown(deadline).await;
        #[cfg(feature = "sqlx")]
        self.stop_relay().await;
        report
    }

    /// Starts workers for these queues only (a worker-only process for some queues),
    /// with the event listeners of these queues. A queue without a processor in this
    /// app is refused, naming the ones there are.
    pub async fn start_workers_for(&self, queues: &[&str]) -> Result<Workers, Error> {
        let queues: Vec<&str> = queues
            .iter()
            .map(|q| self.inner.renames.actual(q))
            .collect();
        self.start(&queues, |q| queues.contains(&q), None).await
    }

    async fn start(
        &self,
        queues: &[&str],
        listen_to: impl Fn(&str) -> bool,
        ready: Option<futures::future::BoxFuture<'static, ()>>,
    ) -> Result<Workers, Error> {
        let deps = self.handler_deps();
        let producer = &self.inner.producer;
        let mut dispatchers = Vec::new();
        for queue in queues {
            let Some(plan) = self.plan(queue) else {
                return Err(Error::invalid(
                    "queues",
                    format!(
                        "no processor is registered for queue `{queue}`; registered: {}",
                        self.processor_queues().join(", ")
                    ),
                ));
            };
            let defaults = producer.defaults_for(&plan.queue);
            let pulse = Arc::new(crate::worker::WorkerPulse::new(
                &plan.queue,
                plan.options.concurrency,
                // BullMQ's default lock when the processor sets none.
                plan.options
                    .lock_duration
                    .unwrap_or(Duration::from_secs(30)),
            ));
            self.inner.pulses.add(&pulse);
            let settings = WorkerSettings {
                queue: plan.queue.clone(),
                options: plan.options.clone(),
                command_timeout: self.inner.producer.command_timeout,
                backoff: self.inner.backoffs.as_lookup(),
                // The app's default retention, else our bounded one, for the jobs that
                // set none (ours, or other producers').
                keep_completed: defaults
                    .remove_on_complete
                    .unwrap_or(Retention::DEFAULT_COMPLETED),
                keep_failed: defaults.remove_on_fail.unwrap_or(Retention::DEFAULT_FAILED),
                reads_children: {
                    let plan = plan.clone();
                    Arc::new(move |name: &str| {
                        plan.handler_for(name)
                            .is_some_and(|planned| planned.handler.reads_children)
                    })
                },
                on_renewed: {
                    let pulse = pulse.clone();
                    Arc::new(move || pulse.renewed())
                },
                // A batch worker's slots hold batches: its pulse counts them.
                on_batch: {
                    let pulse = pulse.clone();
                    Arc::new(move |started| match started {
                        true => pulse.took(),
                        false => pulse.ended(),
                    })
                },
            };
            #[cfg(feature = "metrics")]
            let metrics = self
                .inner
                .metrics
                .as_ref()
                .map(|m| m.for_queue(&plan.queue, plan.options.concurrency));
            let tracker = AttemptTracker::new(plan.queue.clone(), self.inner.worker_events.clone())
                .with_sealer(&plan.sealer);
            #[cfg(feature = "metrics")]
            let tracker = tracker.with_metrics(metrics.clone());
            let dispatcher = Dispatcher {
                pulse,
                #[cfg(feature = "metrics")]
                metrics,
                backoff: self.inner.backoffs.as_lookup(),
                span_name: crate::trace::consumer_span_name(&plan.queue),
                plan: plan.clone(),
                deps: deps.clone(),
                tracker: Arc::new(tracker),
            };
            dispatchers.push((settings, dispatcher));
        }
        // Subscribe before any worker starts, so no event is missed.
        let worker_listeners = self
            .inner
            .worker_listeners
            .iter()
            .filter(|(queue, _)| listen_to(queue))
            .map(|(queue, r)| ListenerSpec {
                queue: queue.clone(),
                event: r.event,
                label: r.label,
                call: r.call,
            })
            .collect();
        let queue_listeners = self
            .inner
            .queue_listeners
            .iter()
            .filter(|(queue, _)| listen_to(queue))
            .map(|(queue, r)| ListenerSpec {
                queue: queue.clone(),
                event: r.event,
                label: r.label,
                call: r.call,
            })
            .collect();
        let producer = &self.inner.producer;
        let listeners = Listeners::start(
            &self.inner.backend,
            worker_listeners,
            self.worker_events(),
            queue_listeners,
            &deps,
            |queue| producer.sealer_for(queue),
        )
        .await?;
        let workers = match ready {
            None => Workers::start(&self.inner.backend, dispatchers, listeners).await?,
            Some(ready) => {
                Workers::deferred(self.inner.backend.clone(), dispatchers, listeners, ready)
            }
        };
        if let (Some(roster), Ok(conn)) = (
            &self.inner.roster,
            self.inner.backend.redis("process_roster"),
        ) {
            roster.start(conn, &self.inner.pulses).await;
        }
        Ok(workers)
    }

    /// Whether this app knows `queue`: it has a processor or an `#[inject_queue]` producer
    /// for it, declared it external ([`QueueAppBuilder::external_queue`]), or a handle to
    /// it was made with [`QueueApp::queue`]. Status routes serve
    /// only these.
    pub fn knows_queue(&self, queue: &str) -> bool {
        self.inner.registered_queues.contains(queue)
            || self
                .inner
                .queues
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(queue)
    }

    /// Every queue this app knows (see [`QueueApp::knows_queue`]), sorted.
    pub fn known_queues(&self) -> Vec<String> {
        let mut known = self.inner.registered_queues.clone();
        known.extend(
            self.inner
                .queues
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .keys()
                .cloned(),
        );
        known.into_iter().collect()
    }

    /// The app's metrics, if it records them ([`QueueAppBuilder::metrics`]).
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics(&self) -> Option<&crate::metrics::Metrics> {
        self.inner.metrics.as_ref()
    }

    /// The job names this app's handlers of `queue` claim by name, and whether a
    /// catch-all handler takes every other name. Empty and `false` for a queue this app
    /// does not process.
    pub fn job_names(&self, queue: &str) -> (Vec<&str>, bool) {
        match self.plan(queue) {
            Some(plan) => (
                plan.by_name.keys().map(String::as_str).collect(),
                plan.fallback.is_some(),
            ),
            None => (Vec::new(), false),
        }
    }

    /// Checks `data` against the payload type of the handler this app has for
    /// `job_name` on `queue`, before an add from untyped input (a form, another
    /// system's JSON). Fails when the job is declared with a JSON Schema that the data
    /// does not follow (with the place), when no handler of this app takes the job, or
    /// when the data does not deserialize into its type, with serde's reason.
    ///
    /// ```
    /// # async fn demo() -> queue_core::Result<()> {
    /// use queue_core::{Job, JobError, error::PayloadError, Processor, QueueApp};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Welcome { to: String }
    /// async fn send(job: Job<Welcome>) -> Result<(), JobError> { let _ = &job.data.to; Ok(()) }
    ///
    /// let app = QueueApp::builder()
    ///     .processor(Processor::new("email").job("welcome", send))
    ///     .build()
    ///     .await?;
    /// assert!(app.check_payload("email", "welcome", &serde_json::json!({"to": "a@b.c"})).is_ok());
    /// let wrong = app.check_payload("email", "welcome", &serde_json::json!({"too": 1}));
    /// assert!(matches!(wrong, Err(PayloadError::DoesNotFit { .. })));
    /// # Ok(()) }
    /// ```
    pub fn check_payload(
        &self,
        queue: &str,
        job_name: &str,
        data: &serde_json::Value,
    ) -> Result<(), PayloadError> {
        let schema = self
            .declared_job(queue, job_name)
            .and_then(|job| Some((job.payload_type, job.payload_schema.as_ref()?)));
        if let Some((payload_type, schema)) = schema {
            crate::contract::check_schema(schema, data).map_err(|e| {
                PayloadError::SchemaMismatch {
                    payload_type,
                    at: e.at,
                    reason: e.reason,
                }
            })?;
        }
        let planned = self
            .plan(queue)
            .and_then(|plan| plan.handler_for(job_name))
            .ok_or_else(|| PayloadError::NoHandler {
                queue: queue.to_owned(),
                job_name: job_name.to_owned(),
            })?;
        (planned.handler.check)(data).map_err(|reason| PayloadError::DoesNotFit {
            payload_type: planned.handler.payload_type,
            reason,
        })
    }

    /// The queues that have a processor in this app, sorted.
    pub fn processor_queues(&self) -> Vec<&str> {
        self.inner.plans.iter().map(|p| p.queue.as_str()).collect()
    }

    /// A subscription to this process's worker events.
    pub fn worker_events(&self) -> WorkerEvents {
        WorkerEvents::new(self.inner.worker_events.subscribe())
    }

    /// Adds a flow: `root` and its descendants (see [`FlowJob`](crate::FlowJob)), across
    /// queues, atomically. Every job is checked as `add` checks it before anything is
    /// written; a bad one refuses the flow, naming it. A parent starts in
    /// `waiting-children` and runs once its children are done, or as their failure
    /// policies say.
    ///
    /// A root whose `job_id` exists already adds nothing: the answer is that job,
    /// marked `duplicate`, without children. A job below the root whose `job_id`
    /// exists is taken into the flow when it can still end for its new parent (a
    /// completed one gives the parent its value, a pending one is waited for), and is
    /// answered `duplicate`, in its state. Otherwise nothing of the flow is written,
    /// and the error says which job and why ([`FlowError`](crate::flow::FlowError)): one that
    /// failed, one another parent waits for, one the flow would give children, or one
    /// id named twice. The checks and the write are one optimistic transaction, so a
    /// concurrent add cannot slip between them.
    pub async fn add_flow(
        &self,
        root: crate::flow::FlowJob,
    ) -> Result<crate::flow::AddedFlow, Error> {
        crate::flow::add(root).await
    }

    /// Reads `queue`'s Redis event stream (events from every process), from now on.
    pub async fn queue_events(&self, queue: &str) -> Result<QueueEvents, Error> {
        let conn = self.inner.backend.redis(QUEUE_EVENTS)?;
        Ok(QueueEvents::new(Box::new(
            EngineQueueEvents::open(conn, queue).await?,
        )))
    }

    /// How many queues this app reads the event stream of for its job watchers (waits,
    /// live streams, [`JobWatcher`](crate::watch::JobWatcher)s), and how many watchers there
    /// are: one reader per queue, however many watch.
    ///
    /// ```no_run
    /// # fn demo(app: queue_core::QueueApp) {
    /// let stats = app.watch_stats();
    /// println!("{} waiters on {} readers", stats.watchers, stats.readers);
    /// # }
    /// ```
    pub fn watch_stats(&self) -> crate::watch::WatchStats {
        self.inner.producer.watch.stats()
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        self.inner.backend.prefix()
    }

    /// The Redis URL, password redacted.
    pub fn redis_url(&self) -> &str {
        self.inner.backend.display_url()
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    /// How long a queue call waits for Redis.
    pub(crate) fn command_timeout(&self) -> Duration {
        self.inner.producer.command_timeout
    }

    /// The handler this app has for job `name` on `queue` (after renames), if any.
    pub(crate) fn planned(
        &self,
        queue: &str,
        name: &str,
    ) -> Option<(&QueuePlan, &crate::handler::PlannedHandler)> {
        self.plan(self.inner.renames.actual(queue))
            .and_then(|plan| plan.handler_for(name).map(|planned| (plan, planned)))
    }

    /// The worker plan of `queue` (its name in Redis), if this app processes it.
    fn plan(&self, queue: &str) -> Option<&QueuePlan> {
        crate::handler::plan_of(&self.inner.plans, queue)
    }

    /// What handlers are given: the provided dependencies, and this app.
    pub(crate) fn handler_deps(&self) -> Arc<Deps> {
        let mut deps = (*self.inner.deps).clone();
        deps.insert(Arc::new(self.clone()));
        Arc::new(deps)
    }
}

impl AppInner {
    /// A handle on queue `name` (or the name the app renamed it to).
    fn queue<T>(&self, name: &str) -> Result<Queue<T>, Error> {
        let name = self.renames.actual(name);
        if name.is_empty() || name.contains(':') {
            return Err(Error::invalid(
                "queue",
                format!("`{name}` must be non-empty and without ':' (BullMQ's key separator)"),
            ));
        }
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        // Looked up before inserting: handles are made per request (`#[inject_queue]`
        // extractors), and the queue is nearly always known already.
        let shared = match queues.get(name) {
            Some(shared) => shared.clone(),
            None => {
                // Checked once, when the queue is first used: a cached queue passed.
                if self.backend.is_cluster() {
                    crate::connection::check_tags(self.backend.prefix(), [name])?;
                }
                queues
                    .entry(name.to_owned())
                    .or_insert_with(|| {
                        Arc::new(QueueShared::new(name, &self.backend, self.producer.clone()))
                    })
                    .clone()
            }
        };
        Ok(Queue::new(shared, PhantomData))
    }
}
