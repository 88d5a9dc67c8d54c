//! Where the sentinels are and the master's name: plain settings, a leaf that the
//! connection options name (`RedisConnectionOptions::sentinel`) without a circle.

/// The sentinels' default port.
pub const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// Where Redis Sentinel is, and the name of the master it keeps.
///
/// Set on [`RedisConnectionOptions::sentinel`](crate::options::RedisConnectionOptions::sentinel).
/// The master's own credentials, database and TLS are that struct's other fields; the
/// ones here are for the sentinels, which often have no password (or one of their own).
///
/// ```
/// use bullmq::sentinel::SentinelOptions;
///
/// let sentinel = SentinelOptions::new("mymaster", ["10.0.0.1:26379", "10.0.0.2"])
///     .password("sentinel-secret");
/// assert_eq!(sentinel.sentinels.len(), 2);
/// // Passwords never reach logs.
/// assert!(!format!("{sentinel:?}").contains("sentinel-secret"));
/// ```
#[derive(Clone)]
pub struct SentinelOptions {
    /// The name the sentinels monitor the master under (`sentinel monitor <name> ...`).
    pub master_name: String,
    /// The sentinels, `host:port` (`[::1]:26379` for IPv6; the port defaults to
    /// [`DEFAULT_SENTINEL_PORT`]). They are asked in this order.
    pub sentinels: Vec<String>,
    /// ACL user for the sentinels.
    pub username: Option<String>,
    /// Password for the sentinels (their `requirepass`).
    pub password: Option<String>,
    /// Speak TLS to the sentinels, with the certificates of
    /// [`RedisConnectionOptions::tls_certs`](crate::options::RedisConnectionOptions::tls_certs).
    pub tls: bool,
}

impl SentinelOptions {
    /// The master `master_name`, kept by `sentinels` (`host:port` each).
    pub fn new<I, S>(master_name: impl Into<String>, sentinels: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            master_name: master_name.into(),
            sentinels: sentinels.into_iter().map(Into::into).collect(),
            username: None,
            password: None,
            tls: false,
        }
    }

    /// Authenticate to the sentinels as this ACL user.
    pub fn username(mut self, username: impl Into<String>) -> Self {
        self.username = Some(username.into());
        self
    }

    /// Authenticate to the sentinels with this password.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Speak TLS to the sentinels.
    pub fn tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }
}

impl std::fmt::Debug for SentinelOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelOptions")
            .field("master_name", &self.master_name)
            .field("sentinels", &self.sentinels)
            .field("username", &self.username.as_ref().map(|_| "***"))
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("tls", &self.tls)
            .finish()
    }
}

/// `host:port`, `host`, `[v6]:port` or `[v6]` into a host and a port.
pub(crate) fn parse_address(address: &str) -> Result<(String, u16), String> {
    let address = address.trim();
    let (host, port) = match address.strip_prefix('[') {
        Some(rest) => {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("`{address}`: an IPv6 address needs its closing `]`"))?;
            match after {
                "" => (host, None),
                after => match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(format!("`{address}`: expected `:port` after `]`")),
                },
            }
        }
        None => match address.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => {
                return Err(format!(
                    "`{address}`: write an IPv6 address in brackets, `[{address}]` or `[host]:port`"
                ))
            }
            Some((host, port)) => (host, Some(port)),
            None => (address, None),
        },
    };
    if host.is_empty() {
        return Err(format!("`{address}`: no host"));
    }
    let port = match port {
        None => DEFAULT_SENTINEL_PORT,
        Some(port) => port
            .parse::<u16>()
            .ok()
            .filter(|port| *port != 0)
            .ok_or_else(|| format!("`{address}`: `{port}` is not a port"))?,
    };
    Ok((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::{parse_address, DEFAULT_SENTINEL_PORT};

    #[test]
    fn addresses_take_a_default_port_and_bracketed_ipv6() {
        assert_eq!(
            parse_address("10.0.0.1:26380"),
            Ok(("10.0.0.1".to_owned(), 26380))
        );
        assert_eq!(
            parse_address("sentinel-a"),
            Ok(("sentinel-a".to_owned(), DEFAULT_SENTINEL_PORT))
        );
        assert_eq!(parse_address("[::1]:5000"), Ok(("::1".to_owned(), 5000)));
        assert_eq!(
            parse_address("[::1]"),
            Ok(("::1".to_owned(), DEFAULT_SENTINEL_PORT))
        );
    }

    #[test]
    fn bad_addresses_say_what_is_wrong() {
        assert!(parse_address("::1").unwrap_err().contains("brackets"));
        assert!(parse_address("host:http")
            .unwrap_err()
            .contains("not a port"));
        assert!(parse_address("host:0").unwrap_err().contains("not a port"));
        assert!(parse_address(":26379").unwrap_err().contains("no host"));
        assert!(parse_address("[::1").unwrap_err().contains("`]`"));
    }
}
