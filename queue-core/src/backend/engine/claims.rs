//! Claims in Redis: a hash per key, taken, completed and released by scripts that check
//! the holder's token, so that a holder whose hold expired cannot touch its successor's.

use std::sync::Arc;
use std::time::Duration;

use super::connection::Connection;
use crate::backend::claims::{Claim, ClaimToken};
use crate::error::Error;

/// Takes the key if nobody holds it; else answers its tag and outcome (if done).
const CLAIM: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'token', ARGV[1], 'tag', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1}
end
local held = redis.call('HMGET', KEYS[1], 'tag', 'outcome')
return {0, held[1], held[2], redis.call('PTTL', KEYS[1])}
";

/// Holds the key for another `ARGV[2]` ms, if the caller still holds it.
const EXTEND: &str = r"
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
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

/// Counts one more in a window that starts with the first count and lasts `ARGV[1]` ms;
/// answers the count and the window's time left.
const COUNT: &str = r"
local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return {n, redis.call('PTTL', KEYS[1])}
";

/// How soon a claim given up on is first tried to be freed, and the longest between
/// two tries.
const GIVEN_UP_RETRY: Duration = Duration::from_millis(250);
const GIVEN_UP_RETRY_MAX: Duration = Duration::from_secs(2);

/// How long a claim given up on is tried to be freed at most.
const GIVEN_UP_FOR: Duration = Duration::from_secs(30);

/// How many claims given up on are being freed at once, at most.
const GIVEN_UP_AT_ONCE: usize = 256;

static GIVEN_UP: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(GIVEN_UP_AT_ONCE);

/// One namespace's claims in Redis: `<base><key>`, each call within `timeout`.
#[derive(Debug, Clone)]
pub(crate) struct RedisClaims {
    conn: Arc<Connection>,
    base: String,
    timeout: Duration,
}

impl RedisClaims {
    pub(crate) fn new(conn: Arc<Connection>, base: String, timeout: Duration) -> Self {
        RedisClaims {
            conn,
            base,
            timeout,
        }
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    pub(crate) async fn claim(
        &self,
        key: &str,
        token: String,
        tag: &str,
        hold: Duration,
    ) -> Result<Claim, Error> {
        let mut cmd = script(CLAIM, &self.key(key));
        cmd.arg(&token).arg(tag).arg(millis(hold));
        let reply: Vec<redis::Value> = match self.run("claim", &mut cmd).await {
            Ok(reply) => reply,
            Err(error) => {
                // The script may still run (a stalled Redis runs what it was sent when
                // it wakes): this caller gave up on the key, so it frees it, or the key
                // would be held against every retry for the whole hold.
                tokio::spawn(self.clone().free_given_up(key.to_owned(), token, hold));
                return Err(error);
            }
        };
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
                    None => {
                        let left = match reply.get(3) {
                            Some(redis::Value::Int(ms)) => u64::try_from(*ms).unwrap_or(0),
                            _ => 0,
                        };
                        Claim::Held {
                            tag,
                            ends_within: Duration::from_millis(left),
                        }
                    }
                })
            }
        }
    }

    pub(crate) async fn complete(
        &self,
        key: &str,
        token: &str,
        outcome: &[u8],
        keep: Duration,
    ) -> Result<bool, Error> {
        let mut cmd = script(COMPLETE, &self.key(key));
        cmd.arg(token).arg(outcome).arg(millis(keep));
        let done: i64 = self.run("complete a claim", &mut cmd).await?;
        Ok(done == 1)
    }

    pub(crate) async fn extend(
        &self,
        key: &str,
        token: &str,
        hold: Duration,
    ) -> Result<bool, Error> {
        let mut cmd = script(EXTEND, &self.key(key));
        cmd.arg(token).arg(millis(hold));
        let extended: i64 = self.run("extend a claim", &mut cmd).await?;
        Ok(extended == 1)
    }

    /// Frees a key whose claim call failed on this side, while the claim could hold it:
    /// until a release finds it held with `token` and frees it, or `hold` (at most
    /// [`GIVEN_UP_FOR`]) has passed. Each try is token-checked, so a later holder's
    /// claim is never touched. At most [`GIVEN_UP_AT_ONCE`] such frees run at once,
    /// trying less often as they go: an outage that fails many claims does not become
    /// a flood of tries when Redis returns. A claim past them is left to its hold.
    async fn free_given_up(self, key: String, token: String, hold: Duration) {
        let Ok(_turn) = GIVEN_UP.try_acquire() else {
            tracing::debug!("too many claims given up on; this one ends with its hold");
            return;
        };
        let until = tokio::time::Instant::now() + hold.min(GIVEN_UP_FOR);
        let mut wait = GIVEN_UP_RETRY;
        let mut tries = 0_u32;
        while tokio::time::Instant::now() < until {
            tries += 1;
            // Not there yet (the claim has not run), or not ours, or Redis still away:
            // try again until the hold would have ended.
            if let Ok(true) = self.release(&key, &token).await {
                tracing::debug!(tries, "a claim given up on was freed");
                return;
            }
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            tokio::time::sleep(wait.min(left)).await;
            wait = (wait * 2).min(GIVEN_UP_RETRY_MAX);
        }
    }

    pub(crate) async fn release(&self, key: &str, token: &str) -> Result<bool, Error> {
        let mut cmd = script(RELEASE, &self.key(key));
        cmd.arg(token);
        let released: i64 = self.run("release a claim", &mut cmd).await?;
        Ok(released == 1)
    }

    pub(crate) async fn count(
        &self,
        bucket: &str,
        window: Duration,
    ) -> Result<(u64, Duration), Error> {
        let mut cmd = script(COUNT, &self.key(bucket));
        cmd.arg(millis(window));
        let (n, left): (u64, i64) = self.run("count in a window", &mut cmd).await?;
        let left = u64::try_from(left).unwrap_or(0);
        Ok((n, Duration::from_millis(left)))
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
