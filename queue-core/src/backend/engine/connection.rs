//! The app's Redis connection: URL checks, TLS set-up, the reachability check, and the
//! engine handles (queues, worker options) built on it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use bullmq::options::{RedisConnectionOptions, TlsCerts};
use bullmq::redis_connection::RedisConnection;
use bullmq::QueueOptions;

use super::convert::engine_error;
pub(crate) use super::endpoint::Endpoint;
use super::server_version::{ServerVersion, MINIMUM};
use super::watch::{WatchPool, Watched};
use crate::connection::Tls;
use crate::error::Error;

/// One multiplexed, auto-reconnecting connection shared by every queue handle of the app
/// (on a cluster, the engine's cluster connection, routing each command to its slot's
/// master; with Sentinel, the engine's connection to the master the sentinels name,
/// following it through a failover).
#[derive(Clone)]
pub(crate) struct Connection {
    redis: RedisConnection,
    options: RedisConnectionOptions,
    /// One client per server or seed node, for dedicated connections (pub/sub).
    clients: Arc<[redis::Client]>,
    /// Which of `clients` the next dedicated connection tries first.
    next_client: Arc<AtomicUsize>,
    cluster: bool,
    /// With Sentinel: the master found last, for when the sentinels cannot be asked.
    sentinel_master: Option<Arc<Mutex<redis::Client>>>,
    /// For dedicated connections to a cluster node the seeds did not name.
    tls: Option<Tls>,
    prefix: String,
    display_url: String,
    /// Connections kept for optimistic transactions (`WATCH`), not shared while used.
    watch_pool: Arc<WatchPool>,
}

