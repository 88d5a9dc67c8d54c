//! The shared connection to one Redis server, replaced when it goes silent.
//!
//! redis-rs's `ConnectionManager` reconnects when its socket fails. A socket that a load
//! balancer or a NAT forgot fails without a sound: no FIN, no RST, and every command
//! waits out its timeout. The manager takes a timeout for a slow server and keeps the
//! socket, so the process stays cut off after the network is back, until it restarts.
//!
//! [`RenewingConnection`] notes when a command went out with every earlier one answered,
//! and forgets it at the next reply. A command sent when one has waited longer than the
//! silence allowed (`RedisConnectionOptions::renew_after`; the response timeout unless
//! set) finds the socket taken for dead: a new manager (connecting lazily) replaces
//! it, and the command goes out on that. Commands already sent finish on the old one,
//! which goes with its last clone. It works whoever gave up on the unanswered command
//! (its caller's own deadline, or nobody), and a slow server that still answers some
//! commands is heard, so it is not replaced.
//!
//! The same silence bounds each command: the manager is made without a response
//! timeout, and a command ends with a timeout error here once the connection has been
//! silent that long since the command went out (nothing heard: no reply to it or to any
//! other), the wait for a lazy manager's connection included. A busy server that still
//! answers is not silent, so a thousand adds sent at once, or one large transfer, are
//! not cut at the silence from their sending. One timer per command, and a caller whose
//! call is one command needs no deadline of its own (queue-core's `add` has none); a
//! caller's own deadline of the same length ends first ([`CALLER_FIRST`]), so it is the
//! one that names what timed out.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Cmd, Pipeline, RedisFuture, RedisResult, Value};
use tracing::debug;

/// A [`ConnectionManager`] that is replaced when it goes silent. Cheap to clone; clones
/// share the manager and its replacement.
#[derive(Clone)]
pub struct RenewingConnection {
    inner: Arc<Renewing>,
}

struct Renewing {
    client: Client,
    config: ConnectionManagerConfig,
    current: RwLock<Current>,
    /// How long a command may wait for its reply, with nothing else heard, before the
    /// connection counts as dead, ms.
    silence_ms: u64,
    /// What the times below count from.
    born: Instant,
    /// When a command went out with every earlier one answered, ms since `born`;
    /// [`NOTHING_PENDING`] after a reply.
    pending_since_ms: AtomicU64,
}

/// The manager of the moment, and when it was heard last.
#[derive(Clone)]
struct Current {
    manager: ConnectionManager,
    /// When a reply (to any command sent on this manager) came last, ms since `born`.
    /// The manager's own: replies on its replacement say nothing of its socket.
    heard_ms: Arc<AtomicU64>,
}

impl Current {
    fn new(manager: ConnectionManager) -> Self {
        Current {
            manager,
            heard_ms: Arc::new(AtomicU64::new(0)),
        }
    }
}

/// How much later than the silence a silent command ends here: a caller that gave the
/// same call a deadline of the same length (queue-core's `timed`) ends it first, with an
/// error naming the call.
const CALLER_FIRST: Duration = Duration::from_millis(50);

/// `pending_since_ms` when every command sent has had its reply.
const NOTHING_PENDING: u64 = u64::MAX;

impl RenewingConnection {
    /// `manager`, made from `client` with `config` (no response timeout: `silence` is
    /// each command's deadline), to be replaced by a new one of the same after
    /// `silence` without a reply.
    pub(crate) fn new(
        client: Client,
        config: ConnectionManagerConfig,
        manager: ConnectionManager,
        silence: Duration,
    ) -> Self {
        RenewingConnection {
            inner: Arc::new(Renewing {
                client,
                config,
                current: RwLock::new(Current::new(manager)),
                silence_ms: millis(silence),
                born: Instant::now(),
                pending_since_ms: AtomicU64::new(NOTHING_PENDING),
            }),
        }
    }

    /// The manager now.
    pub fn current(&self) -> ConnectionManager {
        self.now().manager
    }

