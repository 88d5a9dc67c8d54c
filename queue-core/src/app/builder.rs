//! `QueueAppBuilder`: what an app is made of, the start-up checks, and the connection.

use std::any::TypeId;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;

use super::renames::Renames;
use super::{
    AppInner, QueueApp, Registrations, DEFAULT_COMMAND_TIMEOUT, DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_PREFIX, DEFAULT_REDIS_URL,
};
use crate::backend::{Backend, Connection, Endpoint, InlineRunner};
use crate::connection::Tls;
use crate::contract::{DeclaredJob, QueueType};
use crate::deps::Deps;
use crate::encryption::{KeySource, Keyring, Keys, Seals};
use crate::error::Error;
use crate::error::RegistryError;
use crate::events::local;
use crate::handler::QueuePlan;
use crate::health::{MemoryGuard, MemoryWatch};
use crate::options::BackoffRegistry;
use crate::options::{BackoffContext, JobOptions};
use crate::queue::ProducerSettings;
use crate::registry::{
    check_declarations, check_registrations, declared_jobs, merge_processors,
    processor_from_record, unknown_queues, Registered,
};
use crate::worker::Processor;

/// What `build` derives from the builder before connecting.
struct Plan {
    queues: Vec<QueuePlan>,
    deps: Deps,
    registered: Registered,
    declared: Vec<DeclaredJob>,
    /// The queues whose payloads are sealed (names in Redis).
    encrypted: BTreeSet<String>,
}

/// Builds a [`QueueApp`]; see there for an example.
#[derive(Debug)]
#[must_use = "call .build().await to connect"]
pub struct QueueAppBuilder {
    endpoint: Endpoint,
    tls: Option<Tls>,
    prefix: String,
    defaults: JobOptions,
    queue_defaults: HashMap<String, JobOptions>,
    /// Queues the app uses that none of its processors, producers or declarations
    /// name (served by another service, or added to by name at run time).
    external: BTreeSet<String>,
    renames: Renames,
    deps: Deps,
    processors: Vec<Processor>,
    registrations: Registrations,
    backoffs: BackoffRegistry,
    connect_timeout: Duration,
    command_timeout: Duration,
    max_payload_bytes: usize,
    #[cfg(feature = "sqlx")]
    outbox: Option<crate::store::Outbox>,
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::Metrics>,
    memory_guard: MemoryGuard,
    process_roster: bool,
    /// The keyring (empty until `keyring`, or `build` reads `key_source`).
    keys: Keys,
    key_source: Option<Arc<dyn KeySource>>,
    /// Queues whose payloads are sealed, by the code's names.
    encrypted: BTreeSet<String>,
    /// Whether they seal failure reasons and log lines too.
    seal_notes: bool,
}

impl QueueApp {
    /// Starts configuring an app.
    pub fn builder() -> QueueAppBuilder {
        QueueAppBuilder::default()
    }
}

impl Default for QueueAppBuilder {
    fn default() -> Self {
        QueueAppBuilder {
            endpoint: Endpoint::Single(DEFAULT_REDIS_URL.to_owned()),
            tls: None,
            prefix: DEFAULT_PREFIX.to_owned(),
            defaults: JobOptions::default(),
            queue_defaults: HashMap::new(),
            external: BTreeSet::new(),
            renames: Renames::default(),
            deps: Deps::default(),
            processors: Vec::new(),
            registrations: Registrations::All,
            backoffs: BackoffRegistry::default(),
            connect_timeout: Duration::from_secs(5),
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            #[cfg(feature = "sqlx")]
            outbox: None,
            #[cfg(feature = "metrics")]
            metrics: None,
            memory_guard: MemoryGuard::default(),
            process_roster: false,
            keys: Keys::default(),
            key_source: None,
            encrypted: BTreeSet::new(),
            seal_notes: false,
        }
    }
}

impl QueueAppBuilder {
    /// The Redis URL: `redis://[user:password@]host:port[/db]`, or `rediss://` for TLS;
    /// or a Redis Sentinel deployment,
    /// `redis+sentinel://[user:password@]host:port[,host:port...]/master_name[/db]` (see
    /// [`Sentinel`](crate::connection::Sentinel) for the whole form, and `build`'s refusal of one
    /// that does not fit).
    pub fn redis(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Endpoint::Single(url.into());
        self
    }

