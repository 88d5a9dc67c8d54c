//! Locks taken back after an outage (change 15: `Queue::retake_locks`, with
//! `retakeLocks-2.lua`), and the jobs a worker's tokens still hold (change 16:
//! `findLockedJobs-1.lua`, for fetches whose answer was lost).

use super::lock_script::{job_ids_reply, pack_strings, run_lock_script};
use super::registered::script;
use crate::error::Error;
use crate::queue::Queue;

/// What [`crate::Queue::retake_locks`] found for one job's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockRetake {
    /// The lock was still held under the token; it is renewed.
    Held,
    /// The lock had expired and the job was still active, nobody holding it: it is
    /// held under the token again.
    Retaken,
    /// Another token holds the lock: another worker runs the job now.
    Taken,
    /// The job is not active any more (moved back to wait by stalled-job recovery,
    /// finished, or removed).
    Gone,
}

/// The active jobs of `keys`' queue locked under one of `tokens`, as (job id, token).
pub(crate) async fn jobs_locked_by(
    conn: &crate::redis_connection::RedisConnection,
    keys: &crate::keys::QueueKeys,
    tokens: &[String],
) -> Result<Vec<(String, String)>, Error> {
    let script = script(conn, "findLockedJobs")?;
    let packed = pack_strings(tokens.iter().map(String::as_str));
    let base_key = keys.key_prefix();
    let args: Vec<&[u8]> = vec![base_key.as_bytes(), &packed];
    let mut redis_conn = conn.connection();
    let reply = script
        .execute(&mut redis_conn, &[keys.active()], &args)
        .await?;
    let flat = job_ids_reply("findLockedJobs", reply)?;
    Ok(flat
        .chunks_exact(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect())
}

impl Queue {
    /// Renew the locks of several jobs by id and token, taking back those that merely
    /// expired: a lock nobody holds any more, on a job still active, is set again
    /// under the given token (one round trip). Meant for the locks
    /// [`Queue::extend_locks`] could not extend: a renewal that could not reach Redis
    /// in time (a timeout, a failover) then costs nothing, while a job another worker
    /// took, or that is no longer active, is reported as such. Returns one
    /// [`LockRetake`] per lock, in order.
    pub async fn retake_locks(
        &self,
        locks: &[(&str, &str)],
        duration: u64,
    ) -> Result<Vec<LockRetake>, Error> {
        if locks.is_empty() {
            return Ok(Vec::new());
        }
        let keys = [self.keys().active(), self.keys().stalled()];
        let reply = run_lock_script(
            self.connection(),
            self.keys(),
            "retakeLocks",
            &keys,
            locks,
            duration,
        )
        .await?;
        retake_reply(reply, locks.len())
    }
}

/// The codes `retakeLocks` answers with, one per lock sent.
pub(crate) fn retake_reply(reply: redis::Value, sent: usize) -> Result<Vec<LockRetake>, Error> {
    let unexpected = || Error::InvalidConfig(format!("unexpected retakeLocks reply: {reply:?}"));
    let redis::Value::Array(codes) = &reply else {
        return Err(unexpected());
    };
    if codes.len() != sent {
        return Err(unexpected());
    }
    codes
        .iter()
        .map(|code| match code {
            redis::Value::Int(1) => Ok(LockRetake::Held),
            redis::Value::Int(2) => Ok(LockRetake::Retaken),
            redis::Value::Int(3) => Ok(LockRetake::Taken),
            redis::Value::Int(4) => Ok(LockRetake::Gone),
            _ => Err(unexpected()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{retake_reply, LockRetake};
    use redis::Value;

    #[test]
    fn retake_codes_are_read_in_order_and_nothing_else_passes() {
        let reply = Value::Array((1..=4).map(Value::Int).collect());
        assert_eq!(
            retake_reply(reply, 4).unwrap(),
            [
                LockRetake::Held,
                LockRetake::Retaken,
                LockRetake::Taken,
                LockRetake::Gone
            ]
        );
        assert!(retake_reply(Value::Array(vec![Value::Int(5)]), 1).is_err());
        assert!(retake_reply(Value::Array(vec![Value::Int(1)]), 2).is_err());
        assert!(retake_reply(Value::Nil, 0).is_err());
    }
}