    fn now(&self) -> Current {
        self.inner
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The manager to send a command on: the current one, or a new one in its place
    /// when the current one has gone silent.
    fn for_sending(&self) -> Current {
        let inner = &self.inner;
        let now = inner.now_ms();
        let pending = inner.pending_since_ms.load(Ordering::Acquire);
        if pending == NOTHING_PENDING {
            // Only the first command after a reply starts the count.
            let _ = inner.pending_since_ms.compare_exchange(
                NOTHING_PENDING,
                now,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        } else if now.saturating_sub(pending) >= inner.silence_ms {
            return self.renew(pending, now);
        }
        self.now()
    }

    /// A new manager in place of the silent one, unless another sender replaced it
    /// already (one replacement per silence); the manager to send on either way.
    /// Under the write lock, so that no sender takes the silent one meanwhile.
    fn renew(&self, pending: u64, now: u64) -> Current {
        let inner = &self.inner;
        let mut current = inner
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // This command starts the count on the new manager.
        let first = inner
            .pending_since_ms
            .compare_exchange(pending, now, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if first {
            // Only a configuration the first manager was made with could fail here.
            if let Ok(fresh) =
                ConnectionManager::new_lazy_with_config(inner.client.clone(), inner.config.clone())
            {
                *current = Current::new(fresh);
                debug!(
                    silent_ms = now.saturating_sub(pending),
                    "no reply from Redis for as long as a command may wait: a new connection replaces the silent one"
                );
            }
        }
        current.clone()
    }

    /// Notes what a command's result says about the connection: only a timeout leaves
    /// the silence counting. A reply (an error reply included) says Redis is there; a
    /// socket that failed (refused, reset, closed) is the manager's to reconnect, and
    /// replacing it meanwhile would only churn.
    fn after<T>(&self, result: &RedisResult<T>, heard_ms: &AtomicU64) {
        if !matches!(result, Err(e) if e.is_timeout()) {
            let inner = &self.inner;
            heard_ms.fetch_max(inner.now_ms(), Ordering::AcqRel);
            inner
                .pending_since_ms
                .store(NOTHING_PENDING, Ordering::Release);
        }
    }
}

impl Renewing {
    fn now_ms(&self) -> u64 {
        millis(self.born.elapsed())
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl RenewingConnection {
    /// `sent` (on the manager whose last reply `heard_ms` keeps), ended with a timeout
    /// error once that manager has been silent as long as it may be since `sent` went
    /// out; what its result says about the connection is noted. One timer, set again
    /// only when the manager was heard meanwhile.
    async fn answered<T>(
        &self,
        heard_ms: &AtomicU64,
        sent: impl Future<Output = RedisResult<T>>,
    ) -> RedisResult<T> {
        let inner = &self.inner;
        let silence = Duration::from_millis(inner.silence_ms);
        let sent_at = inner.now_ms();
        let mut sent = std::pin::pin!(sent);
        let mut heard = heard_ms.load(Ordering::Acquire);
        let result = loop {
            let quiet_since = Duration::from_millis(sent_at.max(heard));
            let until = inner.born + quiet_since + silence + CALLER_FIRST;
            match tokio::time::timeout_at(until.into(), sent.as_mut()).await {
                Ok(result) => break result,
                Err(_) => {
                    let heard_now = heard_ms.load(Ordering::Acquire);
                    if heard_now <= heard {
                        break Err(no_answer_within(silence));
                    }
                    heard = heard_now;
                }
            }
        };
        self.after(&result, heard_ms);
        result
    }
}

/// The error of a command that had no answer within `deadline`: an I/O timeout, as
/// redis-rs's own response timeout gives, so that callers who tell a timeout apart
/// (`RedisError::is_timeout`) see one.
fn no_answer_within(deadline: Duration) -> redis::RedisError {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("no answer from Redis within {deadline:?}"),
    )
    .into()
}

impl ConnectionLike for RenewingConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let Current {
            mut manager,
            heard_ms,
        } = self.for_sending();
        Box::pin(async move {
            self.answered(&heard_ms, manager.req_packed_command(cmd))
                .await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let Current {
            mut manager,
            heard_ms,
        } = self.for_sending();
        Box::pin(async move {
            self.answered(
                &heard_ms,
                manager.req_packed_commands(pipeline, offset, count),
            )
            .await
        })
    }

    fn get_db(&self) -> i64 {
        self.current().get_db()
    }
}