    /// A Redis Sentinel deployment: the app asks the sentinels for the master, and
    /// every connection asks them again when it loses it, so producers, workers, queue
    /// events and the outbox relay follow a failover. The same as a `redis+sentinel://`
    /// URL given to [`redis`](Self::redis).
    ///
    /// ```no_run
    /// # async fn demo() -> queue_core::Result<()> {
    /// use queue_core::{QueueApp, connection::Sentinel};
    ///
    /// let app = QueueApp::builder()
    ///     .redis_sentinel(
    ///         Sentinel::new("mymaster", ["10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"])
    ///             .password("master-secret"),
    ///     )
    ///     .build()
    ///     .await?;
    /// # let _ = app; Ok(()) }
    /// ```
    pub fn redis_sentinel(mut self, sentinel: crate::connection::Sentinel) -> Self {
        self.endpoint = Endpoint::Sentinel(sentinel);
        self
    }

    /// A Redis Cluster, by some of its nodes (`redis://[user:password@]host:port`, or
    /// `rediss://`; the cluster tells the rest). Commands go to the master of their
    /// slot, and follow it through a failover.
    ///
    /// BullMQ needs every key of a queue in one slot: `build` refuses a prefix and queues
    /// without a hash tag, with the fix. Tag the prefix (`{bull}`: every queue on one
    /// slot, so on one master) or, to spread queues over the masters, give each group of
    /// queues that work together a tag in their names (`{mail}welcome`, `{mail}digest`,
    /// `{reports}steps`). A flow's queues must share a tag.
    ///
    /// ```no_run
    /// # async fn demo() -> queue_core::Result<()> {
    /// let app = queue_core::QueueApp::builder()
    ///     .redis_cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
    ///     .prefix("{bull}")
    ///     .build()
    ///     .await?;
    /// # let _ = app; Ok(()) }
    /// ```
    pub fn redis_cluster<I, S>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.endpoint = Endpoint::Cluster(nodes.into_iter().map(Into::into).collect());
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

    /// Options applied to every job that does not set them itself (stored with each
    /// job, as BullMQ's `defaultJobOptions`).
    ///
    /// Their retention is also this app's workers' retention for the jobs that set
    /// none (BullMQ's worker-level `removeOnComplete` / `removeOnFail`), whoever added
    /// them. Left unset, the workers keep [`Retention::DEFAULT_COMPLETED`](crate::Retention::DEFAULT_COMPLETED)
    /// and [`Retention::DEFAULT_FAILED`](crate::Retention::DEFAULT_FAILED), and a job that sets
    /// no retention stores nothing for it. `Retention::All` keeps everything, as BullMQ does.
    pub fn default_job_options(mut self, defaults: JobOptions) -> Self {
        self.defaults = defaults;
        self
    }

    /// Default options for the jobs of `queue` that do not set them, over the app's
    /// [`default_job_options`](Self::default_job_options) (what NestJS's
    /// `registerQueue({ defaultJobOptions })` does). The workers of `queue` keep finished
    /// jobs by its retention too. A job id or a deduplication id cannot be a default:
    /// every job would be a duplicate of the first.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queue_core::{Backoff, JobOptions, Retention, QueueApp};
    ///
    /// let builder = QueueApp::builder()
    ///     .external_queue("email") // here, its workers run in another service
    ///     .default_job_options(JobOptions::new().attempts(3))
    ///     .queue_defaults(
    ///         "email",
    ///         JobOptions::new()
    ///             .attempts(5)
    ///             .backoff(Backoff::exponential(Duration::from_secs(3)))
    ///             .remove_on_complete(Retention::Last(100)),
    ///     );
    /// assert!(builder.check().is_ok());
    /// ```
    ///
    /// The queue must be one the app knows (a processor's, an `#[inject_queue]`
    /// producer's, a `#[job_queue]` declaration's, or an
    /// [`external_queue`](Self::external_queue)): `build` refuses another name, listing
    /// the known ones, so that a typo is not a queue whose jobs silently run with the
    /// wrong settings. For a declared queue, [`queue_defaults_of`](Self::queue_defaults_of)
    /// takes its type instead of its name.
    pub fn queue_defaults(mut self, queue: impl Into<String>, defaults: JobOptions) -> Self {
        self.queue_defaults.insert(queue.into(), defaults);
        self
    }

