//! A multiplexed connection to the master the sentinels name, which asks them again
//! whenever it loses that master.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, Cmd, Pipeline, RedisError, RedisFuture, Value};
use redis::{ErrorKind, RedisResult, ServerErrorKind};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::resolver::MasterResolver;

/// The first retry after a failed lookup waits this long, doubling up to
/// [`RETRY_MAX`]: a lookup is one round trip to a sentinel, and a failover is over in
/// seconds, so the connection keeps asking often rather than backing off for long.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// A multiplexed connection to the master that Redis Sentinel names, following it
/// through failovers.
///
/// The first command connects (see the [module](crate::sentinel)); after that, commands
/// share one multiplexed socket until it fails. A command that fails because the
/// master is gone (a dropped socket, a timeout) or no longer a master (`READONLY`,
/// `MASTERDOWN`) returns its error, and the next command asks the sentinels again, so a
/// caller that retries lands on the promoted replica. A single command refused with
/// `READONLY` or `MASTERDOWN` did nothing, and is sent once more to the new master
/// before returning. While the master cannot be found, lookups are spaced from 100 ms
/// up to 1 s apart, and a command that finds a lookup failing returns its error
/// at once instead of queueing another.
///
/// Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct SentinelConnection {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SentinelConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelConnection")
            .field("resolver", &self.shared.resolver)
            .finish()
    }
}

struct Shared {
    resolver: Arc<MasterResolver>,
    config: AsyncConnectionConfig,
    db: i64,
    state: std::sync::Mutex<State>,
    /// One lookup at a time; commands that arrive meanwhile wait for its outcome.
    connecting: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    /// Counts the connections made, so that a failure seen on an older one does not
    /// drop its replacement.
    generation: u64,
    /// The connection and the master's `host:port`.
    current: Option<(MultiplexedConnection, String)>,
    /// Lookups made so far, and the last one's error.
    lookups: u64,
    last_error: Option<RedisError>,
    /// Failed lookups in a row, and when the next may run.
    failures: u32,
    retry_at: Option<Instant>,
    /// When the master was lost, for the log line that says it is back.
    lost_at: Option<(Instant, String)>,
}

/// What a reply says about the node that sent it.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// The node is fine (whatever the command's own outcome).
    Keep,
    /// The node is gone or unusable: ask the sentinels again.
    Forget,
    /// The node is not a master any more and refused the command: ask the sentinels
    /// again, and the command can be sent once more.
    Demoted,
}

impl SentinelConnection {
    /// Connects to the master `resolver` finds, with `config` for every connection
    /// made (timeouts), and `db` selected (reported by `get_db`).
    pub(crate) async fn connect(
        resolver: Arc<MasterResolver>,
        config: AsyncConnectionConfig,
        db: i64,
    ) -> RedisResult<Self> {
        let connection = Self {
            shared: Arc::new(Shared {
                resolver,
                config,
                db,
                state: std::sync::Mutex::new(State::default()),
                connecting: tokio::sync::Mutex::new(()),
            }),
        };
        connection.shared.connection().await?;
        Ok(connection)
    }

    /// A client for the master the sentinels name now (checked with `ROLE`), for a
    /// connection of another kind (pub/sub). It does not follow a failover by itself:
    /// ask again when that connection is lost.
    pub async fn master_client(&self) -> RedisResult<Client> {
        let (client, _, _) = self.shared.resolver.connect(&self.shared.config).await?;
        Ok(client)
    }

