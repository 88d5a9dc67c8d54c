//! Asking the sentinels which server is the master, and connecting to it.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ErrorKind, RedisError, RedisResult, Value};
use tokio::sync::Mutex;
use tracing::debug;

use super::options::{parse_address, SentinelOptions};
use crate::error::Error;
use crate::options::RedisConnectionOptions;

/// How a client is built from connection options and a URL (TLS, certificates): the
/// connection module's own, handed in so that this module needs nothing of it.
pub(crate) type BuildClient = fn(&RedisConnectionOptions, &str) -> Result<Client, Error>;

/// Connecting to a sentinel and its answer, and the master's answer to `ROLE`: they
/// answer at once, and a silent one must not hold up asking the next.
const SENTINEL_TIMEOUT: Duration = Duration::from_secs(2);

/// One sentinel, and the connection kept to it between lookups.
struct Sentinel {
    /// `host:port`, for messages.
    address: String,
    client: Client,
    /// Dropped when a lookup on it fails, and opened again by the next one.
    connection: Mutex<Option<MultiplexedConnection>>,
}

/// Finds the master that the sentinels name, and connects to it.
pub(crate) struct MasterResolver {
    master_name: String,
    sentinels: Vec<Sentinel>,
    /// The master's options (credentials, database, TLS); host and port are filled in
    /// with what the sentinels name.
    master: RedisConnectionOptions,
    build_client: BuildClient,
}

impl std::fmt::Debug for MasterResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterResolver")
            .field("master_name", &self.master_name)
            .field("sentinels", &self.sentinels())
            .finish()
    }
}

