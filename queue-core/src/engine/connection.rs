//! The app's Redis connection: URL checks, TLS set-up, the reachability check, and the
//! engine handles (queues, worker options) built on it.

use std::sync::Once;
use std::time::Duration;

use bullmq::options::{RedisConnectionOptions, TlsCerts};
use bullmq::redis_connection::RedisConnection;
use bullmq::QueueOptions;

use super::convert::engine_error;
use crate::error::Error;
use crate::tls::Tls;

/// One multiplexed, auto-reconnecting connection shared by every queue handle of the app.
#[derive(Clone)]
pub(crate) struct Connection {
    redis: RedisConnection,
    options: RedisConnectionOptions,
    client: redis::Client,
    prefix: String,
    display_url: String,
}

impl Connection {
    /// Connects and checks that Redis answers, within `timeout`.
    pub(crate) async fn open(
        url: &str,
        tls: Option<&Tls>,
        prefix: &str,
        timeout: Duration,
    ) -> Result<Self, Error> {
        let display_url = redact_password(url);
        let connect_error = |reason: String| Error::Connect {
            url: display_url.clone(),
            reason,
        };
        if url.starts_with("rediss://") || tls.is_some() {
            install_crypto_provider();
        }
        let client = match tls {
            None => redis::Client::open(url),
            Some(tls) => redis::Client::build_with_tls(url, certificates(tls)),
        }
        .map_err(|e| connect_error(format!("not a valid Redis URL or TLS setting ({e})")))?;
        let mut options = RedisConnectionOptions::new().url(url);
        if let Some(tls) = tls {
            options = options.tls_certs(TlsCerts {
                root_cert: tls.root_cert_pem.clone(),
                client_cert: tls.client_cert_pem.as_ref().map(|(cert, _)| cert.clone()),
                client_key: tls.client_cert_pem.as_ref().map(|(_, key)| key.clone()),
            });
        }
        // One plain connection first: it fails at once with the real cause ("Connection
        // refused", "WRONGPASS", a TLS error), where the engine's reconnecting manager
        // would retry quietly until the timeout.
        let probe = async {
            let mut probe = client.get_multiplexed_async_connection().await?;
            redis::cmd("PING").query_async::<()>(&mut probe).await
        };
        match tokio::time::timeout(timeout, probe).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(connect_error(e.to_string())),
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
            redis,
            options,
            client,
            prefix: prefix.to_owned(),
            display_url,
        })
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

    /// Worker options carrying this connection and prefix.
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

    /// A client for dedicated connections (pub/sub).
    pub(super) fn client(&self) -> &redis::Client {
        &self.client
    }

    /// `<prefix>:<queue>`, the base of every key of a queue.
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

/// `rediss://` makes the redis crate build a rustls client config, which panics unless a
/// process-wide crypto provider is installed. Install ring's, unless the application
/// installed one of its own first.
fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error only means a provider is already installed, which is what we need.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// `redis://user:secret@host` -> `redis://user:***@host`, for messages and logs.
pub(crate) fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None if userinfo.is_empty() => url.to_owned(),
        // `redis://secret@host` is a password-only URL in the redis crate.
        None => format!("{scheme}://***@{host}"),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_password;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact_password("redis://u:pw@h:6379/2"),
            "redis://u:***@h:6379/2"
        );
        assert_eq!(redact_password("rediss://:pw@h"), "rediss://:***@h");
        assert_eq!(redact_password("redis://pw@h"), "redis://***@h");
        assert_eq!(
            redact_password("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
    }
}
