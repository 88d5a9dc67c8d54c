//! What every handler reads ([`Shared`]: the app, the access policy, the live feeds, the
//! trusted proxies), and [`Dashboard`], the builder that sets it up.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use queue_axum::access::AccessPolicy;
use queue_axum::quote;
use queue_core::QueueApp;

use crate::load::live::LiveHub;
use crate::problem::Problem;
use crate::text::clip;

/// The dashboard's router, built with the application's access policy.
///
/// See the [crate docs](crate) for the pages and actions.
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
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard").finish_non_exhaustive()
    }
}

/// What every handler reads.
pub(crate) struct Shared {
    pub(crate) app: QueueApp,
    pub(crate) policy: Box<dyn AccessPolicy>,
    pub(crate) live: Arc<LiveHub>,
    /// Proxies whose `X-Forwarded-Prefix` is believed.
    pub(crate) trusted_proxies: Vec<IpAddr>,
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
    /// [`DEFAULT_MAX_LIVE_STREAMS`](crate::DEFAULT_MAX_LIVE_STREAMS).
    pub fn max_live_streams(mut self, max: usize) -> Self {
        if let Some(hub) = self.shared_mut().and_then(|s| Arc::get_mut(&mut s.live)) {
            hub.streams = Arc::new(tokio::sync::Semaphore::new(max));
        }
        self
    }

    /// How long a live stream lasts before it ends and the tab opens another. Default
    /// [`DEFAULT_LIVE_STREAM_LIFETIME`](crate::DEFAULT_LIVE_STREAM_LIFETIME).
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
}

impl Shared {
    /// The queue named in the path, if the app knows it.
    pub(crate) fn queue(
        &self,
        name: &str,
    ) -> Result<queue_core::Queue<serde_json::Value>, Problem> {
        if !self.app.known_queues().iter().any(|q| q == name) {
            return Err(Problem::NotFound(format!(
                "No queue named {} in this app.",
                quote(&clip(name, 200))
            )));
        }
        Ok(self.app.queue::<serde_json::Value>(name)?)
    }
}