    /// The master's `host:port` this connection uses now, if it has one.
    pub fn current_master(&self) -> Option<String> {
        self.shared
            .lock()
            .current
            .as_ref()
            .map(|(_, address)| address.clone())
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The current connection, or a new one to the master the sentinels name.
    async fn connection(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        let seen = {
            let state = self.lock();
            if let Some((connection, _)) = &state.current {
                return Ok((state.generation, connection.clone()));
            }
            state.lookups
        };
        let _turn = self.connecting.lock().await;
        let retry_at = {
            let state = self.lock();
            if let Some((connection, _)) = &state.current {
                return Ok((state.generation, connection.clone()));
            }
            // A lookup ran while this command waited, and failed: its answer is ours.
            if let (true, Some(error)) = (state.lookups != seen, &state.last_error) {
                return Err(error.clone());
            }
            state.retry_at
        };
        if let Some(at) = retry_at {
            tokio::time::sleep_until(at).await;
        }
        let result = self.resolver.connect(&self.config).await;
        let mut state = self.lock();
        state.lookups += 1;
        match result {
            Ok((_, connection, address)) => {
                state.generation += 1;
                state.failures = 0;
                state.retry_at = None;
                state.last_error = None;
                match state.lost_at.take() {
                    Some((since, old)) => info!(
                        master = %address,
                        previous = %old,
                        after = ?since.elapsed(),
                        "following the master the sentinels name"
                    ),
                    None => debug!(master = %address, "connected to the master the sentinels name"),
                }
                state.current = Some((connection.clone(), address));
                Ok((state.generation, connection))
            }
            Err(error) => {
                state.failures = state.failures.saturating_add(1);
                let delay = RETRY_MIN
                    .saturating_mul(1u32 << (state.failures.min(8) - 1))
                    .min(RETRY_MAX);
                state.retry_at = Some(Instant::now() + delay);
                debug!(
                    master_name = %self.resolver.master_name(),
                    sentinels = %self.resolver.sentinels(),
                    error = %error,
                    retry_in = ?delay,
                    "no master found yet"
                );
                state.last_error = Some(error.clone());
                Err(error)
            }
        }
    }

    /// Drops the connection of `generation`, if it is still the current one.
    fn forget(&self, generation: u64, why: &str) {
        let mut state = self.lock();
        if state.generation != generation {
            return;
        }
        if let Some((_, address)) = state.current.take() {
            warn!(
                master = %address,
                reason = why,
                "lost the Redis master; asking the sentinels for the current one"
            );
            state.lost_at = Some((Instant::now(), address));
        }
    }

    /// Runs one command, asking the sentinels again when the reply says the master is
    /// gone, and sending it once more when it was refused by a demoted master.
    async fn command(&self, cmd: &Cmd) -> RedisResult<Value> {
        let (generation, mut connection) = self.connection().await?;
        let result = connection.req_packed_command(cmd).await;
        match verdict(&result) {
            Verdict::Keep => result,
            Verdict::Forget => {
                self.forget(generation, "connection lost");
                result
            }
            Verdict::Demoted => {
                self.forget(generation, "the server is no longer a master");
                let (generation, mut connection) = self.connection().await?;
                let retried = connection.req_packed_command(cmd).await;
                if verdict(&retried) != Verdict::Keep {
                    self.forget(generation, "the new master failed too");
                }
                retried
            }
        }
    }

    /// Runs a pipeline; a failure drops the connection as for one command, but the
    /// pipeline is not sent again (some of its commands may have run).
    async fn pipeline(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let (generation, mut connection) = self.connection().await?;
        let result = connection
            .req_packed_commands(pipeline, offset, count)
            .await;
        let lost = match &result {
            Err(error) => error_verdict(error) != Verdict::Keep,
            Ok(values) => values
                .iter()
                .any(|value| value_verdict(value) != Verdict::Keep),
        };
        if lost {
            self.forget(generation, "connection lost or master demoted");
        }
        result
    }
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move { self.shared.command(cmd).await })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move { self.shared.pipeline(pipeline, offset, count).await })
    }

    fn get_db(&self) -> i64 {
        self.shared.db
    }
}

fn verdict(result: &RedisResult<Value>) -> Verdict {
    match result {
        Ok(value) => value_verdict(value),
        Err(error) => error_verdict(error),
    }
}

/// A server error reply arrives as a value; the caller turns it into an error later.
fn value_verdict(value: &Value) -> Verdict {
    match value {
        Value::ServerError(error) => match error.code() {
            "READONLY" | "MASTERDOWN" => Verdict::Demoted,
            _ => Verdict::Keep,
        },
        _ => Verdict::Keep,
    }
}

fn error_verdict(error: &RedisError) -> Verdict {
    if matches!(
        error.kind(),
        ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
    ) {
        return Verdict::Demoted;
    }
    if error.is_io_error()
        || error.is_connection_dropped()
        || error.is_timeout()
        || error.is_unrecoverable_error()
    {
        return Verdict::Forget;
    }
    Verdict::Keep
}

#[cfg(test)]
mod tests {
    use super::{error_verdict, value_verdict, Verdict};
    use redis::{ErrorKind, RedisError, Value};

    fn server_error(reply: &str) -> Value {
        // Parsed as the server sends it, so that the code is read as redis-rs reads it.
        redis::parse_redis_value(format!("-{reply}\r\n").as_bytes()).unwrap()
    }

    #[test]
    fn a_demoted_master_is_told_by_its_replies() {
        for reply in [
            "READONLY You can't write against a read only replica.",
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        ] {
            assert_eq!(
                value_verdict(&server_error(reply)),
                Verdict::Demoted,
                "{reply}"
            );
        }
        assert_eq!(
            value_verdict(&server_error("NOSCRIPT No matching script.")),
            Verdict::Keep
        );
        assert_eq!(
            value_verdict(&server_error("ERR wrong number of arguments")),
            Verdict::Keep
        );
        assert_eq!(value_verdict(&Value::Okay), Verdict::Keep);
    }

    #[test]
    fn a_lost_connection_is_forgotten_and_a_refused_command_is_not() {
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(error_verdict(&io), Verdict::Forget);
        let refused = RedisError::from((ErrorKind::Io, "not a master"));
        assert_eq!(error_verdict(&refused), Verdict::Forget);
        let no_script = RedisError::from((
            ErrorKind::Server(redis::ServerErrorKind::NoScript),
            "NOSCRIPT",
        ));
        assert_eq!(error_verdict(&no_script), Verdict::Keep);
        let read_only = RedisError::from((
            ErrorKind::Server(redis::ServerErrorKind::ReadOnly),
            "READONLY",
        ));
        assert_eq!(error_verdict(&read_only), Verdict::Demoted);
    }
}
