//! The crate's one error enum, and the `Result` alias that uses it.

pub(crate) mod flow;
mod registry;

use flow::FlowError;
pub use registry::RegistryError;

/// A boxed error source, so that no engine type appears in our signatures.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong when talking to a queue.
///
/// Handler outcomes are not here: a handler returns [`JobError`](crate::JobError).
///
/// ```
/// use queue_core::{Error, JobOptions};
///
/// let err = JobOptions::new().job_id("welcome:42").validate().unwrap_err();
/// assert!(matches!(err, Error::InvalidOption { option: "job_id", .. }));
/// assert!(err.to_string().contains("welcome-42"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Redis could not be reached when the app was built.
    #[error("cannot connect to Redis at {url}: {reason}")]
    Connect {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// What went wrong, in words.
        reason: String,
    },

    /// The Redis server is older than BullMQ's scripts need (6.0.6): the app refuses to
    /// start rather than fail job by job.
    #[error("Redis at {url} is version {found}; queue-core needs Redis {minimum} or newer (BullMQ's scripts use commands an older server lacks)")]
    UnsupportedRedis {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// The version the server reported.
        found: String,
        /// The oldest version the scripts run on.
        minimum: String,
    },

    /// Redis's `maxmemory-policy` may delete jobs, and the app was told to require
    /// `noeviction` ([`MemoryGuard::require_noeviction`](crate::health::MemoryGuard::require_noeviction)).
    #[error("Redis at {url} has maxmemory-policy `{policy}`, which deletes keys (jobs among them) when memory is full; BullMQ needs `noeviction` (CONFIG SET maxmemory-policy noeviction, and in redis.conf)")]
    EvictionPolicy {
        /// The URL, password redacted.
        url: String,
        /// The policy Redis reported.
        policy: String,
    },

    /// Redis's memory is above the guard's high-water mark ([`MemoryGuard`](crate::health::MemoryGuard)):
    /// the add is refused before it is sent, so that Redis keeps room for the jobs
    /// already in it. Try again after `retry_after`; an HTTP edge answers 503.
    #[error("Redis memory is above the high-water mark ({used} of {max} bytes used); the add was refused, try again after {retry_after:?}")]
    RedisMemoryHigh {
        /// Bytes Redis used at the last reading.
        used: u64,
        /// Its `maxmemory`.
        max: u64,
        /// When to try again.
        retry_after: std::time::Duration,
    },

    /// The app runs inline, without Redis ([`QueueAppBuilder::build_inline`]), and this
    /// call needs Redis.
    ///
    /// [`QueueAppBuilder::build_inline`]: crate::QueueAppBuilder::build_inline
    #[error("{operation} needs Redis, and this app runs inline without it (built with `build_inline`; see `queue_core::testing` for what inline mode does)")]
    Inline {
        /// What was asked for.
        operation: &'static str,
    },

    /// A Redis command failed (connection lost, timeout, server error).
    #[error("redis error: {0}")]
    Redis(#[source] BoxError),

    /// The application's database failed (the outbox, operation or stage records).
    #[error("database error: {0}")]
    Database(#[source] BoxError),

    /// A payload or return value could not be turned into JSON.
    #[error("cannot serialize {what}: {source}")]
    Serialize {
        /// What was being serialized (`"job data"`, `"progress"`, ...).
        what: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },

    /// A sealed payload or return value could not be sealed or opened: its key is not
    /// in the keyring, or it was altered ([`encryption`](crate::encryption)).
    #[error("sealed value: {0}")]
    Sealed(#[from] crate::encryption::SealError),

    /// The app's keyring could not be read ([`Keyring`](crate::encryption::Keyring)).
    #[error(transparent)]
    Keyring(#[from] crate::encryption::KeyringError),

    /// Redis did not answer within the command timeout (it is down, or unreachable).
    #[error("Redis did not answer {what} within {after:?}")]
    Timeout {
        /// The operation (`"add"`, `"get_job"`, ...).
        what: &'static str,
        /// The command timeout.
        after: std::time::Duration,
    },

    /// A job option, queue name or setting was refused before anything was written.
    #[error("invalid {option}: {reason}")]
    InvalidOption {
        /// The option's name as the builder spells it (`"job_id"`, `"priority"`, ...).
        option: &'static str,
        /// Why it was refused and, where possible, what to write instead.
        reason: String,
    },

    /// A BullMQ Lua script refused the operation.
    #[error("script refused the operation: {message} (code {code})")]
    Script {
        /// BullMQ's numeric error code (negative).
        code: i64,
        /// BullMQ's message for that code.
        message: String,
    },

    /// The job does not exist (never added, removed, or cleaned by retention).
    #[error("job {id} not found in queue {queue}")]
    JobNotFound {
        /// The queue name.
        queue: String,
        /// The job id.
        id: String,
    },

    /// The job is locked by a worker (it is running), and the operation needs it not to
    /// be; or a worker's lock on it was lost.
    #[error("job {id} in queue {queue} is locked by a worker ({detail})")]
    Locked {
        /// The queue name.
        queue: String,
        /// The job id.
        id: String,
        /// What the engine said.
        detail: String,
    },

    /// The queue's rate limit is reached: try again after the delay.
    #[error("queue {queue} is rate limited; try again after {retry_after:?}")]
    RateLimited {
        /// The queue name.
        queue: String,
        /// How long to wait.
        retry_after: std::time::Duration,
    },

    /// The worker was closed while the operation ran (the app is shutting down).
    #[error("the worker of queue {queue} was closed")]
    WorkerClosed {
        /// The queue name.
        queue: String,
    },

    /// The job is not in a state that allows the operation.
    #[error("job {id} in queue {queue} is {state}, cannot {operation}")]
    WrongState {
        /// The queue name.
        queue: String,
        /// The job id.
        id: String,
        /// Its current state.
        state: String,
        /// What was attempted.
        operation: &'static str,
    },

    /// A flow was refused; nothing of it was written.
    #[error(transparent)]
    Flow(#[from] FlowError),

    /// Start-up checks of registered processors and producers failed.
    #[error(transparent)]
    Registry(#[from] RegistryError),

    /// A worker could not be started or stopped.
    #[error("worker for queue {queue}: {reason}")]
    Worker {
        /// The queue name.
        queue: String,
        /// What went wrong.
        reason: String,
    },
}

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn invalid(option: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidOption {
            option,
            reason: reason.into(),
        }
    }

    /// A payload over the app's limit (`max_payload_bytes`), with its size when known.
    pub(crate) fn oversized_payload(size: Option<usize>, limit: usize) -> Self {
        let size = size.map_or_else(String::new, |size| format!("{size} bytes serialized, "));
        Error::invalid(
            "payload",
            format!("{size}over the {limit}-byte limit; store large data elsewhere and enqueue a reference"),
        )
    }

    /// Whether the error means Redis (or the application's database) could not be
    /// reached, or Redis's memory is above the guard's high-water mark, as opposed to a
    /// refused request.
    ///
    /// Useful to answer 503 instead of 500 in an HTTP handler.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Connect { .. }
                | Error::Redis(_)
                | Error::Timeout { .. }
                | Error::Database(_)
                | Error::RedisMemoryHigh { .. }
        )
    }
}

/// Why [`QueueApp::check_payload`](crate::QueueApp::check_payload) refused a payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// No handler of this app takes jobs of that name on that queue.
    #[error("no handler of this app takes job `{job_name}` on queue `{queue}`")]
    NoHandler {
        /// The queue.
        queue: String,
        /// The job name.
        job_name: String,
    },
    /// The data does not follow the JSON Schema of the job's declared payload.
    #[error("does not follow the schema of {payload_type}: {reason} (at `{at}`)")]
    SchemaMismatch {
        /// The payload type's Rust name.
        payload_type: &'static str,
        /// A JSON pointer to the value at fault (`""`: the whole document).
        at: String,
        /// What is wrong.
        reason: String,
    },
    /// The data does not deserialize into the handler's payload type.
    #[error("does not fit {payload_type}: {reason}")]
    DoesNotFit {
        /// The payload type's Rust name.
        payload_type: &'static str,
        /// serde's reason.
        reason: String,
    },
}