impl MasterResolver {
    /// Checks `opts.sentinel` and builds a client per sentinel with `build_client`
    /// (nothing is connected yet).
    pub(crate) fn new(
        opts: &RedisConnectionOptions,
        build_client: BuildClient,
    ) -> Result<Self, Error> {
        let sentinel: &SentinelOptions = opts.sentinel.as_ref().ok_or_else(|| {
            Error::InvalidConfig("sentinel options are required for a sentinel connection".into())
        })?;
        if sentinel.master_name.trim().is_empty() {
            return Err(Error::InvalidConfig(
                "sentinel: the master's name is empty (the name in `sentinel monitor <name> ...`)"
                    .into(),
            ));
        }
        if sentinel.sentinels.is_empty() {
            return Err(Error::InvalidConfig(
                "sentinel: no sentinel address given".into(),
            ));
        }
        let sentinels = sentinel
            .sentinels
            .iter()
            .map(|address| {
                let (host, port) = parse_address(address)
                    .map_err(|reason| Error::InvalidConfig(format!("sentinel address {reason}")))?;
                let options = RedisConnectionOptions {
                    host: Some(host),
                    port: Some(port),
                    username: sentinel.username.clone(),
                    password: sentinel.password.clone(),
                    tls: sentinel.tls,
                    tls_certs: opts.tls_certs.clone().filter(|_| sentinel.tls),
                    ..RedisConnectionOptions::default()
                };
                let url = options.effective_url();
                Ok(Sentinel {
                    address: address.trim().to_owned(),
                    client: build_client(&options, &url)?,
                    connection: Mutex::new(None),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let mut master = opts.clone();
        master.sentinel = None;
        master.cluster_nodes.clear();
        Ok(Self {
            master_name: sentinel.master_name.clone(),
            sentinels,
            master,
            build_client,
        })
    }

    /// The master's name.
    pub(crate) fn master_name(&self) -> &str {
        &self.master_name
    }

    /// The sentinels' addresses, for messages.
    pub(crate) fn sentinels(&self) -> String {
        let addresses: Vec<&str> = self.sentinels.iter().map(|s| s.address.as_str()).collect();
        addresses.join(", ")
    }

    /// Asks the sentinels, in order, for the master, and connects to the first server
    /// named that answers `ROLE` as a master: a sentinel that has not yet heard of a
    /// failover names the old master, which is down or now a replica, and the next
    /// sentinel is asked. Returns a client for the master, a connection made with
    /// `config`, and its `host:port`.
    pub(crate) async fn connect(
        &self,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<(Client, MultiplexedConnection, String)> {
        let mut sentinel_errors = Vec::new();
        let mut last_sentinel_error = None;
        let mut master_error = None;
        let mut tried = Vec::new();
        for sentinel in &self.sentinels {
            let (host, port) = match self.ask(sentinel).await {
                Ok(Some(address)) => address,
                Ok(None) => continue,
                Err(e) => {
                    sentinel_errors.push(format!("{}: {e}", sentinel.address));
                    last_sentinel_error = Some(e);
                    continue;
                }
            };
            if tried.contains(&(host.clone(), port)) {
                continue;
            }
            tried.push((host.clone(), port));
            match self.connect_master(&host, port, config).await {
                Ok((client, connection)) => {
                    return Ok((client, connection, format!("{host}:{port}")))
                }
                Err(e) => master_error = Some((format!("{host}:{port}"), e)),
            }
        }
        Err(match (master_error, last_sentinel_error) {
            (Some((address, e)), _) => RedisError::from((
                e.kind(),
                "cannot use the master the sentinels name",
                format!("`{}` at {address}: {e}", self.master_name),
            )),
            (None, Some(e)) if sentinel_errors.len() == self.sentinels.len() => RedisError::from((
                e.kind(),
                "no sentinel answered",
                format!(
                    "asked for master `{}`: {}",
                    self.master_name,
                    sentinel_errors.join("; ")
                ),
            )),
            (None, _) => RedisError::from((
                ErrorKind::MasterNameNotFoundBySentinel,
                "the sentinels do not know this master",
                format!(
                    "no sentinel of {} monitors a master named `{}`",
                    self.sentinels(),
                    self.master_name
                ),
            )),
        })
    }

    /// `SENTINEL GET-MASTER-ADDR-BY-NAME` on one sentinel: the master's host and port, or
    /// `None` when that sentinel does not know the name.
    async fn ask(&self, sentinel: &Sentinel) -> RedisResult<Option<(String, u16)>> {
        let mut cached = sentinel.connection.lock().await;
        let mut connection = match cached.as_ref() {
            Some(connection) => connection.clone(),
            None => {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(SENTINEL_TIMEOUT))
                    .set_response_timeout(Some(SENTINEL_TIMEOUT));
                let connection = sentinel
                    .client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                cached.insert(connection).clone()
            }
        };
        let reply = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.master_name)
            .query_async::<Option<(String, u16)>>(&mut connection)
            .await;
        if reply.is_err() {
            *cached = None;
        }
        reply
    }

    /// Connects to `host:port` with the master's options, and checks that it is a master.
    async fn connect_master(
        &self,
        host: &str,
        port: u16,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<(Client, MultiplexedConnection)> {
        let mut options = self.master.clone();
        options.host = Some(host.to_owned());
        options.port = Some(port);
        let url = options.effective_url();
        let client = (self.build_client)(&options, &url).map_err(|e| match e {
            Error::Redis(e) => e,
            other => RedisError::from((
                ErrorKind::InvalidClientConfig,
                "invalid master connection options",
                other.to_string(),
            )),
        })?;
        let mut connection = client
            .get_multiplexed_async_connection_with_config(config)
            .await?;
        // Bounded even on a connection made without a response timeout (a blocking
        // one): a master that accepts the connection and never answers is not one.
        let role_cmd = redis::cmd("ROLE");
        let role = role_cmd.query_async::<Vec<Value>>(&mut connection);
        let role = match tokio::time::timeout(SENTINEL_TIMEOUT, role).await {
            Ok(Ok(role)) => role,
            // `ROLE` is an admin command: an ACL user may not run it (`NOPERM`). The
            // sentinels' word is then all there is; a write refused with `READONLY`
            // still sends the connection back to them.
            Ok(Err(e)) if e.code().is_some() => {
                debug!(master = %format!("{host}:{port}"), error = %e, "cannot check the master's role; trusting the sentinels");
                return Ok((client, connection));
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "ROLE did not answer",
                )))
            }
        };
        let role: Option<String> = role
            .into_iter()
            .next()
            .and_then(|role| redis::from_redis_value(role).ok());
        match role.as_deref() {
            Some("master") => Ok((client, connection)),
            other => Err(RedisError::from((
                // A failover in progress: transient, as a lost connection is.
                ErrorKind::Io,
                "not a master",
                format!("ROLE answered {}", other.unwrap_or("nothing readable")),
            ))),
        }
    }
}
