//! Redis Sentinel at the wall: our [`Sentinel`] as the engine's connection options, the
//! first connection (failing with the cause), and the master's client for connections
//! the engine does not open itself (the cancellation subscriptions).

use std::sync::Mutex;

use bullmq::options::RedisConnectionOptions;
use bullmq::redis_connection::RedisConnection;
use bullmq::sentinel::SentinelOptions;

use super::server_version::ServerVersion;
use crate::connection::Sentinel;

/// The engine's options for `sentinel`: the master's credentials, database and TLS, and
/// the sentinels to ask for it. Every connection the engine opens with them (queues,
/// workers' blocking reads, queue events) follows a failover.
pub(super) fn options(sentinel: &Sentinel) -> RedisConnectionOptions {
    let mut sentinels = SentinelOptions::new(&sentinel.master_name, sentinel.sentinels.clone())
        .tls(sentinel.sentinel_tls);
    sentinels.username.clone_from(&sentinel.sentinel_username);
    sentinels.password.clone_from(&sentinel.sentinel_password);
    RedisConnectionOptions {
        username: sentinel.username.clone(),
        password: sentinel.password.clone(),
        db: sentinel.db,
        tls: sentinel.tls,
        sentinel: Some(sentinels),
        ..RedisConnectionOptions::new()
    }
}

/// Asks the sentinels for the master and connects to it: the connection, the version
/// the master reports, and a client for it. Fails with the cause in words (no sentinel
/// answered, the sentinels do not know the name, the master refused the password).
pub(super) async fn connect(
    options: &RedisConnectionOptions,
) -> Result<(RedisConnection, Option<ServerVersion>, redis::Client), String> {
    let redis = RedisConnection::new_managed_only(options)
        .await
        .map_err(|e| e.to_string())?;
    let info = redis
        .cmd::<String>(redis::cmd("INFO").arg("server"))
        .await
        .ok();
    let version = info.as_deref().and_then(ServerVersion::from_info);
    let master = redis.master_client().await.map_err(|e| e.to_string())?;
    Ok((redis, version, master))
}

/// A client for the master the sentinels name now, remembered in `last`; when they
/// cannot be asked, the last one known: a connection made from it fails, and its
/// owner asks again.
pub(super) async fn master_client(
    redis: &RedisConnection,
    last: &Mutex<redis::Client>,
) -> redis::Client {
    let last_known = || {
        last.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    match redis.master_client().await {
        Ok(client) => {
            *last_known() = client.clone();
            client
        }
        Err(e) => {
            tracing::debug!(error = %e, "the sentinels named no master; using the last one known");
            last_known().clone()
        }
    }
}