    /// [`queue_defaults`](Self::queue_defaults) for the declared queue `Q`: its name
    /// comes from its declaration, so it cannot be misspelled.
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
    /// let builder = QueueApp::builder().queue_defaults_of::<Email>(JobOptions::new().attempts(5));
    /// assert!(builder.check().is_ok());
    /// ```
    pub fn queue_defaults_of<Q: QueueType>(self, defaults: JobOptions) -> Self {
        self.queue_defaults(Q::NAME, defaults)
    }

    /// Declares a queue this app uses that none of its processors, `#[inject_queue]`
    /// producers or `#[job_queue]` declarations names: one whose workers run in another
    /// service, or one it adds to by name at run time. Settings given by queue name
    /// ([`queue_defaults`](Self::queue_defaults), [`rename_queue`](Self::rename_queue),
    /// [`Registrations::Queues`](crate::app::Registrations::Queues)) must name a queue
    /// the app knows, and such a queue is then known. The app's status routes serve it
    /// too ([`QueueApp::knows_queue`]).
    ///
    /// ```
    /// use queue_core::{JobOptions, QueueApp};
    ///
    /// // Reports are rendered by another service; this one only adds them.
    /// let builder = QueueApp::builder()
    ///     .external_queue("reports")
    ///     .queue_defaults("reports", JobOptions::new().attempts(3));
    /// assert!(builder.check().is_ok());
    ///
    /// // A typo is refused, with the name it could have meant.
    /// let err = QueueApp::builder()
    ///     .external_queue("reports")
    ///     .queue_defaults("reprots", JobOptions::new().attempts(3))
    ///     .check()
    ///     .unwrap_err();
    /// assert!(err.to_string().contains("did you mean `reports`?"), "{err}");
    /// ```
    pub fn external_queue(mut self, queue: impl Into<String>) -> Self {
        self.external.insert(queue.into());
        self
    }

    /// Gives the queue the code calls `from` the name `to` in Redis, decided at start-up
    /// (from configuration: a region, a tenant, a test's own name). Processors, producers,
    /// listeners, declared queues, [`queue_defaults`](Self::queue_defaults) and
    /// [`QueueApp::queue`] all use `to` for `from`.
    ///
    /// ```
    /// use queue_core::{Job, JobError, Processor, QueueApp};
    ///
    /// async fn send(job: Job<String>) -> Result<(), JobError> { Ok(()) }
    ///
    /// let region = "eu"; // from the environment, say
    /// let builder = QueueApp::builder()
    ///     .rename_queue("email", format!("email-{region}"))
    ///     .processor(Processor::new("email").job("welcome", send));
    /// assert!(builder.check().is_ok());
    /// ```
    pub fn rename_queue(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.renames.insert(from.into(), to.into());
        self
    }

    /// [`rename_queue`](Self::rename_queue) for the declared queue `Q`.
    pub fn rename_queue_of<Q: QueueType>(self, to: impl Into<String>) -> Self {
        self.rename_queue(Q::NAME, to)
    }

