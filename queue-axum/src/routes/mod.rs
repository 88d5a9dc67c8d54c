//! The job-status route: `GET /jobs/{queue}/{id}`; a flow job's parent and children
//! in [`flow`].

mod events;
mod flow;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use queue_core::{JobInfo, JobState, Queue, QueueApp};
use serde::Serialize;

use crate::error::QueueError;
use crate::extract::app_of;
use crate::quote;

/// The status route with default settings: `GET /jobs/{queue}/{id}` for every queue
/// the app knows, answering state, progress, attempts and timestamps only. Needs
/// [`QueueLayer`](crate::QueueLayer) on the router.
pub fn job_routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    JobRoutes::new().router()
}

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
    include_data: bool,
    include_failed_reason: bool,
    include_return_value: bool,
    queues: Option<Arc<[String]>>,
    redis_wait: Duration,
    /// One permit per open live stream, shared by the clones of these settings.
    live_streams: Arc<tokio::sync::Semaphore>,
    live_stream_lifetime: Duration,
}

/// How long the status route waits for Redis by default.
pub const DEFAULT_STATUS_REDIS_WAIT: Duration = Duration::from_millis(600);

/// How long the status route waits for the outbox once Redis has not answered: a read of
/// one row by its key, in the application's own database.
const OUTBOX_WAIT: Duration = Duration::from_millis(300);

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

    /// The router: the status at `/jobs/{queue}/{id}`, its live stream at
    /// `/jobs/{queue}/{id}/events`.
    pub fn router<S: Clone + Send + Sync + 'static>(self) -> Router<S> {
        Router::new()
            .route("/jobs/{queue}/{id}", get(status).with_state(self.clone()))
            .route(
                "/jobs/{queue}/{id}/events",
                get(events::stream).with_state(self),
            )
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

/// What the status route answers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobStatus {
    queue: String,
    id: String,
    name: String,
    state: Option<JobState>,
    progress: serde_json::Value,
    attempts_made: u32,
    max_attempts: u32,
    timestamp: u64,
    processed_on: Option<u64>,
    finished_on: Option<u64>,
    /// Present (possibly `null`) only when the route opts in.
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_reason: Option<Option<String>>,
    /// Each failed attempt's record, oldest first: present with `failed_reason`.
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt_errors: Option<Vec<String>>,
    /// When a delayed job (a retry waiting out its backoff too) runs, in ms since the
    /// Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    runs_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    return_value: Option<Option<serde_json::Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<serde_json::Value>,
    /// For a flow child.
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<flow::JobRef>,
    /// For a flow parent.
    #[serde(skip_serializing_if = "Option::is_none")]
    children: Option<flow::ChildrenStatus>,
}

fn not_found(what: &str, message: String) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({ "error": what, "message": message })),
    )
        .into_response()
}

/// The 404 of a queue this route does not serve.
fn unknown_queue(queue: &str) -> Response {
    not_found(
        "unknown queue",
        format!("this service has no queue {}", quote(queue)),
    )
}

/// The 404 of a job the queue does not have.
fn no_job(queue: &str, id: &str) -> Response {
    not_found(
        "job not found",
        format!("no job {} in queue {}", quote(id), quote(queue)),
    )
}

async fn status(
    State(settings): State<JobRoutes>,
    Path((queue, id)): Path<(String, String)>,
    parts: Parts,
) -> Response {
    let app = match app_of(&parts) {
        Ok(app) => app,
        Err(rejection) => return rejection.into_response(),
    };
    match lookup(&app, &queue, &id, &settings).await {
        Ok(Some(status)) => Json(status).into_response(),
        Ok(None) => no_job(&queue, &id),
        Err(Lookup::UnknownQueue) => unknown_queue(&queue),
        Err(Lookup::Queue(e)) => e.into_response(),
    }
}

pub(crate) enum Lookup {
    UnknownQueue,
    Queue(QueueError),
}

/// The job's status as these settings show it; `None` when there is no such job.
pub(crate) async fn lookup(
    app: &QueueApp,
    queue: &str,
    id: &str,
    settings: &JobRoutes,
) -> Result<Option<JobStatus>, Lookup> {
    if !settings.serves(app, queue) {
        return Err(Lookup::UnknownQueue);
    }
    let handle = app
        .queue::<serde_json::Value>(queue)
        .map_err(|_| Lookup::UnknownQueue)?;
    if !queue_core::options::could_be_job_id(id) {
        return Ok(None);
    }
    let wait = settings.redis_wait;
    let in_redis = tokio::time::timeout(wait, from_redis(app, &handle, queue, id, settings))
        .await
        .unwrap_or(Err(queue_core::Error::Timeout {
            what: "the job's status",
            after: wait,
        }));
    match in_redis {
        Err(e) if e.is_unavailable() => from_outbox(&handle, queue, id, settings)
            .await
            .ok_or_else(|| Lookup::Queue(e.into())),
        Err(e) => Err(Lookup::Queue(e.into())),
        Ok(found) => Ok(found),
    }
}

/// The job as Redis has it (or the outbox, for a job not there yet), with its flow.
async fn from_redis(
    app: &QueueApp,
    handle: &Queue<serde_json::Value>,
    queue: &str,
    id: &str,
    settings: &JobRoutes,
) -> Result<Option<JobStatus>, queue_core::Error> {
    // The job and its state in one read (`get_job` reads both in one transaction):
    // two reads could pair `completed` with the fields of a moment before.
    let (found, children) = tokio::try_join!(
        handle.get_job(id),
        handle.get_children(id, flow::CHILDREN_SHOWN)
    )?;
    let Some(info) = found else {
        return Ok(None);
    };
    let state = info.state;
    let flow = Flow {
        parent: flow::parent(&info, |queue| settings.serves(app, queue)),
        children: flow::children(children, settings),
    };
    Ok(Some(to_status(queue, info, state, flow, settings)))
}

/// With Redis unavailable: the job as it waits in the app's outbox, if it does; `None`
/// also when the outbox cannot say in time (the caller answers 503).
async fn from_outbox(
    handle: &Queue<serde_json::Value>,
    queue: &str,
    id: &str,
    settings: &JobRoutes,
) -> Option<Option<JobStatus>> {
    let waiting = tokio::time::timeout(OUTBOX_WAIT, handle.get_outbox_job(id)).await;
    let info = waiting.ok()?.ok()??;
    let state = info.state;
    // Not in Redis yet: no parent or children to show.
    let flow = Flow {
        parent: None,
        children: None,
    };
    Some(Some(to_status(queue, info, state, flow, settings)))
}

/// A job's place in its flow, for its status.
struct Flow {
    parent: Option<flow::JobRef>,
    children: Option<flow::ChildrenStatus>,
}

fn to_status(
    queue: &str,
    info: JobInfo,
    state: Option<JobState>,
    flow: Flow,
    settings: &JobRoutes,
) -> JobStatus {
    JobStatus {
        queue: queue.to_owned(),
        id: info.id,
        name: info.name,
        state,
        progress: info.progress,
        attempts_made: info.attempts_made,
        max_attempts: info.max_attempts,
        timestamp: info.timestamp_ms,
        processed_on: info.processed_on_ms,
        finished_on: info.finished_on_ms,
        failed_reason: settings.include_failed_reason.then_some(info.failed_reason),
        attempt_errors: settings.include_failed_reason.then_some(info.stacktrace),
        runs_at: info.runs_at_ms,
        return_value: settings.include_return_value.then_some(info.return_value),
        data: settings.include_data.then_some(info.data),
        parent: flow.parent,
        children: flow.children,
    }
}
