//! [`IdempotencyLayer`]: its settings, and the service it wraps a route in.

use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use queue_core::QueueApp;
use tower::Layer;

use super::service::IdempotencyService;
use super::settings::Settings;

/// Honours the `Idempotency-Key` request header on the routes it wraps (the IETF draft
/// "The Idempotency-Key HTTP Header Field"): the first request with a key runs, and its
/// answer is kept in the app's Redis; a retry with the same key gets that answer again,
/// with `Idempotent-Replayed: true`, and the work does not run twice.
///
/// - The same key with another request (another body, query or content type) is
///   refused, 422: the client reused a key by mistake.
/// - A duplicate that arrives while the first still runs is refused, 409 with
///   `Retry-After`; retried later, it gets the first answer.
/// - A malformed key (not 1 to 255 visible ASCII characters, bare or as a quoted
///   Structured Field string) is 400; so is a missing one where
///   [`require_key`](Self::require_key) says it must be sent.
/// - Answers a client should retry (5xx, 408, 429) are not kept: the retry runs again.
///   Neither are event streams or bodies over [`max_answer_bytes`](Self::max_answer_bytes).
/// - Keys are per method and path, and per caller: who [`scope_by`](Self::scope_by)
///   says the caller is, else who the application's access decision says it is (an
///   [`Access`](crate::access::Access) in the request's extensions, as a guard of
///   yours or queue-dashboard's inserts). They expire after [`ttl`](Self::ttl) (one
///   hour by default).
/// - A caller claims at most [`max_new_keys`](Self::max_new_keys) new keys a minute
///   (300 by default; the caller is `scope_by`'s scope, else the client's address as
///   [`serve`](crate::serve) records it; a caller neither names is not counted): over
///   it, 429 with `Retry-After`, and nothing runs or is kept. Without it one client
///   could fill Redis with records.
/// - A request holds its key fifteen seconds at a time, extended while it runs (up to
///   [`hold`](Self::hold)): a process that dies mid-request frees the key within
///   fifteen seconds, and a duplicate's 409 says in its `Retry-After` when the hold
///   ends at the latest (it may be retried sooner). A request that could not claim its
///   key (Redis stalled past the app's timeout: 503) leaves no hold behind when Redis
///   wakes: its retry runs.
/// - The answer is kept sealed (AES-256-GCM) under a key derived from the client's
///   `Idempotency-Key`, which is not kept; the request's fingerprint is keyed by it
///   too. Whoever reads Redis, its files or its replicas sees neither the answer (a
///   token it carries) nor the request, unless they guess the client's key: as strong
///   as the key is random.
/// - With Redis unavailable, a request with a key is answered 503 with `Retry-After` and
///   nothing runs: a promise to run once cannot be kept without the record. Requests
///   without a key, and `GET`, `HEAD`, `OPTIONS` and `TRACE`, pass through untouched.
///
/// ```no_run
/// use axum::{routing::post, Router};
/// use queue_axum::{IdempotencyLayer, QueueLayer};
///
/// # async fn create_order() -> &'static str { "ok" }
/// # fn demo(app: queue_core::QueueApp) {
/// let idempotent = IdempotencyLayer::new(&app)
///     // A key is one caller's: another account's identical request is not theirs.
///     .scope_by(|request| {
///         request.headers.get("x-account").and_then(|v| v.to_str().ok()).map(str::to_owned)
///     });
/// let router: Router = Router::new()
///     .route("/orders", post(create_order).layer(idempotent))
///     .layer(QueueLayer::new(&app));
/// # }
/// ```
///
/// A kept answer goes to whoever sends the same key with the same request within the
/// ttl. Where an answer holds a secret (a token a sign-up returns), scope keys by the
/// caller when there is one, and have clients use random keys (a UUID): the key is
/// what opens the kept answer.
///
/// Behind a reverse proxy every anonymous client has the proxy's address: give
/// [`scope_by`](Self::scope_by) the client's address from the header your proxy sets,
/// or raise [`max_new_keys`](Self::max_new_keys).
#[derive(Clone)]
#[must_use]
pub struct IdempotencyLayer {
    settings: Settings,
}

