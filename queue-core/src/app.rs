//! `QueueApp`: the one object that holds the connection, the defaults, the
//! dependencies and the registered processors (the `BullModule.forRoot` equivalent).

use std::any::TypeId;
use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::broadcast;

use crate::deps::Deps;
use crate::engine::{BackoffFn, Connection, EngineQueueEvents, WorkerSettings};
use crate::error::Error;
use crate::events::{local, QueueEvents, WorkerEvent, WorkerEvents};
use crate::options::{BackoffContext, JobOptions};
use crate::processor::Processor;
use crate::queue::{ProducerSettings, Queue, QueueShared};
use crate::registry::{
    check_registrations, merge_processors, processor_from_record, QueueListenerRecord, QueuePlan,
    Registered, RegistryError, WorkerListenerRecord,
};
use crate::tls::Tls;
use crate::worker::{AttemptTracker, Dispatcher, Listeners, Workers};

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
    inner: Arc<AppInner>,
}

#[derive(Debug)]
struct AppInner {
    conn: Connection,
    plans: Vec<QueuePlan>,
    deps: Arc<Deps>,
    producer: ProducerSettings,
    backoffs: BackoffRegistry,
    queues: Mutex<HashMap<String, Arc<QueueShared>>>,
    worker_events: broadcast::Sender<WorkerEvent>,
    worker_listeners: Vec<&'static WorkerListenerRecord>,
    queue_listeners: Vec<&'static QueueListenerRecord>,
    /// Queues with a processor or an `#[inject_queue]` producer in this app.
    registered_queues: std::collections::BTreeSet<String>,
}

/// Which `#[processor]`, `#[inject_queue]` and event-listener registrations linked into
/// this binary an app uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Registrations {
    /// All of them (the default).
    #[default]
    All,
    /// None: only what is given to the builder explicitly.
    None,
    /// Those of these queues only (several apps in one binary, e.g. tests).
    Queues(Vec<String>),
}

impl Registrations {
    fn collect(&self) -> Registered {
        match self {
            Registrations::All => Registered::collect(|_| true),
            Registrations::None => Registered::default(),
            Registrations::Queues(queues) => Registered::collect(|q| queues.iter().any(|k| k == q)),
        }
    }
}

/// What `build` derives from the builder before connecting.
struct Plan {
    queues: Vec<QueuePlan>,
    deps: Deps,
    registered: Registered,
}

type StrategyFn = Arc<dyn Fn(&BackoffContext<'_>) -> Option<Duration> + Send + Sync>;

/// Custom backoff strategies by name.
#[derive(Clone, Default)]
pub(crate) struct BackoffRegistry(BTreeMap<String, StrategyFn>);

impl BackoffRegistry {
    /// Refuses a custom backoff name this app does not know: the job could never retry.
    pub(crate) fn check(&self, opts: &JobOptions) -> Result<(), Error> {
        match &opts.backoff {
            Some(crate::Backoff::Custom(name)) if !self.0.contains_key(name) => Err(Error::invalid(
                "backoff",
                format!(
                    "no custom backoff strategy `{name}` is registered on the app (registered: {}); add it with `.backoff_strategy(..)`",
                    self.names()
                ),
            )),
            _ => Ok(()),
        }
    }

    fn names(&self) -> String {
        let names: Vec<&str> = self.0.keys().map(String::as_str).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }

    fn as_engine_fn(&self) -> Option<BackoffFn> {
        if self.0.is_empty() {
            return None;
        }
        let strategies = self.0.clone();
        Some(Arc::new(
            move |name: &str, ctx: &BackoffContext<'_>| match strategies.get(name) {
                Some(strategy) => strategy(ctx),
                None => {
                    tracing::error!(
                        strategy = name,
                        "unknown custom backoff strategy; the job will not be retried"
                    );
                    None
                }
            },
        ))
    }
}

impl std::fmt::Debug for BackoffRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// Builds a [`QueueApp`]; see there for an example.
#[derive(Debug)]
#[must_use = "call .build().await to connect"]
pub struct QueueAppBuilder {
    url: String,
    tls: Option<Tls>,
    prefix: String,
    defaults: JobOptions,
    deps: Deps,
    processors: Vec<Processor>,
    registrations: Registrations,
    backoffs: BackoffRegistry,
    connect_timeout: Duration,
    command_timeout: Duration,
    max_payload_bytes: usize,
}

impl Default for QueueAppBuilder {
    fn default() -> Self {
        QueueAppBuilder {
            url: DEFAULT_REDIS_URL.to_owned(),
            tls: None,
            prefix: DEFAULT_PREFIX.to_owned(),
            defaults: JobOptions::default(),
            deps: Deps::default(),
            processors: Vec::new(),
            registrations: Registrations::All,
            backoffs: BackoffRegistry::default(),
            connect_timeout: Duration::from_secs(5),
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }
}

impl QueueAppBuilder {
    /// The Redis URL: `redis://[user:password@]host:port[/db]`, or `rediss://` for TLS.
    pub fn redis(mut self, url: impl Into<String>) -> Self {
        self.url = url.into();
        self
    }

