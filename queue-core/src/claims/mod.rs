//! Claims: short-lived records in the app's Redis that the first caller of a key takes,
//! and whose outcome the later callers of the key read. queue-axum's idempotency layer
//! keeps a request's first answer in one; it lives here because only this crate talks
//! to Redis.

mod memory;

use std::sync::Arc;
use std::time::Duration;

use crate::app::QueueApp;
use crate::engine::Connection;
use crate::error::Error;

pub(crate) use memory::MemoryClaims;

/// Takes the key if nobody holds it; else answers its tag and outcome (if done).
const CLAIM: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'token', ARGV[1], 'tag', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1}
end
local held = redis.call('HMGET', KEYS[1], 'tag', 'outcome')
return {0, held[1], held[2]}
";

/// Stores the outcome and drops the token, if the caller still holds the key.
const COMPLETE: &str = r"
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'outcome', ARGV[2])
redis.call('HDEL', KEYS[1], 'token')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
";

/// Frees the key, if the caller still holds it.
const RELEASE: &str = r"
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
return redis.call('DEL', KEYS[1])
";

/// Claims under one namespace of the app's Redis: `<prefix>:<namespace>:<key>`. Made by
/// [`QueueApp::claims`]; cheap to clone.
///
/// ```no_run
/// use std::time::Duration;
/// use queue_core::Claim;
///
/// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
/// let claims = app.claims("exports")?;
/// match claims.claim("export-7", "v1", Duration::from_secs(60)).await? {
///     Claim::Taken(token) => {
///         // ... the work, then keep its outcome for a day:
///         claims.complete("export-7", &token, b"done", Duration::from_secs(86_400)).await?;
///     }
///     Claim::Held { .. } => println!("someone is on it"),
///     Claim::Done { outcome, .. } => println!("done before: {outcome:?}"),
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Claims {
    conn: Connection,
    base: String,
    timeout: Duration,
    /// An inline app's claims, kept in memory by the app instead of Redis.
    inline: Option<Arc<MemoryClaims>>,
}

impl std::fmt::Debug for Claims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claims").field("base", &self.base).finish()
    }
}

/// What [`Claims::claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Claim {
    /// Nobody held the key: it is this caller's now, until the hold expires. Finish with
    /// [`Claims::complete`] or [`Claims::release`].
    Taken(ClaimToken),
    /// Another caller holds the key and has not finished; the tag it claimed with.
    Held {
        /// The holder's tag.
        tag: String,
    },
    /// The key's work is done: the tag it was claimed with, and the outcome kept.
    Done {
        /// The first caller's tag.
        tag: String,
        /// What [`Claims::complete`] stored.
        outcome: Vec<u8>,
    },
}

/// Proof of holding a claimed key: only its holder completes or releases it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimToken(String);

impl QueueApp {
    /// Claims in this app's Redis, under `<prefix>:<namespace>:`. Each call waits at most
    /// the app's command timeout. Fails with [`Error::InvalidOption`] for an empty
    /// namespace or one with `:`. An inline app keeps its claims in memory, by the same
    /// rules, so that a unit test of a route behind the idempotency layer needs no Redis.
    pub fn claims(&self, namespace: &str) -> Result<Claims, Error> {
        if namespace.is_empty() || namespace.contains(':') {
            return Err(Error::invalid(
                "namespace",
                format!("`{namespace}` must be non-empty and without ':'"),
            ));
        }
        let conn = self.connection().clone();
        Ok(Claims {
            base: format!("{}:{namespace}:", conn.prefix()),
            conn,
            timeout: self.command_timeout(),
            inline: self.inline_runner().map(|runner| runner.claims()),
        })
    }
}

impl Claims {
    /// Takes `key` for `hold` if nobody holds it, tagged `tag` (what later callers
    /// compare their request with); else says who holds it, or what it ended with.
    pub async fn claim(&self, key: &str, tag: &str, hold: Duration) -> Result<Claim, Error> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        if let Some(memory) = &self.inline {
            return Ok(memory.claim(&self.key(key), token, tag, hold));
        }
        let mut cmd = script(CLAIM, &self.key(key));
        cmd.arg(&token).arg(tag).arg(millis(hold));
        let reply: Vec<redis::Value> = self.run("claim", &mut cmd).await?;
        // A missing field is a nil reply (Lua's `false`), which `Vec<u8>` would take
        // as empty: only a string is a value.
        let text = |value: Option<&redis::Value>| match value {
            Some(redis::Value::BulkString(bytes)) => Some(bytes.clone()),
            Some(redis::Value::SimpleString(text)) => Some(text.clone().into_bytes()),
            _ => None,
        };
        match reply.first() {
            Some(redis::Value::Int(1)) => Ok(Claim::Taken(ClaimToken(token))),
            _ => {
                let tag =
                    String::from_utf8_lossy(&text(reply.get(1)).unwrap_or_default()).into_owned();
                Ok(match text(reply.get(2)) {
                    Some(outcome) => Claim::Done { tag, outcome },
                    None => Claim::Held { tag },
                })
            }
        }
    }

    /// Keeps `outcome` for `keep` as the key's, if `token` still holds it (`false`:
    /// the hold expired first, and the outcome was not kept).
    pub async fn complete(
        &self,
        key: &str,
        token: &ClaimToken,
        outcome: &[u8],
        keep: Duration,
    ) -> Result<bool, Error> {
        if let Some(memory) = &self.inline {
            return Ok(memory.complete(&self.key(key), &token.0, outcome, keep));
        }
        let mut cmd = script(COMPLETE, &self.key(key));
        cmd.arg(&token.0).arg(outcome).arg(millis(keep));
        let done: i64 = self.run("complete a claim", &mut cmd).await?;
        Ok(done == 1)
    }

    /// Frees `key` without an outcome, if `token` still holds it: the next caller takes
    /// it afresh.
    pub async fn release(&self, key: &str, token: &ClaimToken) -> Result<bool, Error> {
        if let Some(memory) = &self.inline {
            return Ok(memory.release(&self.key(key), &token.0));
        }
        let mut cmd = script(RELEASE, &self.key(key));
        cmd.arg(&token.0);
        let released: i64 = self.run("release a claim", &mut cmd).await?;
        Ok(released == 1)
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.base)
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        cmd: &mut redis::Cmd,
    ) -> Result<T, Error> {
        tokio::time::timeout(self.timeout, self.conn.query(cmd))
            .await
            .unwrap_or(Err(Error::Timeout {
                what,
                after: self.timeout,
            }))
    }
}

fn script(lua: &str, key: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(lua).arg(1).arg(key);
    cmd
}

/// At least a millisecond (`PEXPIRE 0` would delete the key at once), and at most ten
/// years (Redis refuses an expiry past its clock's range).
fn millis(d: Duration) -> u64 {
    let d = d.min(crate::options::MAX_DELAY);
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
