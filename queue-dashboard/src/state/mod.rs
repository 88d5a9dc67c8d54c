//! What every handler reads ([`Shared`]: the app, the access policy, the live feeds, the
//! trusted proxies, the bound on searches), and [`Dashboard`], the builder that sets it
//! up.

pub(crate) mod searches;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use queue_axum::access::AccessPolicy;
use queue_axum::quote;
use queue_core::QueueApp;

use crate::load::live::LiveHub;
use crate::problem::Problem;
use crate::text::clip;
use searches::Searches;

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
    /// Whether a search may look into payloads (`data.user_id = 42`).
    pub(crate) payload_search: bool,
    /// Each person's searches: one at a time, so many a minute.
    pub(crate) searches: Searches,
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
                payload_search: false,
                searches: Searches::default(),
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

    /// Lets the search box look into payloads: `data.user_id = 42` (or `data.user.email =
    /// ada@example.com`) lists the jobs whose payload has that field with that value.
    /// Off by default, and then such a search answers 400 saying so; an id prefix and
    /// `name = welcome` work either way.
    ///
    /// It is off because it is the costliest read the dashboard has: Redis decodes every
    /// payload it looks through (up to 5,000 a page, each up to 64 KB) inside one
    /// script, where the other searches read an id or a name. And it finds jobs by what
    /// users sent: it is offered only to those the policy shows payloads
    /// ([`Access::with_payloads`](crate::Access::with_payloads)), since a search's
    /// matches tell a payload's values a guess at a time. Turn it on where operators
    /// need it and payloads are small; it is bounded per person as every search is
    /// ([`max_searches_per_minute`](Self::max_searches_per_minute)).
    ///
    /// Sealed payloads ([`queue_core::encryption`]) are not searched, not even for a
    /// reader the policy lets reveal them
    /// ([`Access::with_reveal`](crate::Access::with_reveal)): the search would have to
    /// open every payload it looks through, one decryption each, and its matches would
    /// tell a sealed value a guess at a time, where a job's page opens one job and
    /// audits it. Redis sees only a sealed job's envelope, so it matches no payload
    /// field (a search for one of the envelope's own keys, `data.key = ..`, is checked
    /// again and its sealed matches left out), and every payload search's results say
    /// that sealed jobs are not searched. Find a sealed job by its id or name, and read
    /// it on its page.
    ///
    /// ```no_run
    /// # fn demo(app: queue_core::QueueApp) {
    /// use queue_dashboard::{Access, Dashboard};
    /// let dashboard = Dashboard::new(&app, |_: &axum::http::request::Parts| Access::operator("ops"))
    ///     .payload_search(true);
    /// # }
    /// ```
    pub fn payload_search(mut self, enabled: bool) -> Self {
        if let Some(shared) = self.shared_mut() {
            shared.payload_search = enabled;
        }
        self
    }

    /// The most searches (a queue page with `q=` or `name=`) one person starts a
    /// minute: `max` at once, then one each `60 / max` seconds (a bucket of `max`,
    /// refilled at `max` a minute). A person also runs one search at a time. Over either
    /// bound the page answers 429 with `Retry-After` and says when to try again; the
    /// other pages are not counted, and nothing of it is audited (it is a read).
    ///
    /// A search reads through thousands of jobs (20,000 ids for an id prefix, 5,000
    /// jobs otherwise), about 23 ms of Redis, where another page reads a few dozen: four
    /// people searching in a loop saturated Redis. A person is whom the policy names
    /// ([`Access::who`](crate::Access::who), as the audit names them); a request it
    /// names nobody for counts as its connection's peer address (when the server records
    /// it: `into_make_service_with_connect_info::<SocketAddr>()`), and without one, with
    /// every other such request. Default
    /// [`DEFAULT_MAX_SEARCHES_PER_MINUTE`](crate::DEFAULT_MAX_SEARCHES_PER_MINUTE); `0`
    /// is taken as 1.
    pub fn max_searches_per_minute(mut self, max: u32) -> Self {
        if let Some(shared) = self.shared_mut() {
            shared.searches = Searches::new(max);
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
