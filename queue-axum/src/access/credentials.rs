//! Ready-made access policies: HTTP Basic and bearer credentials checked against a
//! [`Secret`], so that an application's policy is one line:
//! `Access::bearer(token).or(Access::basic("ops", token))`.

use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use base64::Engine as _;

use super::decision::{Access, AccessPolicy};
use super::failures::Failures;
use super::secret::Secret;

/// How long a Basic user name may be in the audit log (it is the client's word).
const MAX_LOGGED_USER: usize = 64;

/// An access policy that lets in the holders of credentials: built with
/// [`Access::basic`], [`Access::basic_any_user`] and [`Access::bearer`], combined with
/// [`or`](Credentials::or). A request without them is asked to log in: 401 with
/// `WWW-Authenticate: Basic realm=".."` (so that a browser shows its login prompt)
/// when Basic credentials would do, `Bearer realm=".."` when only a token would.
///
/// Each credential makes an operator by default ([`read_only`](Credentials::read_only)
/// to make a viewer) who does not see payloads ([`with_payloads`](Credentials::with_payloads)).
/// A browser sends Basic credentials with every request, cross-site ones too;
/// [`refusal`](super::refusal) refuses actions that do not come from the origin's own
/// pages, which is what makes that safe.
///
/// ```
/// use queue_axum::access::{Access, AccessPolicy};
///
/// // The operator's token as a bearer token, or as the password of any Basic user
/// // (the dashboard takes such a policy: `Dashboard::new(&app, policy)`).
/// let token = "4f1c0b2e9d7a6c5b8e3f2a1d0c9b8a7f";
/// let policy = Access::bearer(token).or(Access::basic_any_user(token)).with_payloads();
///
/// let request = axum::http::Request::builder()
///     .header("authorization", format!("Bearer {token}"))
///     .body(())
///     .unwrap();
/// let access = policy.decide(&request.into_parts().0);
/// assert!(access.can_act() && access.sees_payloads());
/// ```
#[derive(Debug, Clone)]
#[must_use = "a policy does nothing until it decides requests (the dashboard's, or a guard of your own)"]
pub struct Credentials {
    rules: Vec<Rule>,
    realm: String,
    /// Wrong credentials per client address, shared by the policy's clones.
    failures: Arc<Failures>,
}

/// How many wrong credentials a client address sends in a window before it is refused
/// (429) until the window ends, by default.
pub const DEFAULT_MAX_FAILURES: u32 = 10;

/// The window [`DEFAULT_MAX_FAILURES`] counts in.
pub const DEFAULT_FAILURE_WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
struct Rule {
    scheme: Scheme,
    read_only: bool,
    payloads: bool,
    reveal: bool,
}

#[derive(Debug, Clone)]
enum Scheme {
    /// `Authorization: Basic base64(user:password)`; `None`: any user name.
    Basic {
        user: Option<String>,
        password: Secret,
    },
    /// `Authorization: Bearer <token>`.
    Bearer { token: Secret },
}

impl Access {
    /// A policy: operator access for HTTP Basic credentials, user `user` and password
    /// `password` (a [`Secret`]: the password itself, or its SHA-256). The user name is
    /// compared exactly.
    pub fn basic(user: impl Into<String>, password: impl Into<Secret>) -> Credentials {
        Credentials::one(Scheme::Basic {
            user: Some(user.into()),
            password: password.into(),
        })
    }

    /// A policy: operator access for HTTP Basic credentials with any user name and
    /// `password`; the name given goes into the audit log.
    pub fn basic_any_user(password: impl Into<Secret>) -> Credentials {
        Credentials::one(Scheme::Basic {
            user: None,
            password: password.into(),
        })
    }

    /// A policy: operator access for `Authorization: Bearer <token>`.
    pub fn bearer(token: impl Into<Secret>) -> Credentials {
        Credentials::one(Scheme::Bearer {
            token: token.into(),
        })
    }
}

impl Credentials {
    fn one(scheme: Scheme) -> Self {
        Credentials {
            rules: vec![Rule {
                scheme,
                read_only: false,
                payloads: false,
                reveal: false,
            }],
            realm: "queues".to_owned(),
            failures: Arc::new(Failures::new(DEFAULT_MAX_FAILURES, DEFAULT_FAILURE_WINDOW)),
        }
    }