    /// Certificates for a `rediss://` URL: a private CA, a client certificate.
    pub fn tls(mut self, tls: Tls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The key prefix (default `bull`, as in Node BullMQ). Use a hash tag such as
    /// `{bull}` on Redis Cluster.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Options applied to every job that does not set them itself.
    pub fn default_job_options(mut self, defaults: JobOptions) -> Self {
        self.defaults = defaults;
        self
    }

    /// Makes `value` available to handlers that take a `Dep<T>`. (`Dep<QueueApp>` is
    /// always available, for handlers that add follow-up jobs.)
    pub fn provide<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.deps.insert(Arc::new(value));
        self
    }

    /// Like [`provide`](Self::provide), for a value already shared elsewhere.
    pub fn provide_arc<T: Send + Sync + 'static>(mut self, value: Arc<T>) -> Self {
        self.deps.insert(value);
        self
    }

    /// Registers a queue's handlers.
    pub fn processor(mut self, processor: Processor) -> Self {
        self.processors.push(processor);
        self
    }

    /// Which attribute-macro registrations of this binary to use (default: all).
    pub fn registrations(mut self, registrations: Registrations) -> Self {
        self.registrations = registrations;
        self
    }

    /// Registers a custom backoff, used by jobs added with `Backoff::custom(name)`.
    /// Return `None` to fail the job without further retries.
    pub fn backoff_strategy<F>(mut self, name: impl Into<String>, strategy: F) -> Self
    where
        F: Fn(&BackoffContext<'_>) -> Option<Duration> + Send + Sync + 'static,
    {
        self.backoffs.0.insert(name.into(), Arc::new(strategy));
        self
    }

    /// How long `build` waits for Redis to answer (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a queue call (`add`, `get_job`, ...) waits for Redis before failing with
    /// [`Error::Timeout`] (default 3 s). Without it a call made while Redis is down waits
    /// out the connection's reconnect schedule.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// The largest serialized payload `add` accepts (default 512 KiB).
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    /// Runs the start-up checks without connecting: every registration problem at once.
    pub fn check(&self) -> Result<(), Error> {
        self.plan().map(drop)
    }

    fn plan(&self) -> Result<Plan, Error> {
        if self.prefix.is_empty() || self.prefix.contains(':') {
            return Err(Error::invalid(
                "prefix",
                format!("`{}` must be non-empty and without ':'", self.prefix),
            ));
        }
        self.defaults.validate()?;
        let registered = self.registrations.collect();
        let mut deps = self.deps.clone();
        // `Dep<QueueApp>` is always available: the workers get the app itself when they
        // start (holding it here would make the app own itself).
        deps.insert_any(TypeId::of::<QueueApp>(), Arc::new(()));
        // An impl-block processor's struct comes from `provide`, else from `Default`.
        for record in &registered.processors {
            if let Some((ty, maker)) = record.instance {
                if let (false, Some(make)) = (deps.contains_id((ty.id)()), maker()) {
                    deps.insert_any((ty.id)(), make());
                }
            }
        }
        let processors: Vec<Processor> = self
            .processors
            .iter()
            .cloned()
            .chain(
                registered
                    .processors
                    .iter()
                    .map(|r| processor_from_record(r)),
            )
            .collect();
        let mut problems = Vec::new();
        let queues = merge_processors(&processors, &deps, &mut problems);
        problems.extend(check_registrations(&queues, &registered));
        RegistryError::from_problems(problems)?;
        Ok(Plan {
            queues,
            deps,
            registered,
        })
    }

    /// Checks the registrations, connects and checks that Redis answers. Fails with a
    /// clear error (the URL, without password, and the cause) instead of hanging.
    pub async fn build(self) -> Result<QueueApp, Error> {
        let Plan {
            queues: plans,
            deps,
            registered,
        } = self.plan()?;
        let conn = Connection::open(
            &self.url,
            self.tls.as_ref(),
            &self.prefix,
            self.connect_timeout,
        )
        .await?;
        for plan in &plans {
            let names = plan.known_names();
            let catch_all = if plan.fallback.is_some() {
                " + catch-all"
            } else {
                ""
            };
            tracing::info!(queue = %plan.queue, jobs = %format!("{names}{catch_all}"), concurrency = plan.concurrency, "processor registered");
        }
        tracing::info!(
            url = conn.display_url(),
            prefix = conn.prefix(),
            "queue app connected"
        );
        let (worker_events, _) = broadcast::channel(local::CAPACITY);
        let registered_queues = plans
            .iter()
            .map(|p| p.queue.clone())
            .chain(registered.producers.iter().map(|p| p.queue.to_owned()))
            .collect();
        Ok(QueueApp {
            inner: Arc::new(AppInner {
                conn,
                plans,
                deps: Arc::new(deps),
                producer: ProducerSettings {
                    defaults: self.defaults,
                    max_payload_bytes: self.max_payload_bytes,
                    backoffs: self.backoffs.clone(),
                    command_timeout: self.command_timeout,
                },
                backoffs: self.backoffs,
                queues: Mutex::new(HashMap::new()),
                worker_events,
                registered_queues,
                worker_listeners: registered.worker_listeners,
                queue_listeners: registered.queue_listeners,
            }),
        })
    }
}

impl QueueApp {
    /// Starts configuring an app.
    pub fn builder() -> QueueAppBuilder {
        QueueAppBuilder::default()
    }

