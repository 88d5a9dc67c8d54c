//! What the lock scripts run by id and token (`Queue::extend_locks`,
//! `Queue::retake_locks`) are sent, and how their replies are read.

use crate::error::Error;

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

/// Strings as a msgpack array, as the lock scripts unpack them.
pub(crate) fn pack_strings<'a>(strings: impl ExactSizeIterator<Item = &'a str>) -> Vec<u8> {
    use rmp::encode::{write_array_len, write_str};
    let mut buf = Vec::with_capacity(16 + 40 * strings.len());
    // Writing into a Vec cannot fail.
    let _ = write_array_len(&mut buf, strings.len() as u32);
    for s in strings {
        let _ = write_str(&mut buf, s);
    }
    buf
}

/// The active jobs of `keys`' queue locked under one of `tokens`, as (job id, token).
pub(crate) async fn jobs_locked_by(
    conn: &crate::redis_connection::RedisConnection,
    keys: &crate::keys::QueueKeys,
    tokens: &[String],
) -> Result<Vec<(String, String)>, Error> {
    let script = conn
        .scripts()
        .get("findLockedJobs")
        .ok_or_else(|| Error::InvalidConfig("findLockedJobs script not found".to_string()))?
        .clone();
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

/// The job ids a lock script answered with (an array of strings). Anything else is an
/// error naming the script: a reply that cannot be read must not pass for "every lock
/// is fine".
pub(crate) fn job_ids_reply(script: &str, reply: redis::Value) -> Result<Vec<String>, Error> {
    let unexpected = |what: &dyn std::fmt::Debug| {
        Error::InvalidConfig(format!("unexpected {script} reply: {what:?}"))
    };
    let redis::Value::Array(ids) = reply else {
        return Err(unexpected(&reply));
    };
    ids.into_iter()
        .map(|id| match id {
            redis::Value::BulkString(bytes) => {
                String::from_utf8(bytes).map_err(|e| unexpected(&e.into_bytes()))
            }
            redis::Value::SimpleString(id) => Ok(id),
            other => Err(unexpected(&other)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{job_ids_reply, retake_reply, LockRetake};
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

    #[test]
    fn job_ids_are_read_from_an_array_of_strings() {
        let reply = Value::Array(vec![
            Value::BulkString(b"a-1".to_vec()),
            Value::SimpleString("b-2".to_owned()),
        ]);
        assert_eq!(job_ids_reply("extendLocks", reply).unwrap(), ["a-1", "b-2"]);
        assert!(job_ids_reply("extendLocks", Value::Array(vec![]))
            .unwrap()
            .is_empty());
    }

    /// An element that is not a job id (or not UTF-8) is an error, not a job id less:
    /// a lock the caller counts as renewed could be lost.
    #[test]
    fn an_unexpected_element_is_an_error_not_a_job_id_less() {
        for element in [
            Value::Int(3),
            Value::Nil,
            Value::BulkString(vec![0xff, 0xfe]),
        ] {
            let reply = Value::Array(vec![Value::BulkString(b"a-1".to_vec()), element.clone()]);
            let read = job_ids_reply("extendLocks", reply);
            assert!(
                matches!(&read, Err(crate::Error::InvalidConfig(m)) if m.contains("extendLocks")),
                "{element:?}: {read:?}"
            );
        }
        assert!(job_ids_reply("extendLocks", Value::Int(1)).is_err());
    }
}