    /// A client address that sends `max` wrong credentials within `window` is refused,
    /// 429 with `Retry-After`, until the window ends, whatever it sends meanwhile
    /// (default: 10 a minute). A request without credentials is no failure: a browser
    /// asks first without them. The client's address is axum's `ConnectInfo`, which
    /// [`serve`](crate::serve) records (an IPv6 client by its /64); a request without
    /// one is not counted. Behind a reverse proxy every client has the proxy's address,
    /// and one client's guesses would lock the others out: put the client's own address
    /// in `ConnectInfo` (from your proxy's header) in a middleware in front.
    pub fn max_failures(mut self, max: u32, window: Duration) -> Self {
        self.failures = Arc::new(Failures::new(max, window));
        self
    }

    /// Also lets in the holders of `other`'s credentials, with `other`'s access.
    pub fn or(mut self, other: Credentials) -> Self {
        self.rules.extend(other.rules);
        self
    }

    /// The credentials so far make viewers: they may look, not act.
    pub fn read_only(mut self) -> Self {
        self.rules.iter_mut().for_each(|r| r.read_only = true);
        self
    }

    /// The credentials so far also see job payloads and return values.
    pub fn with_payloads(mut self) -> Self {
        self.rules.iter_mut().for_each(|r| r.payloads = true);
        self
    }

    /// The credentials so far also see sealed payloads opened
    /// ([`Access::with_reveal`]; each opening is logged).
    pub fn with_reveal(mut self) -> Self {
        self.rules.iter_mut().for_each(|r| {
            r.payloads = true;
            r.reveal = true;
        });
        self
    }

    /// The realm the login challenge names (default `queues`), which a browser shows.
    pub fn realm(mut self, realm: impl Into<String>) -> Self {
        self.realm = realm.into();
        self
    }

    /// The `WWW-Authenticate` value of a refusal.
    fn challenge(&self) -> HeaderValue {
        let basic = self
            .rules
            .iter()
            .any(|r| matches!(r.scheme, Scheme::Basic { .. }));
        // A quoted-string: no quote, backslash or control character inside.
        let realm: String = self
            .realm
            .chars()
            .filter(|c| !c.is_control() && *c != '"' && *c != '\\')
            .collect();
        let value = if basic {
            format!("Basic realm=\"{realm}\", charset=\"UTF-8\"")
        } else {
            format!("Bearer realm=\"{realm}\"")
        };
        HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("Basic realm=\"queues\""))
    }
}

impl AccessPolicy for Credentials {
    fn decide(&self, request: &Parts) -> Access {
        let client = Failures::client(request);
        if let Some(retry_after) = self.failures.blocked(client) {
            return Access::too_many_failures(retry_after);
        }
        let presented = Presented::of(request);
        for rule in &self.rules {
            if let Some(who) = presented.as_ref().and_then(|p| p.satisfies(&rule.scheme)) {
                let access = if rule.read_only {
                    Access::read_only(who)
                } else {
                    Access::operator(who)
                };
                return match (rule.payloads, rule.reveal) {
                    (_, true) => access.with_reveal(),
                    (true, false) => access.with_payloads(),
                    (false, false) => access,
                };
            }
        }
        if request.headers.contains_key(header::AUTHORIZATION) {
            self.failures.record(client);
        }
        Access::login_required(self.challenge())
    }
}

/// The credentials a request presents.
enum Presented {
    Basic { user: String, password: Vec<u8> },
    Bearer(Vec<u8>),
}

