//! A dashboard for every queue of the app, to mount under any path (feature
//! `dashboard`): server-rendered pages (maud templates, escaping by default), embedded
//! assets, no Node and no CDN.
//!
//! It cannot be built without an [`AccessPolicy`]: the application decides, for each
//! request, whether it is forbidden, read-only or an operator's, and whether payloads
//! show. There is no open default. Actions are POSTs, refused unless they come from the
//! dashboard's own origin (`Sec-Fetch-Site`, else `Origin` against `Host`); pages are
//! refused to other sites' scripts, frames and images (only a person following a link
//! opens one). Every action is logged with who, what and which job or group on the
//! [`AUDIT_TARGET`] tracing target, and every destructive one (drain, clean, remove,
//! obliterate, retry all) is confirmed on a page that says how many jobs it touches.
//!
//! Pages (one word per level under the mount point):
//! - `/`: Redis's health (memory against its limit, eviction policy, clients, version,
//!   ops/s) and every queue with its counts per state, the age of its oldest waiting
//!   job, and its throughput per minute;
//! - `/{queue}?state=failed&page=2`: a queue's jobs in one state, newest first, 50 a
//!   page, with bulk actions; `?q=` searches it (an id prefix, `name = ..`, or a payload
//!   field, `data.user_id = 42`) in a bounded scan that says how far it got;
//! - `/{queue}/jobs/{id}`: one job: state, times and durations, its attempt history
//!   with each failure's reason and error chain, the next retry, progress, logs, its
//!   whole flow tree, and its payload and return value where the policy allows;
//! - `/{queue}/groups?after=..`: a queue's fair groups by id, 50 a page, each with its
//!   waiting and running jobs, whether it is paused and its own limits; pause and
//!   resume (POSTs to `/{queue}/groups/{pause|resume}` naming the `group`);
//! - `/{queue}/schedulers`, `/{queue}/add`, `/-/workers`.
//!
//! Each page costs Redis a bounded number of commands, whatever the queue's size;
//! listed strings are cut in Redis; a live page is sent changes (counts, the states of
//! the jobs that moved) by one reader per queue, never refetched.
//!
//! ```no_run
//! use axum::Router;
//! use queue_dashboard::{Access, Dashboard};
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
//! let router: Router = Router::new().merge(dashboard.mount("/admin/queues"));
//! # }
//! ```

mod actions;
mod add_job;
mod base;
mod confirm;
mod guard;
mod live;
mod pages;
mod problem;
mod view;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use queue_core::QueueApp;

pub(crate) use base::Base;
pub use live::{DEFAULT_LIVE_STREAM_LIFETIME, DEFAULT_MAX_LIVE_STREAMS};
pub(crate) use problem::{job_id, PageResult, Problem};
pub use queue_axum::access::{Access, AccessPolicy, Credentials, InvalidSecret, Secret};

/// The tracing target of the audit log: one event per action, with who, what, which
/// queue and job, and the outcome.
pub const AUDIT_TARGET: &str = "queue_dashboard::audit";

/// Jobs on one page of a queue.
pub const PAGE_SIZE: usize = 50;

/// The dashboard's router, built with the application's access policy.
///
/// See the [module docs](self) for the pages and actions.
///
/// ```no_run
/// use axum::http::request::Parts;
/// use axum::Router;
/// use queue_dashboard::{Access, Dashboard};
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
/// let router: Router = Router::new().merge(Dashboard::new(&app, policy).mount("/ops/queues"));
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
    /// Proxies whose `X-Forwarded-Prefix` is believed.
    trusted_proxies: Vec<IpAddr>,
}

impl Dashboard {
    /// A dashboard over `app`'s queues, each request decided by `policy`.
    pub fn new(app: &QueueApp, policy: impl AccessPolicy) -> Self {
        Dashboard {
            shared: Arc::new(Shared {
                app: app.clone(),
                policy: Box::new(policy),
                live: Arc::default(),
                trusted_proxies: Vec::new(),
            }),
        }
    }

    fn shared_mut(&mut self) -> Option<&mut Shared> {
        Arc::get_mut(&mut self.shared)
    }

    /// The most live streams (a queue page's live counts) open at once; more answer 503
    /// and their pages work without live updates. Default
    /// [`DEFAULT_MAX_LIVE_STREAMS`].
    pub fn max_live_streams(mut self, max: usize) -> Self {
        if let Some(hub) = self.shared_mut().and_then(|s| Arc::get_mut(&mut s.live)) {
            hub.streams = Arc::new(tokio::sync::Semaphore::new(max));
        }
        self
    }

    /// How long a live stream lasts before it ends and the tab opens another. Default
    /// [`DEFAULT_LIVE_STREAM_LIFETIME`].
    pub fn live_stream_lifetime(mut self, lifetime: Duration) -> Self {
        if let Some(hub) = self.shared_mut().and_then(|s| Arc::get_mut(&mut s.live)) {
            hub.lifetime = lifetime;
        }
        self
    }