impl std::fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.settings;
        f.debug_struct("IdempotencyLayer")
            .field("ttl", &s.ttl)
            .field("hold", &s.hold)
            .field("require_key", &s.require_key)
            .field("scoped", &s.scope.is_some())
            .field("new_keys", &s.new_keys)
            .finish_non_exhaustive()
    }
}

/// How long a kept answer is replayed, by default: long enough for a client's retries,
/// short enough that the records of a flood of keys do not stay a day.
pub const DEFAULT_IDEMPOTENCY_TTL: Duration = Duration::from_secs(3600);

/// How many new keys a caller claims a minute, by default.
pub const DEFAULT_MAX_NEW_KEYS_PER_MINUTE: u64 = 300;

impl IdempotencyLayer {
    /// Keeps answers in `app`'s Redis, under `<prefix>:idempotency:`.
    pub fn new(app: &QueueApp) -> Self {
        IdempotencyLayer {
            settings: Settings {
                claims: app.claims("idempotency").map_err(|e| e.to_string()),
                ttl: DEFAULT_IDEMPOTENCY_TTL,
                hold: Duration::from_secs(60),
                require_key: false,
                max_body_bytes: 2 * 1024 * 1024,
                max_answer_bytes: 1024 * 1024,
                scope: None,
                new_keys: Some((DEFAULT_MAX_NEW_KEYS_PER_MINUTE, Duration::from_secs(60))),
            },
        }
    }

    /// How long an answer is kept and replayed (one hour by default).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.settings.ttl = ttl;
        self
    }

    /// The longest a request that has not answered holds its key (60 s by default).
    /// It holds it fifteen seconds at a time, extended while it runs, so that a process
    /// that dies mid-request frees the key within fifteen seconds; a request that runs
    /// longer than this loses its key, and its answer is not kept. Give more than the
    /// longest request.
    pub fn hold(mut self, hold: Duration) -> Self {
        self.settings.hold = hold;
        self
    }

    /// Whether a request without the header is refused, 400 (by default it runs, with
    /// no protection).
    pub fn require_key(mut self, required: bool) -> Self {
        self.settings.require_key = required;
        self
    }

    /// The largest request body read for the request's fingerprint (2 MiB, axum's
    /// default body limit); a larger one is refused, 413.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.settings.max_body_bytes = bytes;
        self
    }

    /// The largest answer kept (1 MiB); a larger one is not kept: the client gets a
    /// 500 and may retry, and the layer logs it at `warn`.
    pub fn max_answer_bytes(mut self, bytes: usize) -> Self {
        self.settings.max_answer_bytes = bytes;
        self
    }

    /// Who the caller is (the account or tenant the request is authenticated as), so
    /// that two callers' keys never meet. `None`: an anonymous caller, one scope for
    /// them all. Without it, the caller is who an [`Access`](crate::access::Access) in
    /// the request's extensions names, if there is one.
    pub fn scope_by<F>(mut self, scope: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        self.settings.scope = Some(Arc::new(scope));
        self
    }

    /// How many new keys one caller may claim per `window` (300 a minute by default);
    /// over it, 429 with `Retry-After`. The caller is its scope
    /// ([`scope_by`](Self::scope_by)), else the client's address (known under
    /// [`serve`](crate::serve), or axum's `ConnectInfo`), else one bucket for all.
    pub fn max_new_keys(mut self, keys: u64, window: Duration) -> Self {
        self.settings.new_keys = Some((keys.max(1), window.max(Duration::from_millis(1))));
        self
    }

    /// No bound on new keys per caller (a bound of your own is in front, say).
    pub fn unbounded_new_keys(mut self) -> Self {
        self.settings.new_keys = None;
        self
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = IdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService::new(inner, Arc::new(self.settings.clone()))
    }
}
