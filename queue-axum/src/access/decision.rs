//! The application's access decision for a request ([`AccessPolicy`] gives an
//! [`Access`]), and what it refuses ([`refusal`]).

use std::time::Duration;

use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode};

use super::origin::{may_read, same_origin};

/// What a request may see and do, as the application's policy decided it: for the
/// dashboard's pages, or a route of the application's own.
///
/// ```
/// use queue_axum::access::Access;
///
/// let nobody = Access::forbidden();
/// let viewer = Access::read_only("support");
/// let admin = Access::operator("alice").with_payloads();
/// assert!(!nobody.can_see() && viewer.can_see() && !viewer.can_act());
/// assert!(admin.can_act() && admin.sees_payloads());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    level: Level,
    who: String,
    payloads: bool,
    /// Sees sealed payloads opened (each opening audited).
    reveal: bool,
    /// For a refusal that asks the browser to log in: the `WWW-Authenticate` value.
    challenge: Option<HeaderValue>,
    /// For a client refused after too many wrong credentials: when it may try again.
    retry_after: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Forbidden,
    ReadOnly,
    Operator,
}

impl Access {
    /// Nothing: the request is refused, 403.
    pub fn forbidden() -> Self {
        Access {
            level: Level::Forbidden,
            who: String::new(),
            payloads: false,
            reveal: false,
            challenge: None,
            retry_after: None,
        }
    }

    /// Nothing for now: the client sent too many wrong credentials, and is answered
    /// 429 until `retry_after` has passed, whatever it sends meanwhile.
    pub fn too_many_failures(retry_after: Duration) -> Self {
        Access {
            retry_after: Some(retry_after),
            ..Access::forbidden()
        }
    }

    /// Nothing yet: the request is answered 401 with `www_authenticate` (e.g. `Basic
    /// realm="queues"`), so that a browser asks for credentials.
    pub fn login_required(www_authenticate: HeaderValue) -> Self {
        Access {
            challenge: Some(www_authenticate),
            ..Access::forbidden()
        }
    }

    /// May look, not act; `who` names the person in the logs.
    pub fn read_only(who: impl Into<String>) -> Self {
        Access {
            level: Level::ReadOnly,
            who: who.into(),
            ..Access::forbidden()
        }
    }

    /// May look and act (retry, remove, pause...); every action is logged with `who`.
    pub fn operator(who: impl Into<String>) -> Self {
        Access {
            level: Level::Operator,
            who: who.into(),
            ..Access::forbidden()
        }
    }

    /// Also sees job payloads and return values (hidden by default: they hold what users
    /// sent).
    pub fn with_payloads(mut self) -> Self {
        self.payloads = true;
        self
    }

    /// Also sees sealed payloads and return values opened ([`queue_core::encryption`]):
    /// each opening is logged with [`who`](Self::who). Implies
    /// [`with_payloads`](Self::with_payloads). Without it, a sealed payload is shown as
    /// sealed, with its key's id.
    ///
    /// ```
    /// use queue_axum::access::Access;
    ///
    /// let support = Access::operator("bob").with_payloads();
    /// let privacy_officer = Access::read_only("carol").with_reveal();
    /// assert!(!support.reveals_sealed() && privacy_officer.reveals_sealed());
    /// ```
    pub fn with_reveal(mut self) -> Self {
        self.payloads = true;
        self.reveal = true;
        self
    }

    /// Whether sealed payloads are opened for it.
    pub fn reveals_sealed(&self) -> bool {
        self.reveal && self.sees_payloads()
    }

    /// Whether it may look.
    pub fn can_see(&self) -> bool {
        self.level >= Level::ReadOnly
    }

    /// Whether actions may be taken.
    pub fn can_act(&self) -> bool {
        self.level == Level::Operator
    }

    /// Whether payloads and return values are shown.
    pub fn sees_payloads(&self) -> bool {
        self.payloads && self.can_see()
    }

    /// Who the policy said this is.
    pub fn who(&self) -> &str {
        &self.who
    }

    /// The `WWW-Authenticate` value of a refusal that asks the browser to log in.
    pub fn challenge(&self) -> Option<&HeaderValue> {
        self.challenge.as_ref()
    }

    /// For a client refused after too many wrong credentials: when it may try again.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

/// Why a request is refused, in the order [`refusal`] checks: what the application's
/// decision does not allow, and what a browser must not do with its credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// It may see nothing yet: answer 401 with this `WWW-Authenticate`.
    LoginRequired(HeaderValue),
    /// It may see nothing: 403.
    Forbidden,
    /// A read another site asked for (its script, frame or image), which would read the
    /// answer with the visitor's credentials: 403.
    CrossSiteRead,
    /// An action from someone who may only look: 403.
    ReadOnly,
    /// An action (a POST) that does not come from this origin's pages: 403.
    CrossSiteAction,
    /// The client sent too many wrong credentials: 429, with `Retry-After` (whole
    /// seconds of this duration).
    TooManyFailures(Duration),
}

impl Refusal {
    /// Its status: 401 for a login, 429 for too many failures, else 403.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::LoginRequired(_) => StatusCode::UNAUTHORIZED,
            Refusal::TooManyFailures(_) => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::FORBIDDEN,
        }
    }

    /// The `Retry-After` value of a refusal that has one (whole seconds, at least 1).
    pub fn retry_after(&self) -> Option<HeaderValue> {
        match self {
            Refusal::TooManyFailures(after) => {
                let seconds = after.as_millis().div_ceil(1000).max(1);
                Some(HeaderValue::from(
                    u64::try_from(seconds).unwrap_or(u64::MAX),
                ))
            }
            _ => None,
        }
    }
}

/// Whether `access` lets `request` through: `None`, or why not. A POST is an action
/// (for an operator, from this origin's pages); anything else is a read (for anyone who
/// may look, refused to another site's scripts, frames and images).
pub fn refusal(access: &Access, request: &Parts) -> Option<Refusal> {
    let action = request.method == Method::POST;
    if !access.can_see() {
        return Some(match (&access.retry_after, &access.challenge) {
            (Some(after), _) => Refusal::TooManyFailures(*after),
            (None, Some(challenge)) => Refusal::LoginRequired(challenge.clone()),
            (None, None) => Refusal::Forbidden,
        });
    }
    if !action && !may_read(&request.headers) {
        return Some(Refusal::CrossSiteRead);
    }
    if action && !access.can_act() {
        return Some(Refusal::ReadOnly);
    }
    if action && !same_origin(&request.headers) {
        return Some(Refusal::CrossSiteAction);
    }
    None
}

/// The application's access decision for a request. Any
/// `Fn(&Parts) -> Access + Send + Sync + 'static` is one.
///
/// ```
/// use axum::http::request::Parts;
/// use queue_axum::access::Access;
///
/// // An operator token in a header; everyone else is refused.
/// let policy = |request: &Parts| match request.headers.get("authorization") {
///     Some(value) if value == "Bearer s3cret-operator-token" => Access::operator("ops"),
///     _ => Access::forbidden(),
/// };
/// # let _: &dyn queue_axum::access::AccessPolicy = &policy;
/// ```
pub trait AccessPolicy: Send + Sync + 'static {
    /// Decides what `request` may do.
    fn decide(&self, request: &Parts) -> Access;
}

impl<F> AccessPolicy for F
where
    F: Fn(&Parts) -> Access + Send + Sync + 'static,
{
    fn decide(&self, request: &Parts) -> Access {
        self(request)
    }
}