    /// Believes the `X-Forwarded-Prefix` header (a reverse proxy serving the app under
    /// a sub-path it strips) on connections from these addresses, and only as a plain
    /// path. From anyone else, or without the peer address (serve with
    /// `into_make_service_with_connect_info::<SocketAddr>()`), the header is ignored: a
    /// client could otherwise point the dashboard's links and redirects elsewhere.
    ///
    /// ```no_run
    /// # fn demo(app: queue_core::QueueApp) {
    /// use queue_dashboard::{Access, Dashboard};
    /// let dashboard = Dashboard::new(&app, |_: &axum::http::request::Parts| Access::forbidden())
    ///     .trust_forwarded_prefix_from(["10.0.0.5".parse().unwrap()]);
    /// # }
    /// ```
    pub fn trust_forwarded_prefix_from(
        mut self,
        proxies: impl IntoIterator<Item = IpAddr>,
    ) -> Self {
        if let Some(shared) = self.shared_mut() {
            shared.trusted_proxies.extend(proxies);
        }
        self
    }

    /// The router, nested at `path` (`/admin/queues`), with `path/` redirected to it:
    /// merge it into the app's router.
    pub fn mount(self, path: &str) -> Router {
        let path = path.trim_end_matches('/');
        let home = if path.is_empty() { "/" } else { path }.to_owned();
        let router = self.router();
        if path.is_empty() {
            return router;
        }
        Router::new().nest(path, router).route(
            &format!("{path}/"),
            get(move |uri: Uri| async move { Redirect::permanent(&with_query(&home, &uri)) }),
        )
    }

    /// The router, to `nest` under the path of your choice ([`Dashboard::mount`] also
    /// redirects the path with a trailing slash, which `nest` leaves to the app).
    pub fn router(self) -> Router {
        let shared = self.shared;
        let guard = axum::middleware::from_fn_with_state(shared.clone(), guard::guard);
        Router::new()
            .route("/", get(pages::overview::page))
            .route("/-/assets/dashboard.css", get(stylesheet))
            .route("/-/assets/live.js", get(live::script))
            .route("/-/workers", get(pages::workers::page))
            .route("/{queue}", get(pages::queue::page))
            .route("/{queue}/live", get(live::stream))
            .route("/{queue}/bulk", post(actions::bulk))
            .route("/{queue}/jobs/{id}", get(pages::job::page))
            .route(
                "/{queue}/jobs/{id}/{action}",
                get(confirm::job_action).post(actions::on_job),
            )
            .route("/{queue}/schedulers", get(pages::schedulers::page))
            .route(
                "/{queue}/schedulers/{id}/{action}",
                post(actions::on_scheduler),
            )
            .route("/{queue}/groups", get(pages::groups::page))
            .route("/{queue}/groups/{action}", post(actions::on_group))
            .route("/{queue}/workers", get(pages::workers::of_queue))
            .route("/{queue}/add", get(add_job::form).post(add_job::submit))
            .route(
                "/{queue}/actions/clean",
                get(confirm::clean).post(actions::clean),
            )
            .route(
                "/{queue}/actions/{action}",
                get(confirm::queue_action).post(actions::on_queue),
            )
            .fallback(not_found)
            .layer(guard)
            .with_state(shared)
    }
}

/// `to` with the query of `uri`, if it has one.
fn with_query(to: &str, uri: &Uri) -> String {
    match uri.query() {
        Some(query) => format!("{to}?{query}"),
        None => to.to_owned(),
    }
}

/// No route: a path with a trailing slash goes to the path without it; anything else is
/// the dashboard's own 404 page.
async fn not_found(base: Base, uri: Uri) -> Response {
    let path = uri.path();
    let rest = path.trim_matches('/');
    // Only a plain path is sent back as a `Location`: `/\evil.example/` would read as
    // another host to a browser.
    let plain = rest
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~%/".contains(&b));
    if path.len() > 1 && path.ends_with('/') && plain && !rest.starts_with('/') {
        let to = format!("{}/{rest}", base.as_str());
        return Redirect::permanent(&with_query(&to, &uri)).into_response();
    }
    view::error_page(StatusCode::NOT_FOUND, "No such page.", Some(&base))
}

async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        view::STYLESHEET,
    )
        .into_response()
}

impl Shared {
    /// The queue named in the path, if the app knows it.
    fn queue(&self, name: &str) -> Result<queue_core::Queue<serde_json::Value>, Problem> {
        if !self.app.known_queues().iter().any(|q| q == name) {
            return Err(Problem::NotFound(format!(
                "No queue named {} in this app.",
                queue_axum::quote(&view::format::clip(name, 200))
            )));
        }
        Ok(self.app.queue::<serde_json::Value>(name)?)
    }
}
