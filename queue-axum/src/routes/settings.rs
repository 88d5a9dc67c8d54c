//! [`JobRoutes`]: what the status route shows, of which queues, and how long it waits.

use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use queue_core::QueueApp;

use super::stream_slots::StreamSlots;

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
    /// The live streams' caps: all, per job, per client.
    pub(super) stream_caps: StreamCaps,
    /// Who holds the live streams, shared by the clones of these settings.
    pub(super) live_streams: Arc<StreamSlots>,
    pub(super) live_stream_lifetime: Duration,
    pub(super) live_stream_idle: Duration,
    pub(super) client: ClientOf,
}

/// The live streams' caps, kept to make their [`StreamSlots`] anew when one changes.
#[derive(Debug, Clone, Copy)]
pub(super) struct StreamCaps {
    all: usize,
    per_job: usize,
    per_client: usize,
}

impl StreamCaps {
    fn slots(self) -> Arc<StreamSlots> {
        Arc::new(StreamSlots::new(self.all, self.per_job, self.per_client))
    }
}

/// What [`JobRoutes::client_by`] takes.
type ClientFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;

/// Who a request's client is, for the per-client cap of live streams.
#[derive(Clone)]
pub(super) struct ClientOf(Option<Arc<ClientFn>>);

impl std::fmt::Debug for ClientOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Some(_) => "ClientOf(application's)",
            None => "ClientOf(peer address)",
        })
    }
}

impl ClientOf {
    /// The application's answer, else the client's address (`crate::client`).
    pub(super) fn of(&self, parts: &Parts) -> Option<String> {
        match &self.0 {
            Some(client) => client(parts),
            None => crate::client::of(parts).map(|ip| ip.to_string()),
        }
    }
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
            stream_caps: DEFAULT_STREAM_CAPS,
            live_streams: DEFAULT_STREAM_CAPS.slots(),
            live_stream_lifetime: DEFAULT_JOB_STREAM_LIFETIME,
            live_stream_idle: DEFAULT_JOB_STREAM_IDLE,
            client: ClientOf(None),
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
        self.stream_caps.all = max;
        self.live_streams = self.stream_caps.slots();
        self
    }

    /// The most live streams one client holds open at once on one job (default
    /// [`DEFAULT_MAX_STREAMS_PER_JOB`]; a job's streams in all, where the client is not
    /// known); past it, 429 with `Retry-After`. A job has one client watching it, or a
    /// few tabs: not the route's every stream; and a stranger who knows a job's id
    /// cannot take its owner's.
    pub fn max_live_streams_per_job(mut self, max: usize) -> Self {
        self.stream_caps.per_job = max;
        self.live_streams = self.stream_caps.slots();
        self
    }

    /// The most live streams one client holds at once (default
    /// [`DEFAULT_MAX_STREAMS_PER_CLIENT`]); past it, 429 with `Retry-After`. The client
    /// is who [`client_by`](Self::client_by) says, else its address (axum's
    /// `ConnectInfo`, which [`serve`](crate::serve) records; an IPv6 client by its
    /// /64). Behind a reverse proxy every client has the proxy's address: say who the
    /// client is with [`client_by`](Self::client_by).
    pub fn max_live_streams_per_client(mut self, max: usize) -> Self {
        self.stream_caps.per_client = max;
        self.live_streams = self.stream_caps.slots();
        self
    }

    /// Who a request's client is, for the per-client cap: behind a reverse proxy every
    /// connection comes from the proxy, so give the address your proxy forwards (its
    /// `X-Forwarded-For`, rightmost hop you trust), or the caller your authentication
    /// names. `None`: a client not known, held to the per-job and route caps only.
    pub fn client_by<F>(mut self, client: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        self.client = ClientOf(Some(Arc::new(client)));
        self
    }

    /// How long a live stream lasts at most (default [`DEFAULT_JOB_STREAM_LIFETIME`]);
    /// the client's `EventSource` then opens another, which starts with the job's
    /// current state.
    pub fn live_stream_lifetime(mut self, lifetime: Duration) -> Self {
        self.live_stream_lifetime = lifetime;
        self
    }

    /// How long a live stream lasts with nothing to tell (default
    /// [`DEFAULT_JOB_STREAM_IDLE`]): a job that waits or sleeps does not hold a stream
    /// for the whole lifetime; the client's `EventSource` reconnects and starts from the
    /// job's current state.
    pub fn live_stream_idle(mut self, idle: Duration) -> Self {
        self.live_stream_idle = idle;
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

/// Live streams open at once on one job by default.
pub const DEFAULT_MAX_STREAMS_PER_JOB: usize = 4;

/// Live streams one client holds at once by default.
pub const DEFAULT_MAX_STREAMS_PER_CLIENT: usize = 16;

const DEFAULT_STREAM_CAPS: StreamCaps = StreamCaps {
    all: DEFAULT_MAX_JOB_STREAMS,
    per_job: DEFAULT_MAX_STREAMS_PER_JOB,
    per_client: DEFAULT_MAX_STREAMS_PER_CLIENT,
};

/// How long a job's live stream lasts by default before it ends (and the client's
/// `EventSource` opens another): no stream is held for ever, and a proxy's idle limit
/// never cuts one mid-update.
pub const DEFAULT_JOB_STREAM_LIFETIME: Duration = Duration::from_secs(300);

/// How long a job's live stream lasts by default with nothing to tell.
pub const DEFAULT_JOB_STREAM_IDLE: Duration = Duration::from_secs(60);
