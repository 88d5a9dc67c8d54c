//! Redis Cluster rules for key names: BullMQ's scripts touch many keys of a queue in
//! one call, and a flow's jobs in one `MULTI`, which Redis Cluster runs only when every
//! key hashes to one slot. A hash tag (`{...}`) in the prefix or the queue name makes it
//! so; these checks refuse names without one before anything reaches Redis.

use crate::error::Error;

/// How many hash slots Redis Cluster has.
const SLOTS: u16 = 16384;

/// The hash tag Redis Cluster hashes `key` by: the text between its first `{` and the
/// first `}` after it, when not empty; else `None` (the whole key is hashed).
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')?;
    let tag = &key[open + 1..open + 1 + close];
    (!tag.is_empty()).then_some(tag)
}

/// CRC16-XMODEM (polynomial 0x1021), as Redis Cluster computes it.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, byte| {
        (0..8).fold(crc ^ (u16::from(*byte) << 8), |crc, _| {
            if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            }
        })
    })
}

/// The slot Redis Cluster stores `key` in.
pub(crate) fn key_slot(key: &str) -> u16 {
    let hashed = hash_tag(key).unwrap_or(key);
    crc16(hashed.as_bytes()) % SLOTS
}

/// The hash tag every key of `queue` under `prefix` shares, if the names give one: the
/// tag must close inside `<prefix>:<queue>`, or the job id would be part of it.
pub(crate) fn queue_tag<'a>(prefix: &'a str, queue: &'a str) -> Option<String> {
    let base = format!("{prefix}:{queue}");
    let tag = hash_tag(&format!("{base}:"))?.to_owned();
    let open = base.find('{')?;
    (open + tag.len() + 2 <= base.len()).then_some(tag)
}

/// The Redis Cluster hash slot every key of `queue` under `prefix` lands in (when the
/// names carry a hash tag; else the keys spread, and `build` refuses them on a cluster).
/// Queues whose slots different masters serve are processed in parallel; `CLUSTER
/// SLOTS` tells which master serves which.
///
/// ```
/// use queue_core::connection::queue_slot;
///
/// // One tag, one slot: a queue group stays together (and on one master).
/// assert_eq!(queue_slot("bull", "{mail}welcome"), queue_slot("bull", "{mail}digest"));
/// assert_eq!(queue_slot("{bull}", "email"), queue_slot("{bull}", "coupon"));
/// assert_ne!(queue_slot("bull", "{mail}welcome"), queue_slot("bull", "{reports}steps"));
/// ```
pub fn queue_slot(prefix: &str, queue: &str) -> u16 {
    key_slot(&format!("{prefix}:{queue}:"))
}

/// Refuses `queues` (under `prefix`) that have no hash tag, naming them and the fix.
pub(crate) fn check_tags<'a>(
    prefix: &str,
    queues: impl IntoIterator<Item = &'a str>,
) -> Result<(), Error> {
    let untagged: Vec<&str> = queues
        .into_iter()
        .filter(|queue| queue_tag(prefix, queue).is_none())
        .collect();
    if untagged.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(
        "cluster",
        format!(
            "on a Redis Cluster every key of a queue must share one hash slot, and the keys of \
             queue(s) `{}` under prefix `{prefix}` would not: give the prefix a hash tag \
             (`.prefix(\"{{{prefix}}}\")`: every queue on one slot, one master), or give each \
             queue group a tag of its own in its names (`{{mail}}welcome`, `{{reports}}steps`: \
             groups spread over the masters)",
            untagged.join("`, `")
        ),
    ))
}

/// Refuses a flow whose queues hash to different slots: BullMQ adds a flow in one
/// `MULTI`, and a parent's completion moves its keys and its parent's in one script.
pub(crate) fn check_same_slot<'a>(
    prefix: &str,
    queues: impl IntoIterator<Item = &'a str>,
) -> Result<(), Error> {
    let mut first: Option<(&str, u16)> = None;
    for queue in queues {
        let slot = queue_slot(prefix, queue);
        match first {
            None => first = Some((queue, slot)),
            Some((other, other_slot)) if other_slot != slot => {
                return Err(Error::invalid(
                    "flow",
                    format!(
                        "on a Redis Cluster a flow's queues must share one hash slot, and `{other}` \
                         (slot {other_slot}) and `{queue}` (slot {slot}) do not: give them the same \
                         hash tag in their names (`{{reports}}steps`, `{{reports}}notify`), or tag \
                         the prefix"
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // The reference value of CRC16-XMODEM, and slots `CLUSTER KEYSLOT` gives.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(
            key_slot("{user1000}.following"),
            key_slot("{user1000}.followers")
        );
        assert_ne!(
            key_slot("{}.x"),
            key_slot("{}.y"),
            "an empty tag hashes the key"
        );
    }

    #[test]
    fn a_queue_is_tagged_by_its_prefix_or_its_own_name() {
        assert_eq!(queue_tag("{bull}", "email").as_deref(), Some("bull"));
        assert_eq!(queue_tag("bull", "{mail}welcome").as_deref(), Some("mail"));
        assert_eq!(queue_tag("bull", "email"), None);
        // A tag that would close in the job id is none.
        assert_eq!(queue_tag("bull", "{email"), None);
        assert_eq!(queue_tag("bull", "email{}"), None);
        let err = check_tags("bull", ["{mail}welcome", "coupon"]).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("`coupon`"), "{message}");
        assert!(message.contains("{bull}"), "{message}");
        assert!(check_tags("{bull}", ["coupon"]).is_ok());
    }

    #[test]
    fn a_flows_queues_must_share_a_slot() {
        assert!(check_same_slot("bull", ["{r}a", "{r}b"]).is_ok());
        assert!(check_same_slot("{bull}", ["a", "b"]).is_ok());
        let err = check_same_slot("bull", ["{r}a", "{s}b"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`{r}a`") && err.contains("`{s}b`"), "{err}");
    }
}