impl Presented {
    fn of(request: &Parts) -> Option<Self> {
        let value = request.headers.get(header::AUTHORIZATION)?.as_bytes();
        let space = value.iter().position(|b| *b == b' ')?;
        let (scheme, rest) = value.split_at(space);
        let rest = rest.trim_ascii();
        // The scheme's name is case-insensitive (RFC 9110, 11.1).
        if scheme.eq_ignore_ascii_case(b"bearer") {
            return (!rest.is_empty()).then(|| Presented::Bearer(rest.to_vec()));
        }
        if !scheme.eq_ignore_ascii_case(b"basic") {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()?;
        let colon = decoded.iter().position(|b| *b == b':')?;
        let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
        Some(Presented::Basic {
            user,
            password: decoded[colon + 1..].to_vec(),
        })
    }

    /// Who this is, when the credentials are those `scheme` asks for.
    fn satisfies(&self, scheme: &Scheme) -> Option<String> {
        match (self, scheme) {
            (Presented::Bearer(token), Scheme::Bearer { token: secret }) => {
                secret.matches(token).then(|| "bearer token".to_owned())
            }
            (
                Presented::Basic { user, password },
                Scheme::Basic {
                    user: wanted,
                    password: secret,
                },
            ) => {
                // The password is checked whatever the user name, so that timing does
                // not tell a known name from an unknown one.
                let password_ok = secret.matches(password);
                let user_ok = wanted.as_deref().is_none_or(|wanted| wanted == user);
                (password_ok && user_ok).then(|| {
                    user.chars()
                        .filter(|c| !c.is_control())
                        .take(MAX_LOGGED_USER)
                        .collect()
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(authorization: Option<&str>) -> Parts {
        let mut request = Request::builder().uri("/");
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn basic(user_password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_password)
        )
    }

    #[test]
    fn credentials_decide_who_and_what() {
        let policy = Access::basic("ops", "pw")
            .with_payloads()
            .or(Access::bearer("tok").read_only());
        let ops = policy.decide(&parts(Some(&basic("ops:pw"))));
        assert!(ops.can_act() && ops.sees_payloads());
        assert_eq!(ops.who(), "ops");
        let viewer = policy.decide(&parts(Some("Bearer tok")));
        assert!(viewer.can_see() && !viewer.can_act() && !viewer.sees_payloads());
        // A password with a colon in it is the password's.
        let colon = Access::basic_any_user("a:b").decide(&parts(Some(&basic("x:a:b"))));
        assert!(colon.can_act());
        assert_eq!(colon.who(), "x");
        for refused in [
            None,
            Some("Bearer pw"),
            Some("Basic ???"),
            Some(&*basic("ops:tok")),
        ] {
            assert!(!policy.decide(&parts(refused)).can_see(), "{refused:?}");
        }
    }

    /// `parts(authorization)` from the client address `ip`, as `serve` records it.
    fn from(ip: [u8; 4], authorization: Option<&str>) -> Parts {
        let mut parts = parts(authorization);
        let peer = std::net::SocketAddr::from((ip, 40_000));
        parts.extensions.insert(axum::extract::ConnectInfo(peer));
        parts
    }

    #[test]
    fn a_client_that_keeps_guessing_is_refused_until_its_window_ends() {
        let policy = Access::bearer("right-token").max_failures(3, Duration::from_secs(60));
        let guesser = [10, 0, 0, 1];
        for _ in 0..3 {
            let access = policy.decide(&from(guesser, Some("Bearer wrong")));
            assert!(access.challenge().is_some() && access.retry_after().is_none());
        }
        // Another client logs in as ever; a client not known is never counted.
        assert!(policy
            .decide(&from([10, 0, 0, 2], Some("Bearer right-token")))
            .can_act());
        for _ in 0..5 {
            policy.decide(&parts(Some("Bearer wrong")));
        }
        assert!(policy.decide(&parts(Some("Bearer right-token"))).can_act());
        // Now even the right token is refused: a guess that lands tells nothing.
        let blocked = policy.decide(&from(guesser, Some("Bearer right-token")));
        assert!(!blocked.can_see());
        let refusal = super::super::refusal(&blocked, &parts(None)).unwrap();
        assert_eq!(refusal.status(), axum::http::StatusCode::TOO_MANY_REQUESTS);
        assert!(refusal.retry_after().is_some());
        // A request without credentials (a browser's first) is no failure.
        let fresh = Access::bearer("right-token").max_failures(1, Duration::from_secs(60));
        for _ in 0..3 {
            fresh.decide(&from(guesser, None));
        }
        assert!(fresh
            .decide(&from(guesser, Some("Bearer right-token")))
            .can_act());
    }

    #[test]
    fn the_challenge_asks_for_what_would_do() {
        let basic = Access::basic("a", "b").realm("my \"queues\"");
        assert_eq!(
            basic.challenge(),
            "Basic realm=\"my queues\", charset=\"UTF-8\""
        );
        assert_eq!(Access::bearer("t").challenge(), "Bearer realm=\"queues\"");
    }
}
