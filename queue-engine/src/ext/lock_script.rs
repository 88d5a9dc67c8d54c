//! What the lock scripts run by id and token (`extendLocks`, `retakeLocks`,
//! `findLockedJobs`) are sent, and how their id replies are read. A leaf: the queue
//! (`Queue::extend_locks`, change 4) and our lock extensions (`locks.rs`) both use it.

use super::registered::script;
use crate::error::Error;
use crate::keys::QueueKeys;
use crate::redis_connection::RedisConnection;

/// Runs a lock script of the `extendLocks` shape: the keys, then the base key, the
/// tokens and the ids (as msgpack arrays) and the lock's duration.
pub(crate) async fn run_lock_script(
    conn: &RedisConnection,
    queue_keys: &QueueKeys,
    name: &str,
    keys: &[String],
    locks: &[(&str, &str)],
    duration: u64,
) -> Result<redis::Value, Error> {
    let script = script(conn, name)?;
    let packed_ids = pack_strings(locks.iter().map(|(id, _)| *id));
    let packed_tokens = pack_strings(locks.iter().map(|(_, token)| *token));
    let base_key = queue_keys.key_prefix();
    let duration = duration.to_string();
    let args: Vec<&[u8]> = vec![
        base_key.as_bytes(),
        &packed_tokens,
        &packed_ids,
        duration.as_bytes(),
    ];
    let mut redis_conn = conn.connection();
    script.execute(&mut redis_conn, keys, &args).await
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
    use super::job_ids_reply;
    use redis::Value;

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
