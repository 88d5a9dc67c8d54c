//! Connections of their own for optimistic transactions: `WATCH` keys, read them,
//! decide, then `MULTI` .. `EXEC`, which Redis aborts if a watched key changed.
//!
//! A `WATCH` belongs to the connection that sent it, and an `EXEC` on that connection
//! ends every watch: on the shared multiplexed connection another task's transaction
//! would end ours (or ours theirs). So a transaction takes a connection nobody else
//! uses while it runs. A few are kept for the next one, as opening one costs a
//! handshake (TLS and `AUTH` included).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;

use crate::error::Error;

/// Idle connections kept per pool (per server: a cluster's masters each have theirs).
const KEEP_IDLE: usize = 4;

/// How long opening a connection may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(5);

/// The idle transaction connections, each with the server it goes to.
#[derive(Debug, Default)]
pub(crate) struct WatchPool {
    idle: Mutex<Vec<(String, MultiplexedConnection)>>,
}

impl WatchPool {
    fn take(&self, server: &str) -> Option<MultiplexedConnection> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let at = idle.iter().position(|(s, _)| s == server)?;
        Some(idle.swap_remove(at).1)
    }

    fn put(&self, server: String, conn: MultiplexedConnection) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.iter().filter(|(s, _)| *s == server).count() < KEEP_IDLE {
            idle.push((server, conn));
        }
    }

    /// A connection to `client`'s server that watches `keys`: a kept one, or (when
    /// none is kept, or the kept one is dead) a new one.
    pub(super) async fn watch(
        self: &Arc<Self>,
        client: &redis::Client,
        keys: &[String],
    ) -> Result<Watched, Error> {
        let server = client.get_connection_info().addr().to_string();
        let mut watch = redis::cmd("WATCH");
        watch.arg(keys);
        if let Some(mut conn) = self.take(&server) {
            // An idle connection may have died with a restart of Redis: a new one then.
            if watch.query_async::<()>(&mut conn).await.is_ok() {
                return Ok(self.watched(server, conn));
            }
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_WITHIN))
            // The caller bounds the whole transaction (the queue's command timeout).
            .set_response_timeout(None);
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(redis_error)?;
        watch
            .query_async::<()>(&mut conn)
            .await
            .map_err(redis_error)?;
        Ok(self.watched(server, conn))
    }

    fn watched(self: &Arc<Self>, server: String, conn: MultiplexedConnection) -> Watched {
        Watched {
            conn,
            server,
            pool: self.clone(),
        }
    }
}

/// A connection with a `WATCH` on it. Dropped, it is closed (so is its watch);
/// [`Watched::release`] keeps it for reuse once no watch is left on it.
#[derive(Debug)]
pub(crate) struct Watched {
    conn: MultiplexedConnection,
    server: String,
    pool: Arc<WatchPool>,
}

impl Watched {
    /// The connection, for the reads, `WATCH`es of more keys, and the transaction.
    pub(crate) fn conn(&mut self) -> &mut MultiplexedConnection {
        &mut self.conn
    }

    /// Ends the watch without a transaction (`UNWATCH`) and keeps the connection.
    pub(crate) async fn unwatch(mut self) -> Result<(), Error> {
        redis::cmd("UNWATCH")
            .query_async::<()>(&mut self.conn)
            .await
            .map_err(redis_error)?;
        self.release();
        Ok(())
    }

    /// Keeps the connection for the next transaction. Only after `EXEC` or `UNWATCH`
    /// has answered: either ends the watch.
    pub(crate) fn release(self) {
        self.pool.put(self.server, self.conn);
    }
}

pub(crate) fn redis_error(e: redis::RedisError) -> Error {
    Error::Redis(Box::new(e))
}