    /// Makes `value` available to handlers and event listeners that take a `Dep<T>`.
    /// (`Dep<QueueApp>` is always available, for handlers that add follow-up jobs.)
    pub fn provide<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.deps.insert(Arc::new(value));
        self
    }

    /// Like [`provide`](Self::provide), for a value already shared elsewhere.
    pub fn provide_arc<T: Send + Sync + 'static>(mut self, value: Arc<T>) -> Self {
        self.deps.insert(value);
        self
    }

    /// Registers a queue's handlers (`Processor::new("queue")` or, for a declared queue,
    /// `Processor::of::<Queue>()`).
    pub fn processor<Q>(mut self, processor: Processor<Q>) -> Self {
        self.processors.extend(processor.per_queue(str::to_owned));
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
        self.backoffs.register(name.into(), Arc::new(strategy));
        self
    }

    /// How long `build` waits for Redis to answer (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Records each process that runs workers in Redis every ten seconds (host, pid,
    /// start time, and per queue its concurrency and the jobs it runs now), for the
    /// dashboard's workers page ([`QueueApp::get_processes`](crate::QueueApp::get_processes)).
    /// Off by default: it writes a key per process beside BullMQ's
    /// (`<prefix>:queue-core:process:<id>`, expiring a minute after the last beat) and
    /// one sorted set, which a deployment that allows only BullMQ's keys may refuse.
    pub fn process_roster(mut self, on: bool) -> Self {
        self.process_roster = on;
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

    /// A transactional outbox in the application's database, for
    /// [`Queue::add_in`](crate::Queue::add_in). `build` creates its table if missing
    /// and starts a relay (see [`Outbox::start_relay`](crate::store::Outbox::start_relay)).
    #[cfg(feature = "sqlx")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
    pub fn outbox(mut self, outbox: crate::store::Outbox) -> Self {
        self.outbox = Some(outbox);
        self
    }

    /// Records Prometheus metrics into `metrics` (see [`Metrics`](crate::metrics::Metrics)):
    /// the workers count and time every attempt, and a scrape reads queue depth.
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The Redis memory guard (see [`MemoryGuard`]; on by default). `build` reads
    /// Redis's `maxmemory-policy` and logs an error, or fails when told to, unless it is
    /// `noeviction`; above the high-water mark of `maxmemory`, adds fail fast with
    /// [`Error::RedisMemoryHigh`] and the outbox keeps its rows. Off on a Redis Cluster
    /// (each master has its own memory) and where Redis hides `INFO memory`.
    pub fn memory_guard(mut self, guard: MemoryGuard) -> Self {
        self.memory_guard = guard;
        self
    }

    /// The keys payloads are sealed and opened with: required when a queue is
    /// encrypted ([`encrypt_queue`](Self::encrypt_queue), or `#[job_queue("name",
    /// encrypted)]`), and enough to run jobs sealed by another producer. See
    /// [`encryption`](crate::encryption).
    ///
    /// ```
    /// use queue_core::encryption::Keyring;
    /// use queue_core::QueueApp;
    ///
    /// // In production: Keyring::from_env("QUEUE_KEYS")?, or from_file.
    /// let keyring = Keyring::new("2026-12", [7; 32])?;
    /// let builder = QueueApp::builder()
    ///     .keyring(keyring)
    ///     .external_queue("email")
    ///     .encrypt_queue("email");
    /// assert!(builder.check().is_ok());
    /// # Ok::<(), queue_core::encryption::KeyringError>(())
    /// ```
    pub fn keyring(mut self, keyring: Keyring) -> Self {
        self.keys = Keys::new(Some(keyring));
        self
    }

    /// The keyring from a [`KeySource`] (a secrets manager), read by `build` and again
    /// by [`QueueApp::reload_keyring`].
    pub fn keyring_from(mut self, source: impl KeySource) -> Self {
        self.key_source = Some(Arc::new(source));
        self
    }

    /// Seals the payloads of `queue`: what is added to it (data) and what its handlers
    /// return, in Redis, its files and its replicas, and in the outbox's rows. The queue
    /// must be one the app knows, as for [`queue_defaults`](Self::queue_defaults), and
    /// the app needs a [`keyring`](Self::keyring). A declared queue says it itself:
    /// `#[job_queue("email", encrypted)]`.
    pub fn encrypt_queue(mut self, queue: impl Into<String>) -> Self {
        self.encrypted.insert(queue.into());
        self
    }

    /// Also seals, on every encrypted queue, why attempts failed (BullMQ's
    /// `failedReason` and each attempt's record) and the lines handlers log
    /// (`Job::log`). Off by default: they are the operator's first read when a job
    /// fails, and once sealed they show opened only to whom the application allows
    /// (`Queue::open`, the status routes that show failure reasons, the dashboard's
    /// `reveal` right). Turn it on when handlers' errors or log lines can carry personal
    /// data (an upstream's message that quotes an address, say).
    ///
    /// ```
    /// use queue_core::encryption::Keyring;
    /// use queue_core::QueueApp;
    ///
    /// let builder = QueueApp::builder()
    ///     .keyring(Keyring::new("2026-12", [7; 32])?)
    ///     .external_queue("email")
    ///     .encrypt_queue("email")
    ///     .encrypt_failures_and_logs(true);
    /// assert!(builder.check().is_ok());
    /// # Ok::<(), queue_core::encryption::KeyringError>(())
    /// ```
    pub fn encrypt_failures_and_logs(mut self, on: bool) -> Self {
        self.seal_notes = on;
        self
    }

    /// [`encrypt_queue`](Self::encrypt_queue) for the declared queue `Q`.
    pub fn encrypt_queue_of<Q: QueueType>(self) -> Self {
        self.encrypt_queue(Q::NAME)
    }

    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub(crate) fn tls_settings(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    /// Runs the start-up checks without connecting: every registration problem at once.
    pub fn check(&self) -> Result<(), Error> {
        self.plan().map(drop)
    }

    fn plan(&self) -> Result<Plan, Error> {
        self.memory_guard.check()?;
        if self.prefix.is_empty() || self.prefix.contains(':') {
            return Err(Error::invalid(
                "prefix",
                format!("`{}` must be non-empty and without ':'", self.prefix),
            ));
        }
        self.defaults.validate()?;
        for (queue, defaults) in &self.queue_defaults {
            check_queue_defaults(queue, defaults)?;
        }
        let renames = &self.renames;
        let rename = |queue: &str| renames.owned(queue);
        #[cfg(feature = "sqlx")]
        if let Some(outbox) = &self.outbox {
            outbox.validate()?;
        }
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
        let from_records: Vec<Processor> = registered
            .processors
            .iter()
            .map(|r| processor_from_record(r))
            .collect();
        let processors: Vec<Processor> = self
            .processors
            .iter()
            .chain(&from_records)
            .flat_map(|p| p.per_queue(rename))
            .collect();
        let mut problems = renames.problems();
        problems.extend(self.unknown_queue_names(&registered));
        let mut queues = merge_processors(&processors, &deps, &mut problems);
        let encrypted = self.encrypted_queues();
        // The queues this app is known to use; a declaration linked in but used by
        // another app of the binary is sealed too, and an add to it without a keyring
        // is refused as such.
        let used = |queue: &String| {
            queues.iter().any(|plan| &plan.queue == queue)
                || registered
                    .producers
                    .iter()
                    .any(|p| &rename(p.queue) == queue)
                || self.encrypted.iter().any(|q| &rename(q) == queue)
        };
        if let Some(queue) = encrypted.iter().find(|queue| used(queue)) {
            if self.keys.keyring().is_none() && self.key_source.is_none() {
                problems.push(format!(
                    "queue `{queue}` is encrypted, and the app has no keyring: give it one with `.keyring(Keyring::from_env(\"QUEUE_KEYS\")?)` (see queue_core::encryption)"
                ));
            }
        }
        for plan in &mut queues {
            plan.sealer = self.keys.for_queue(
                &plan.queue,
                Seals::of(encrypted.contains(&plan.queue), self.seal_notes),
            );
        }
        problems.extend(check_registrations(&queues, &registered, &deps, rename));
        problems.extend(check_declarations(&registered.job_types, &queues, rename));
        RegistryError::from_problems(problems)?;
        if matches!(self.endpoint, Endpoint::Cluster(_)) {
            let producers: Vec<String> = registered
                .producers
                .iter()
                .map(|p| rename(p.queue))
                .collect();
            let named = queues
                .iter()
                .map(|plan| plan.queue.as_str())
                .chain(producers.iter().map(String::as_str));
            crate::connection::check_tags(&self.prefix, named)?;
        }
        let declared = declared_jobs(&registered.job_types, &queues, rename);
        Ok(Plan {
            queues,
            deps,
            registered,
            declared,
            encrypted,
        })
    }

    /// The queues whose payloads are sealed, by their names in Redis: those given to
    /// `encrypt_queue` and the declarations that say `encrypted`.
    fn encrypted_queues(&self) -> BTreeSet<String> {
        // Every declaration linked in, whatever the registrations pick: the contract
        // binds every producer of the queue, and an app that registers other queues can
        // still add to this one (`queue_of`).
        let linked = Registered::collect(|_| true);
        let declared = linked
            .job_types
            .iter()
            .filter(|record| record.encrypted)
            .map(|record| record.queue);
        self.encrypted
            .iter()
            .map(String::as_str)
            .chain(declared)
            .map(|queue| self.renames.owned(queue))
            .collect()
    }

    /// The queue names given as strings (defaults, renames, the registrations to use)
    /// that the app does not know. Names are the code's; a renamed queue's name in Redis
    /// is known too, for its defaults.
    fn unknown_queue_names(&self, registered: &Registered) -> Vec<String> {
        let explicit = self
            .processors
            .iter()
            .flat_map(|p| std::iter::once(&p.queue).chain(&p.also))
            .chain(&self.external)
            .map(String::as_str);
        let known: BTreeSet<&str> = explicit
            .clone()
            .chain(registered.queues())
            .chain(self.renames.to())
            .collect();
        let mut given: Vec<(&'static str, &str)> = self
            .queue_defaults
            .keys()
            .map(|queue| ("queue_defaults", queue.as_str()))
            .chain(self.renames.from().map(|queue| ("rename_queue", queue)))
            .chain(
                self.encrypted
                    .iter()
                    .map(|queue| ("encrypt_queue", queue.as_str())),
            )
            .collect();
        given.sort_unstable();
        let mut problems = unknown_queues(given, &known);
        // The registrations to use pick records of this binary: any record's queue is a
        // name they may give, used by this app or not.
        let named = self.registrations.named();
        if !named.is_empty() {
            let everything = Registered::collect(|_| true);
            let linked: BTreeSet<&str> = explicit.chain(everything.queues()).collect();
            problems.extend(unknown_queues(
                named
                    .iter()
                    .map(|queue| ("Registrations::Queues", queue.as_str())),
                &linked,
            ));
        }
        problems
    }

    /// Checks the registrations, connects and checks that Redis answers. Fails with a
    /// clear error (the URL, without password, and the cause) instead of hanging.
    pub async fn build(self) -> Result<QueueApp, Error> {
        if let Some(source) = &self.key_source {
            self.keys.replace(source.keyring().await?);
        }
        let plan = self.plan()?;
        let conn = Connection::open(
            &self.endpoint,
            self.tls.as_ref(),
            &self.prefix,
            self.connect_timeout,
            // A connection silent for as long as a call may wait is taken for dead and
            // replaced: one a load balancer dropped without a sound would otherwise stay.
            self.command_timeout,
        )
        .await?;
        tracing::info!(
            url = conn.display_url(),
            prefix = conn.prefix(),
            "queue app connected"
        );
        let memory = if conn.is_cluster() {
            None
        } else {
            MemoryWatch::start(&conn, self.memory_guard).await?
        };
        #[cfg(feature = "sqlx")]
        if let Some(outbox) = &self.outbox {
            outbox.migrate().await?;
        }
        #[cfg(feature = "sqlx")]
        let relay = self.outbox.clone().filter(|o| o.settings.start_relay);
        let app = self.assemble(plan, Backend::Redis(Arc::new(conn)), memory);
        #[cfg(feature = "sqlx")]
        if let Some(outbox) = relay {
            app.keep_relay(super::outbox::relay_into(&app, outbox));
        }
        Ok(app)
    }

    /// Checks the registrations as [`build`](Self::build) does, and builds an app
    /// without Redis whose adds run their handler at once, in the caller's task: for
    /// unit tests of the code that adds jobs. What it simulates, and what it does not,
    /// is in [`testing`](crate::testing#inline-mode-no-redis); everything that needs
    /// Redis fails with [`Error::Inline`]. [`testing::inline_jobs`](crate::testing::inline_jobs)
    /// tells what each job did.
    ///
    /// ```
    /// # async fn demo() -> queue_core::Result<()> {
    /// use queue_core::prelude::*;
    /// use queue_core::testing::{inline_jobs, InlineOutcome};
    ///
    /// async fn double(job: Job<u32>) -> Result<u32, JobError> { Ok(job.data * 2) }
    ///
    /// let app = QueueApp::builder()
    ///     .processor(Processor::new("math").job("double", double))
    ///     .build_inline()?;
    /// let added = app.queue::<u32>("math")?.add("double", 21, JobOptions::new()).await?;
    /// assert_eq!(added.state, Some(JobState::Completed));
    /// assert_eq!(
    ///     inline_jobs(&app)[0].outcome,
    ///     InlineOutcome::Completed { value: serde_json::json!(42) }
    /// );
    /// # Ok(()) }
    /// ```
    pub fn build_inline(self) -> Result<QueueApp, Error> {
        if self.key_source.is_some() {
            return Err(Error::invalid(
                "keyring_from",
                "an inline app reads no key source (it is not async): give it its keyring with `.keyring(..)`",
            ));
        }
        let plan = self.plan()?;
        let runner = Arc::new(InlineRunner::new(
            &self.prefix,
            plan.queues.clone(),
            plan.deps.clone(),
        ));
        let app = self.assemble(plan, Backend::Inline(runner.clone()), None);
        // Weak: the app holds the runner.
        let weak = Arc::downgrade(&app.inner);
        runner.attach(move |deps| {
            if let Some(inner) = weak.upgrade() {
                deps.insert(Arc::new(QueueApp { inner }));
            }
        });
        Ok(app)
    }

    /// The app from a checked plan and its connection.
    fn assemble(self, plan: Plan, backend: Backend, memory: Option<Arc<MemoryWatch>>) -> QueueApp {
        let Plan {
            queues: plans,
            deps,
            registered,
            declared,
            encrypted,
        } = plan;
        log_plan(&plans, &declared);
        let ungrouped_processed = plans
            .iter()
            .filter(|p| p.options.groups.is_none())
            .map(|p| p.queue.clone())
            .collect();
        let (worker_events, _) = broadcast::channel(local::CAPACITY);
        let renames = self.renames;
        let registered_queues = plans
            .iter()
            .map(|p| p.queue.clone())
            .chain(registered.producers.iter().map(|p| renames.owned(p.queue)))
            .chain(self.external.iter().map(|queue| renames.owned(queue)))
            .collect();
        let queue_defaults = self
            .queue_defaults
            .into_iter()
            .map(|(queue, defaults)| (renames.owned(&queue), defaults))
            .collect();
        let worker_listeners = registered
            .worker_listeners
            .iter()
            .map(|r| (renames.owned(r.queue), *r))
            .collect();
        let queue_listeners = registered
            .queue_listeners
            .iter()
            .map(|r| (renames.owned(r.queue), *r))
            .collect();
        let watch = Arc::new(crate::watch::JobWatch::new(backend.clone()));
        QueueApp {
            inner: Arc::new(AppInner {
                backend,
                plans,
                deps: Arc::new(deps),
                producer: ProducerSettings {
                    defaults: self.defaults,
                    queue_defaults: Arc::new(queue_defaults),
                    max_payload_bytes: self.max_payload_bytes,
                    backoffs: self.backoffs.clone(),
                    command_timeout: self.command_timeout,
                    #[cfg(feature = "sqlx")]
                    outbox: self.outbox,
                    memory: memory
                        .clone()
                        .map(|watch| watch as Arc<dyn crate::queue::AddGate>),
                    watch,
                    keys: self.keys.clone(),
                    sealed_queues: Arc::new(encrypted),
                    seal_notes: self.seal_notes,
                    ungrouped_processed: Arc::new(ungrouped_processed),
                },
                key_source: self.key_source,
                backoffs: self.backoffs,
                queues: Mutex::new(HashMap::new()),
                worker_events,
                registered_queues,
                worker_listeners,
                queue_listeners,
                renames,
                declared,
                #[cfg(feature = "sqlx")]
                relay: Mutex::new(None),
                #[cfg(feature = "metrics")]
                metrics: self.metrics,
                pulses: Arc::default(),
                roster: self.process_roster.then(Arc::default),
                memory,
            }),
        }
    }
}

/// Logs each queue's handlers, and warns of the declared jobs no handler takes.
fn log_plan(plans: &[QueuePlan], declared: &[DeclaredJob]) {
    for plan in plans {
        let names = plan.known_names();
        let catch_all = if plan.fallback.is_some() {
            " + catch-all"
        } else {
            ""
        };
        let jobs = format!("{names}{catch_all}");
        let concurrency = plan.options.concurrency;
        match plan.options.batch {
            // A batch worker's concurrency counts batches: its size goes beside it.
            Some(batching) => {
                tracing::info!(queue = %plan.queue, %jobs, concurrency, batch = batching.size, "processor registered")
            }
            None => tracing::info!(queue = %plan.queue, %jobs, concurrency, "processor registered"),
        }
    }
    let unhandled: Vec<String> = declared
        .iter()
        .filter(|job| !job.handled)
        .map(|job| format!("{}/{} ({})", job.queue, job.name, job.payload_type))
        .collect();
    if !unhandled.is_empty() {
        tracing::warn!(
            jobs = %unhandled.join(", "),
            "declared job types that no processor of this app handles; fine if their consumer is another service"
        );
    }
}

/// A queue's defaults: valid options, and no id (every job would be a duplicate).
fn check_queue_defaults(queue: &str, defaults: &JobOptions) -> Result<(), Error> {
    let named = |e: Error| match e {
        Error::InvalidOption { option, reason } => Error::InvalidOption {
            option,
            reason: format!("in the default job options of queue `{queue}`: {reason}"),
        },
        other => other,
    };
    defaults.validate().map_err(named)?;
    if defaults.may_be_duplicate() {
        return Err(named(Error::invalid(
            "queue_defaults",
            "a job id or deduplication id cannot be a default: every job would be a duplicate of the first; set it per job",
        )));
    }
    Ok(())
}