impl Connection {
    /// Connects and checks that Redis answers, within `timeout`. A connection to a
    /// standalone server on which a command has waited `silence` for its reply, with
    /// nothing heard since, is taken for dead and replaced: the shared one and every
    /// worker's (a socket a load balancer forgot gives no error; a cluster's and
    /// Sentinel's connections manage their own).
    pub(crate) async fn open(
        endpoint: &Endpoint,
        tls: Option<&Tls>,
        prefix: &str,
        timeout: Duration,
        silence: Duration,
    ) -> Result<Self, Error> {
        let endpoint = endpoint.resolved()?;
        let display_url = endpoint.display();
        let connect_error = |reason: String| Error::Connect {
            url: display_url.clone(),
            reason,
        };
        let urls = endpoint.urls();
        let secure = match &*endpoint {
            Endpoint::Sentinel(sentinel) => sentinel.tls || sentinel.sentinel_tls,
            _ => urls.iter().any(|url| url.starts_with("rediss://")),
        };
        if secure || tls.is_some() {
            install_crypto_provider();
        }
        if let Endpoint::Sentinel(sentinel) = &*endpoint {
            let mut options = super::sentinel::options(sentinel);
            if let Some(tls) = tls {
                options = options.tls_certs(tls_certs(tls));
            }
            let connect = super::sentinel::connect(&options);
            let (redis, version, master) = match tokio::time::timeout(timeout, connect).await {
                Ok(Ok(connected)) => connected,
                Ok(Err(reason)) => return Err(connect_error(reason)),
                Err(_) => return Err(connect_error(format!("no answer within {timeout:?}"))),
            };
            check_version(version, &display_url)?;
            return Ok(Connection {
                cluster: false,
                redis,
                options,
                clients: Arc::from(vec![master.clone()]),
                next_client: Arc::new(AtomicUsize::new(0)),
                sentinel_master: Some(Arc::new(Mutex::new(master))),
                watch_pool: Arc::default(),
                tls: tls.cloned(),
                prefix: prefix.to_owned(),
                display_url,
            });
        }
        if urls.is_empty() {
            return Err(connect_error("no cluster seed node given".to_owned()));
        }
        let clients = urls
            .iter()
            .map(|url| client(url.as_str(), tls))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| connect_error(format!("not a valid Redis URL or TLS setting ({e})")))?;
        let mut options = match &*endpoint {
            Endpoint::Cluster(nodes) => RedisConnectionOptions {
                cluster_nodes: nodes.clone(),
                tls: secure,
                ..RedisConnectionOptions::new()
            },
            _ => RedisConnectionOptions::new()
                .url(&urls[0])
                .renew_after(silence),
        };
        if let Some(tls) = tls {
            options = options.tls_certs(tls_certs(tls));
        }
        // Plain connections first: they fail at once with the real cause ("Connection
        // refused", "WRONGPASS", a TLS error), where the engine's reconnecting manager
        // would retry quietly until the timeout. Of a cluster's seeds, one must answer.
        let probe = async {
            let mut last = None;
            for client in &clients {
                match probe_version(client).await {
                    Ok(version) => return Ok(version),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.map_or_else(String::new, |e| e.to_string()))
        };
        match tokio::time::timeout(timeout, probe).await {
            Ok(Ok(version)) => check_version(version, &display_url)?,
            Ok(Err(reason)) => return Err(connect_error(reason)),
            Err(_) => return Err(connect_error(format!("no answer within {timeout:?}"))),
        }
        let connect = async {
            let redis = RedisConnection::new_managed_only(&options).await?;
            redis.ping().await?;
            Ok::<_, bullmq::Error>(redis)
        };
        let redis = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(redis)) => redis,
            Ok(Err(e)) => return Err(connect_error(e.to_string())),
            Err(_) => return Err(connect_error(format!("no answer within {timeout:?}"))),
        };
        Ok(Connection {
            cluster: redis.is_cluster(),
            redis,
            options,
            clients: clients.into(),
            next_client: Arc::new(AtomicUsize::new(0)),
            sentinel_master: None,
            tls: tls.cloned(),
            prefix: prefix.to_owned(),
            display_url,
            watch_pool: Arc::default(),
        })
    }

    /// Whether the app runs on a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.cluster
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    pub(crate) fn display_url(&self) -> &str {
        &self.display_url
    }

    /// Options for an engine queue with a connection of its own.
    pub(super) fn queue_options(&self) -> QueueOptions {
        QueueOptions::new()
            .connection(self.options.clone())
            .prefix(self.prefix.clone())
    }

    /// An engine queue handle on the shared connection.
    pub(super) async fn engine_queue(&self, name: &str) -> Result<bullmq::Queue, Error> {
        bullmq::Queue::with_connection(name, self.redis.clone(), self.queue_options())
            .await
            .map_err(engine_error)
    }

    /// The engine's flow producer on the shared connection.
    pub(super) fn flow_producer(&self) -> Result<bullmq::FlowProducer, Error> {
        bullmq::FlowProducer::with_connection(self.redis.clone(), Some(self.prefix.clone()))
            .map_err(engine_error)
    }

    /// Worker options carrying this connection and prefix, for what opens connections
    /// of its own (workers, event readers).
    pub(super) fn worker_options(&self) -> bullmq::WorkerOptions {
        bullmq::WorkerOptions {
            connection: self.options.clone(),
            prefix: self.prefix.clone(),
            ..Default::default()
        }
    }

    /// Runs one plain Redis command on the shared connection.
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &self,
        cmd: &mut redis::Cmd,
    ) -> Result<T, Error> {
        self.redis.cmd(cmd).await.map_err(engine_error)
    }

    /// Runs a pipeline of plain commands on the shared connection, in one round trip.
    pub(crate) async fn pipeline<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, Error> {
        let mut conn = self.redis.connection();
        pipe.query_async(&mut conn)
            .await
            .map_err(|e| Error::Redis(Box::new(e)))
    }

    /// A client for a connection of its own to the server of `key` (a key, or a pub/sub
    /// channel). On a cluster, one to the master that serves its slot now: a `PUBLISH`
    /// is routed there, and the count it answers is of that node's subscribers (a
    /// cluster delivers it to every node's, but counts only its own); a transaction on
    /// its keys runs there. When the slot map cannot be read, the next seed node. With
    /// Sentinel, one to the master the sentinels name now: what it serves is lost with
    /// that master, and the caller asks again.
    pub(super) async fn client_for(&self, key: &str) -> redis::Client {
        if let Some(last) = &self.sentinel_master {
            return super::sentinel::master_client(&self.redis, last).await;
        }
        let next = self.next_client.fetch_add(1, Ordering::Relaxed);
        let seed = &self.clients[next % self.clients.len()];
        if !self.cluster {
            return seed.clone();
        }
        let Some((host, port)) = self.master_of(crate::connection::key_slot(key)).await else {
            return seed.clone();
        };
        let info = seed.get_connection_info().clone();
        let addr = match info.addr() {
            redis::ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => redis::ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => redis::ConnectionAddr::Tcp(host, port),
        };
        let info = info.set_addr(addr);
        client(info, self.tls.as_ref()).unwrap_or_else(|_| seed.clone())
    }

    /// A connection of its own that watches `keys` (one slot's, non-empty), for an
    /// optimistic transaction on them ([`super::watch`]).
    pub(super) async fn watch(&self, keys: &[String]) -> Result<Watched, Error> {
        let client = self
            .client_for(keys.first().map_or("", String::as_str))
            .await;
        self.watch_pool.watch(&client, keys).await
    }

    /// The host and port of the master serving `slot`, from `CLUSTER SLOTS`: entries
    /// `[start, end, [host, port, id, ..], replicas..]`.
    async fn master_of(&self, slot: u16) -> Option<(String, u16)> {
        let ranges: Vec<Vec<redis::Value>> =
            self.query(redis::cmd("CLUSTER").arg("SLOTS")).await.ok()?;
        ranges.into_iter().find_map(|range| {
            let mut fields = range.into_iter();
            let start: u16 = redis::from_redis_value(fields.next()?).ok()?;
            let end: u16 = redis::from_redis_value(fields.next()?).ok()?;
            let master: Vec<redis::Value> = redis::from_redis_value(fields.next()?).ok()?;
            let mut master = master.into_iter();
            let host: String = redis::from_redis_value(master.next()?).ok()?;
            let port: u16 = redis::from_redis_value(master.next()?).ok()?;
            (start..=end).contains(&slot).then_some((host, port))
        })
    }

    /// `<prefix>:<queue>`, the base of every key of a queue.
    /// The silence after which a command on the shared connection fails, when the
    /// connection keeps one (a standalone server's renewing connection); `None` with a
    /// cluster or Sentinel, whose commands keep the engine's longer response timeout.
    pub(crate) fn command_deadline(&self) -> Option<std::time::Duration> {
        self.options.renew_after
    }

    pub(crate) fn queue_base(&self, queue: &str) -> String {
        format!("{}:{queue}", self.prefix)
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("url", &self.display_url)
            .field("prefix", &self.prefix)
            .finish()
    }
}

