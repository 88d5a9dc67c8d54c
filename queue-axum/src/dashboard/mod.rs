//! A dashboard for every queue of the app, to mount under any path (feature
//! `dashboard`): server-rendered pages, embedded assets, no Node and no CDN.
//!
//! It cannot be built without an [`AccessPolicy`]: the application decides, for each
//! request, whether it is forbidden, read-only or an operator's, and whether payloads
//! show. There is no open default. Actions are POSTs, refused unless they come from the
//! dashboard's own origin (`Sec-Fetch-Site`, else `Origin` against `Host`), and every
//! action is logged with who, what and which job on the [`AUDIT_TARGET`] tracing target.
//!
//! Pages:
//! - `/`: every queue with its counts per state, and whether it is paused;
//! - `/queues/{queue}?state=failed&page=2`: a queue's jobs in one state, newest first,
//!   50 a page, and a lookup by id;
//! - `/queues/{queue}/jobs/{id}`: one job: state, attempts, times, progress, failure,
//!   logs, and its payload and return value where the policy allows.
//!
//! More pages: a queue's schedulers (run one now, remove it), the workers connected to
//! it, and a form to add a job, whose JSON is checked against the payload type of the
//! handler this app has for the job's name before the add.
//!
//! Actions (operators): retry, promote or remove a job; pause, resume, retry every failed
//! job, promote every delayed job, drain, clean a state of jobs older than an age.
//!
//! ```no_run
//! use axum::Router;
//! use queue_axum::dashboard::{Access, Dashboard};
//!
//! # fn demo(app: queue_core::QueueApp) {
//! // `x-operator` is set by the authenticating proxy in front of the app, which strips
//! // any copy a client sends; see `Access` for the levels.
//! let dashboard = Dashboard::new(&app, |request: &axum::http::request::Parts| {
//!     match request.headers.get("x-operator") {
//!         Some(_) => Access::operator("ops"),
//!         None => Access::forbidden(),
//!     }
//! });
//! let router: Router = Router::new().nest("/admin/queues", dashboard.router());
//! # }
//! ```

mod access;
mod actions;
mod add_job;
mod credentials;
mod html;
mod live;
mod pages;
mod secret;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use queue_core::QueueApp;

pub use access::{Access, AccessPolicy};
pub use credentials::Credentials;
pub use live::{DEFAULT_LIVE_STREAM_LIFETIME, DEFAULT_MAX_LIVE_STREAMS};
pub use secret::{InvalidSecret, Secret};

/// The tracing target of the audit log: one event per action, with who, what, which
/// queue and job, and the outcome.
pub const AUDIT_TARGET: &str = "queue_axum::dashboard::audit";

/// Jobs on one page of a queue.
pub const PAGE_SIZE: usize = 50;

/// The dashboard's router, built with the application's access policy.
///
/// See the [module docs](self) for the pages and actions.
///
/// ```no_run
/// use axum::http::request::Parts;
/// use axum::Router;
/// use queue_axum::dashboard::{Access, Dashboard};
///
/// # fn demo(app: queue_core::QueueApp) {
/// // Roles from the authenticating proxy in front of the app (which strips any copy a
/// // client sends). Support staff may look; the on-call operator may act and see
/// // payloads.
/// let policy = |request: &Parts| match request.headers.get("x-staff-role") {
///     Some(role) if role == "oncall" => Access::operator("oncall").with_payloads(),
///     Some(role) if role == "support" => Access::read_only("support"),
///     _ => Access::forbidden(),
/// };
/// let router: Router = Router::new().nest("/ops/queues", Dashboard::new(&app, policy).router());
/// # }
/// ```
pub struct Dashboard {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard").finish_non_exhaustive()
    }
}

/// What every handler reads.
pub(crate) struct Shared {
    app: QueueApp,
    policy: Box<dyn AccessPolicy>,
    live: Arc<live::LiveHub>,
}

impl Dashboard {
    /// A dashboard over `app`'s queues, each request decided by `policy`.
    pub fn new(app: &QueueApp, policy: impl AccessPolicy) -> Self {
        Dashboard {
            shared: Arc::new(Shared {
                app: app.clone(),
                policy: Box::new(policy),
                live: Arc::default(),
            }),
        }
    }

