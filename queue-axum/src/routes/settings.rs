//! [`JobRoutes`]: what the status route shows, of which queues, and how long it waits.

use std::sync::Arc;
use std::time::Duration;

use queue_core::QueueApp;

/// Settings of the status route.
///
/// By default it answers what a client polling its own job needs: the state, progress,
/// attempts and timestamps, and for a flow job its `parent` (queue and id) and its
/// `children` (pending, processed and failed, up to 20 of each, with totals). The
/// failure reason (internal error text), the return value and the payload (either may
/// hold personal data) are each an explicit opt-in, for a route mounted behind your own
/// access check:
///
/// ```
/// use axum::{middleware, Router};
/// use queue_axum::JobRoutes;
///
/// # async fn operator_only(r: axum::extract::Request, next: middleware::Next) -> axum::response::Response { next.run(r).await }
/// let public: Router = JobRoutes::new().queues(["email"]).router();
/// let admin: Router = Router::new().nest(
///     "/admin",
///     JobRoutes::new()
///         .include_failed_reason(true)
///         .include_return_value(true)
///         .router()
///         .layer(middleware::from_fn(operator_only)),
/// );
/// ```
///
/// The route waits for Redis at most [`redis_wait`](Self::redis_wait) (600 ms by
/// default), not the queue calls' command timeout: a client polling its job during an
/// outage gets an answer within a second. Then a job still in the app's outbox answers
/// from there (`pending`, what the 202 promised), and any other job 503 with
/// `Retry-After`.
#[derive(Debug, Clone)]
#[must_use]
pub struct JobRoutes {
    pub(super) include_data: bool,
    pub(super) include_failed_reason: bool,
    pub(super) include_return_value: bool,
    pub(super) queues: Option<Arc<[String]>>,
    pub(super) redis_wait: Duration,
    /// One permit per open live stream, shared by the clones of these settings.
    pub(super) live_streams: Arc<tokio::sync::Semaphore>,
    pub(super) live_stream_lifetime: Duration,
}

/// How long the status route waits for Redis by default.
pub const DEFAULT_STATUS_REDIS_WAIT: Duration = Duration::from_millis(600);

impl Default for JobRoutes {
    fn default() -> Self {
        JobRoutes {
            include_data: false,
            include_failed_reason: false,
            include_return_value: false,
            queues: None,
            redis_wait: DEFAULT_STATUS_REDIS_WAIT,
            live_streams: Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_JOB_STREAMS)),
            live_stream_lifetime: DEFAULT_JOB_STREAM_LIFETIME,
        }
    }
}

impl JobRoutes {
    /// Defaults: every queue the app knows; no payload, failure reason or return value;
    /// Redis waited for [`DEFAULT_STATUS_REDIS_WAIT`].
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a status answer waits for Redis before it answers from the outbox (a
    /// job still there) or 503 with `Retry-After`. Longer than the app's command
    /// timeout changes nothing: each queue call gives up then.
    pub fn redis_wait(mut self, wait: Duration) -> Self {
        self.redis_wait = wait;
        self
    }

    /// Shows the job's payload as `data`. Only behind your own access check.
    pub fn include_data(mut self, include: bool) -> Self {
        self.include_data = include;
        self
    }

    /// Shows `failedReason`, the last failure's text, and `attemptErrors`, what each
    /// failed attempt recorded (its reason, then its error chain or where it panicked;
    /// oldest first): internal details, only behind your own access check. (`runsAt`,
    /// when a delayed job or a retry runs next, is shown on every route.)
    pub fn include_failed_reason(mut self, include: bool) -> Self {
        self.include_failed_reason = include;
        self
    }

    /// Shows `returnValue`, what the handler returned. Only behind your own access
    /// check when it may hold personal data.
    pub fn include_return_value(mut self, include: bool) -> Self {
        self.include_return_value = include;
        self
    }

    /// Serves these queues only (the others answer 404 "unknown queue").
    pub fn queues<I, Q>(mut self, queues: I) -> Self
    where
        I: IntoIterator<Item = Q>,
        Q: Into<String>,
    {
        self.queues = Some(queues.into_iter().map(Into::into).collect());
        self
    }

    /// The most live streams (`GET /jobs/{queue}/{id}/events`) open at once, across
    /// the clones of these settings (default [`DEFAULT_MAX_JOB_STREAMS`]); past it, a
    /// new stream is answered 503 with `Retry-After`.
    pub fn max_live_streams(mut self, max: usize) -> Self {
        self.live_streams = Arc::new(tokio::sync::Semaphore::new(max));
        self
    }

    /// How long a live stream lasts at most (default [`DEFAULT_JOB_STREAM_LIFETIME`]);
    /// the client's `EventSource` then opens another, which starts with the job's
    /// current state.
    pub fn live_stream_lifetime(mut self, lifetime: Duration) -> Self {
        self.live_stream_lifetime = lifetime;
        self
    }

    pub(crate) fn serves(&self, app: &QueueApp, queue: &str) -> bool {
        let listed = self
            .queues
            .as_ref()
            .is_none_or(|queues| queues.iter().any(|q| q == queue));
        listed && app.knows_queue(queue)
    }
}

/// Live streams open at once by default, per [`JobRoutes`].
pub const DEFAULT_MAX_JOB_STREAMS: usize = 256;

/// How long a job's live stream lasts by default before it ends (and the client's
/// `EventSource` opens another): no stream is held for ever, and a proxy's idle limit
/// never cuts one mid-update.
pub const DEFAULT_JOB_STREAM_LIFETIME: Duration = Duration::from_secs(600);