fn tls_certs(tls: &Tls) -> TlsCerts {
    TlsCerts {
        root_cert: tls.root_cert_pem.clone(),
        client_cert: tls.client_cert_pem.as_ref().map(|(cert, _)| cert.clone()),
        client_key: tls.client_cert_pem.as_ref().map(|(_, key)| key.clone()),
    }
}

/// A client for `info`, with the engine's socket settings (Nagle off, as on every
/// connection the engine opens) and `tls`'s certificates if given.
fn client(
    info: impl redis::IntoConnectionInfo,
    tls: Option<&Tls>,
) -> redis::RedisResult<redis::Client> {
    let info = info
        .into_connection_info()?
        .set_tcp_settings(bullmq::redis_connection::tcp_settings());
    match tls {
        None => redis::Client::open(info),
        Some(tls) => redis::Client::build_with_tls(info, certificates(tls)),
    }
}

fn certificates(tls: &Tls) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: tls
            .client_cert_pem
            .as_ref()
            .map(|(client_cert, client_key)| redis::ClientTlsConfig {
                client_cert: client_cert.clone(),
                client_key: client_key.clone(),
            }),
        root_cert: tls.root_cert_pem.clone(),
    }
}

/// Pings the server and reads its version (`None` where `INFO` is refused, as some
/// managed services do, or does not say).
async fn probe_version(client: &redis::Client) -> redis::RedisResult<Option<ServerVersion>> {
    let mut probe = client.get_multiplexed_async_connection().await?;
    redis::cmd("PING").query_async::<()>(&mut probe).await?;
    let info = redis::cmd("INFO")
        .arg("server")
        .query_async::<String>(&mut probe)
        .await;
    Ok(info.ok().as_deref().and_then(ServerVersion::from_info))
}

/// Refuses a server older than the scripts need; one that does not say its version is
/// let through with a warning (the scripts will tell).
fn check_version(version: Option<ServerVersion>, url: &str) -> Result<(), Error> {
    match version {
        Some(version) if !version.is_supported() => Err(Error::UnsupportedRedis {
            url: url.to_owned(),
            found: version.to_string(),
            minimum: MINIMUM.to_string(),
        }),
        Some(_) => Ok(()),
        None => {
            tracing::warn!(
                url,
                "Redis did not report a usable version (INFO refused or unreadable); BullMQ's scripts need Redis {MINIMUM} or newer"
            );
            Ok(())
        }
    }
}

/// `rediss://` makes the redis crate build a rustls client config, which panics unless a
/// process-wide crypto provider is installed. Install ring's, unless the application
/// installed one of its own first.
fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // rustls 0.23.48 deprecates ring's provider for having no post-quantum key
        // exchange (a fresh resolution, as the MSRV build's, gets it). It is still
        // rustls's own and supported; aws-lc-rs, the provider with one, builds a C
        // library (aws-lc-sys) into every application. One that wants post-quantum
        // key exchange installs aws-lc-rs's provider before it builds the app: this
        // one is then left alone.
        #[allow(deprecated)]
        let provider = rustls::crypto::ring::default_provider();
        // An error only means a provider is already installed, which is what we need.
        let _ = provider.install_default();
    });
}