    /// The most live streams (a queue page's live counts) open at once; more answer 503
    /// and their pages work without live updates. Default
    /// [`DEFAULT_MAX_LIVE_STREAMS`].
    pub fn max_live_streams(mut self, max: usize) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            if let Some(hub) = Arc::get_mut(&mut shared.live) {
                hub.streams = Arc::new(tokio::sync::Semaphore::new(max));
            }
        }
        self
    }

    /// How long a live stream lasts before it ends and the tab opens another. Default
    /// [`DEFAULT_LIVE_STREAM_LIFETIME`].
    pub fn live_stream_lifetime(mut self, lifetime: Duration) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            if let Some(hub) = Arc::get_mut(&mut shared.live) {
                hub.lifetime = lifetime;
            }
        }
        self
    }

    /// The router, to `nest` under the path of your choice.
    pub fn router(self) -> Router {
        let shared = self.shared;
        Router::new()
            .route("/", get(pages::overview))
            .route("/assets/dashboard.css", get(stylesheet))
            .route("/assets/live.js", get(live::script))
            .route("/queues/{queue}/live", get(live::stream))
            .route("/queues/{queue}", get(pages::queue))
            .route("/queues/{queue}/jobs/{id}", get(pages::job))
            .route("/queues/{queue}/jobs/{id}/{action}", post(actions::on_job))
            .route("/queues/{queue}/schedulers", get(pages::schedulers))
            .route(
                "/queues/{queue}/schedulers/{id}/{action}",
                post(actions::on_scheduler),
            )
            .route("/queues/{queue}/workers", get(pages::workers))
            .route(
                "/queues/{queue}/add",
                get(add_job::form).post(add_job::submit),
            )
            .route("/queues/{queue}/actions/clean", post(actions::clean))
            .route("/queues/{queue}/actions/{action}", post(actions::on_queue))
            .fallback(|| async { html::error_page(StatusCode::NOT_FOUND, "No such page.") })
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                access::guard,
            ))
            .with_state(shared)
    }
}

async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        html::STYLESHEET,
    )
        .into_response()
}

/// Where the dashboard is mounted, for its links: the path it was nested under, behind
/// the `X-Forwarded-Prefix` a reverse proxy that strips a sub-path sends.
#[derive(Debug, Clone)]
pub(crate) struct Base(String);

impl Base {
    fn of(parts: &Parts) -> Base {
        let inner = parts.uri.path();
        let full = parts
            .extensions
            .get::<OriginalUri>()
            .map_or(inner, |original| original.path());
        let mounted = full.strip_suffix(inner).unwrap_or("");
        let mounted = if inner == "/" { full } else { mounted };
        let forwarded = parts
            .headers
            .get("x-forwarded-prefix")
            .and_then(|v| v.to_str().ok())
            .filter(|p| {
                p.starts_with('/')
                    && p.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"/-_.~".contains(&b))
            })
            .unwrap_or("");
        Base(
            format!("{forwarded}{mounted}")
                .trim_end_matches('/')
                .to_owned(),
        )
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// A queue's page (a URL: escape it for HTML).
    pub(crate) fn queue_page(&self, queue: &str) -> String {
        format!("{}/queues/{}", self.0, html::url_segment(queue))
    }

    /// A job's page (a URL: escape it for HTML).
    pub(crate) fn job_page(&self, queue: &str, id: &str) -> String {
        format!("{}/jobs/{}", self.queue_page(queue), html::url_segment(id))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Base {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Base::of(parts))
    }
}

impl Shared {
    /// The queue named in the path, if the app knows it.
    fn queue(&self, name: &str) -> Result<queue_core::Queue<serde_json::Value>, Problem> {
        if !self.app.known_queues().iter().any(|q| q == name) {
            return Err(Problem::NotFound(format!(
                "No queue named {} in this app.",
                crate::quote(name)
            )));
        }
        Ok(self.app.queue::<serde_json::Value>(name)?)
    }
}

/// The job id in a path, if it could name a job. Checked before any read or action, as
/// the status route checks it: an id that names one of the queue's own keys (`meta`, or
/// `repeat:<scheduler>`, a scheduler's definition) is no job, and an action on it would
/// act on that key.
fn job_id<'a>(queue: &str, id: &'a str) -> Result<&'a str, Problem> {
    if queue_core::could_be_job_id(id) {
        Ok(id)
    } else {
        Err(Problem::NotFound(format!(
            "No job {} in queue {}.",
            crate::quote(id),
            crate::quote(queue)
        )))
    }
}

/// Why a page or an action could not be served, answered as a page with its status.
#[derive(Debug)]
pub(crate) enum Problem {
    /// 404: no such queue, job or page.
    NotFound(String),
    /// 400: a bad parameter, with the reason.
    BadRequest(String),
    /// What a queue call refused or could not do: the status and the text
    /// `QueueError` gives a client (503 when Redis is unavailable; nothing of our
    /// internals).
    Queue(Box<queue_core::Error>),
}

impl From<queue_core::Error> for Problem {
    fn from(error: queue_core::Error) -> Self {
        Problem::Queue(Box::new(error))
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        match self {
            Problem::NotFound(message) => html::error_page(StatusCode::NOT_FOUND, &message),
            Problem::BadRequest(message) => html::error_page(StatusCode::BAD_REQUEST, &message),
            Problem::Queue(error) => {
                let error = crate::QueueError::from(*error);
                let status = error.status();
                if status == StatusCode::INTERNAL_SERVER_ERROR {
                    tracing::error!(error = %error, "dashboard: queue error");
                }
                html::error_page(status, &error.body_text())
            }
        }
    }
}

/// What a page handler answers.
pub(crate) type PageResult = Result<Response, Problem>;