    /// A typed producer for `name`. Cheap: handles are cached and share the connection.
    pub fn queue<T: Serialize>(&self, name: &str) -> Result<Queue<T>, Error> {
        if name.is_empty() || name.contains(':') {
            return Err(Error::invalid(
                "queue",
                format!("`{name}` must be non-empty and without ':' (BullMQ's key separator)"),
            ));
        }
        let mut queues = self
            .inner
            .queues
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let shared = queues
            .entry(name.to_owned())
            .or_insert_with(|| {
                Arc::new(QueueShared::new(
                    name,
                    self.inner.conn.clone(),
                    self.inner.producer.clone(),
                ))
            })
            .clone();
        Ok(Queue::new(shared, PhantomData))
    }

    /// Starts a worker for every queue with a registered processor, and every
    /// `#[on_worker_event]` / `#[on_queue_event]` listener.
    pub async fn start_workers(&self) -> Result<Workers, Error> {
        let all: Vec<&str> = self.inner.plans.iter().map(|p| p.queue.as_str()).collect();
        self.start(&all, |_| true).await
    }

    /// Starts workers for these queues only (a worker-only process for some queues),
    /// with the event listeners of these queues. A queue without a processor in this
    /// app is refused, naming the ones there are.
    pub async fn start_workers_for(&self, queues: &[&str]) -> Result<Workers, Error> {
        self.start(queues, |q| queues.contains(&q)).await
    }

    async fn start(
        &self,
        queues: &[&str],
        listen_to: impl Fn(&str) -> bool,
    ) -> Result<Workers, Error> {
        let mut deps = (*self.inner.deps).clone();
        deps.insert(Arc::new(self.clone()));
        let deps = Arc::new(deps);
        let mut dispatchers = Vec::new();
        for queue in queues {
            let Some(plan) = self.inner.plans.iter().find(|p| p.queue == *queue) else {
                return Err(Error::invalid(
                    "queues",
                    format!(
                        "no processor is registered for queue `{queue}`; registered: {}",
                        self.processor_queues().join(", ")
                    ),
                ));
            };
            let settings = WorkerSettings {
                queue: plan.queue.clone(),
                concurrency: plan.concurrency,
                lock_duration: plan.lock_duration,
                limiter: plan.limiter,
                backoff: self.inner.backoffs.as_engine_fn(),
            };
            let dispatcher = Dispatcher {
                plan: plan.clone(),
                deps: deps.clone(),
                tracker: Arc::new(AttemptTracker::new(
                    plan.queue.clone(),
                    self.inner.worker_events.clone(),
                )),
            };
            dispatchers.push((settings, dispatcher));
        }
        // Subscribe before any worker starts, so no event is missed.
        let listeners = Listeners::start(
            &self.inner.conn,
            self.inner
                .worker_listeners
                .iter()
                .copied()
                .filter(|r| listen_to(r.queue))
                .collect(),
            self.worker_events(),
            self.inner
                .queue_listeners
                .iter()
                .copied()
                .filter(|r| listen_to(r.queue))
                .collect(),
        )
        .await?;
        Workers::start(&self.inner.conn, dispatchers, listeners).await
    }

    /// Whether this app knows `queue`: it has a processor or an `#[inject_queue]` producer
    /// for it, or a handle to it was made with [`QueueApp::queue`]. Status routes serve
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

    /// The queues that have a processor in this app, sorted.
    pub fn processor_queues(&self) -> Vec<&str> {
        self.inner.plans.iter().map(|p| p.queue.as_str()).collect()
    }

    /// A subscription to this process's worker events.
    pub fn worker_events(&self) -> WorkerEvents {
        WorkerEvents::new(self.inner.worker_events.subscribe())
    }

    /// Reads `queue`'s Redis event stream (events from every process), from now on.
    pub async fn queue_events(&self, queue: &str) -> Result<QueueEvents, Error> {
        Ok(QueueEvents::new(
            EngineQueueEvents::open(&self.inner.conn, queue).await?,
        ))
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        self.inner.conn.prefix()
    }

    /// The Redis URL, password redacted.
    pub fn redis_url(&self) -> &str {
        self.inner.conn.display_url()
    }

    pub(crate) fn connection(&self) -> &Connection {
        &self.inner.conn
    }
}
