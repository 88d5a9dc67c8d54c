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

    pub(crate) async fn release(&self, key: &str, token: &str) -> Result<bool, Error> {
        let mut cmd = script(RELEASE, &self.key(key));
        cmd.arg(token);
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
