//! Fair groups (PATCHES.md, change 21): jobs of a queue belong to groups (a tenant, a
//! customer), a worker takes them one group after the other, and each group has a
//! concurrency and a rate limit of its own, held across every worker.
//!
//! A grouped job is an ordinary BullMQ job whose options carry `group: { id }`
//! (the shape BullMQ Pro uses), added by BullMQ's own add scripts, from Rust or Node.
//! The scripts `groupTake`, `groupRelease`, `groupControl` and `groupList`
//! (`ext/commands/group*.lua`, layout in `groupCommon.lua`) do what BullMQ's open-source
//! scripts cannot do atomically: choose the next group in turn under its limits.

use std::time::{SystemTime, UNIX_EPOCH};

pub use super::group_limits::{GroupLimits, GroupRate};
use super::registered::script;
use crate::error::Error;
use crate::keys::QueueKeys;
use crate::options::JobOptions;
use crate::queue::Queue;
use crate::redis_connection::RedisConnection;

/// The option key under which a job names its group: `opts.group.id`.
pub const GROUP_OPTION: &str = "group";

/// One group, as [`Queue::list_groups`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// The group's id (`""` holds the jobs added without a group).
    pub id: String,
    /// Jobs waiting their turn (removed jobs not yet passed over may still count).
    pub waiting: u64,
    /// Jobs holding one of the group's slots.
    pub active: u64,
    /// Whether the group is paused.
    pub paused: bool,
    /// The group's own limits, which win over the workers'.
    pub limits: GroupLimits,
}

/// The group a job's options name: `opts.group.id` (a number, as a Node producer may
/// give, as its decimal text), `None` for an ungrouped job.
pub fn group_of(opts: &JobOptions) -> Option<std::borrow::Cow<'_, str>> {
    let id = opts.extensions.get(GROUP_OPTION)?.get("id")?;
    let id = match id {
        serde_json::Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => {
            std::borrow::Cow::Owned(n.to_string())
        }
        _ => return None,
    };
    (!id.is_empty()).then_some(id)
}

/// The keys of a queue's groups, joined once per worker.
#[derive(Debug, Clone)]
pub(crate) struct GroupKeys {
    ring: String,
    known: String,
    limited: String,
    full: String,
    marker: String,
    prefix: String,
}

impl GroupKeys {
    pub(crate) fn new(keys: &QueueKeys) -> Self {
        Self {
            ring: keys.get("gs:ring"),
            known: keys.get("gs:known"),
            limited: keys.get("gs:limited"),
            full: keys.get("gs:full"),
            marker: keys.marker(),
            prefix: keys.key_prefix(),
        }
    }

    fn control_keys(&self) -> [&str; 5] {
        [
            &self.ring,
            &self.known,
            &self.limited,
            &self.full,
            &self.marker,
        ]
    }
}

/// A grouped worker's side: how it takes a job and gives a slot back.
#[derive(Debug, Clone)]
pub(crate) struct Grouping {
    keys: GroupKeys,
    /// `moveToActive`'s eleven keys, then the ring, known, limited and full groups.
    take_keys: Vec<String>,
    limits: [Vec<u8>; 3],
}

/// One slot a running job holds: its group and id.
#[derive(Debug)]
pub(crate) struct Slot {
    group: String,
    job_id: String,
}

impl Grouping {
    pub(crate) fn new(
        keys: &QueueKeys,
        move_to_active_keys: &[String],
        limits: GroupLimits,
    ) -> Self {
        let group_keys = GroupKeys::new(keys);
        let mut take_keys = move_to_active_keys.to_vec();
        take_keys.extend([
            group_keys.ring.clone(),
            group_keys.known.clone(),
            group_keys.limited.clone(),
            group_keys.full.clone(),
        ]);
        Self {
            keys: group_keys,
            take_keys,
            limits: limit_args(limits),
        }
    }

    /// Runs `groupTake`; answers as `moveToActive` does. `giving_back` is the slot
    /// (and its lock token) of the attempt the caller just finished: freed in the
    /// same call.
    pub(crate) async fn take(
        &self,
        conn: &RedisConnection,
        packed_opts: &[u8],
        giving_back: Option<(&Slot, &str)>,
    ) -> Result<redis::Value, Error> {
        let script = script(conn, "groupTake")?;
        let now = now_ms().to_string().into_bytes();
        let (group, job_id, token) = giving_back.map_or(("", "", ""), |(slot, token)| {
            (slot.group.as_str(), slot.job_id.as_str(), token)
        });
        let args: [&[u8]; 9] = [
            self.keys.prefix.as_bytes(),
            &now,
            packed_opts,
            &self.limits[0],
            &self.limits[1],
            &self.limits[2],
            group.as_bytes(),
            job_id.as_bytes(),
            token.as_bytes(),
        ];
        let mut redis_conn = conn.connection();
        script
            .execute(&mut redis_conn, &self.take_keys, &args)
            .await
    }

    /// The slot a job taken by [`take`](Self::take) holds.
    pub(crate) fn slot_of(job: &crate::job::Job) -> Slot {
        Slot {
            group: group_of(job.opts()).unwrap_or_default().into_owned(),
            job_id: job.id().to_owned(),
        }
    }

    /// Gives back the slot `token`'s run holds, if it still does.
    pub(crate) async fn release(
        &self,
        conn: &RedisConnection,
        slot: &Slot,
        token: &str,
    ) -> Result<bool, Error> {
        let script = script(conn, "groupRelease")?;
        let now = now_ms().to_string().into_bytes();
        let args: [&[u8]; 8] = [
            self.keys.prefix.as_bytes(),
            slot.group.as_bytes(),
            slot.job_id.as_bytes(),
            token.as_bytes(),
            &now,
            &self.limits[0],
            &self.limits[1],
            &self.limits[2],
        ];
        let mut redis_conn = conn.connection();
        let reply = script
            .execute(&mut redis_conn, &self.keys.control_keys(), &args)
            .await?;
        Ok(matches!(reply, redis::Value::Int(1)))
    }
}

fn limit_args(limits: GroupLimits) -> [Vec<u8>; 3] {
    let concurrency = limits.concurrency.unwrap_or(0);
    let (max, duration) = limits.rate.map_or((0, 0), |r| (r.max, r.duration_ms));
    [
        concurrency.to_string().into_bytes(),
        max.to_string().into_bytes(),
        duration.to_string().into_bytes(),
    ]
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Queue {
    /// Pauses one group: its waiting jobs stay, none starts until
    /// [`resume_group`](Self::resume_group); its running jobs finish.
    pub async fn pause_group(&self, group: &str) -> Result<(), Error> {
        self.group_control(group, "pause", None).await
    }

    /// Resumes a group paused by [`pause_group`](Self::pause_group).
    pub async fn resume_group(&self, group: &str) -> Result<(), Error> {
        self.group_control(group, "resume", None).await
    }

    /// Sets a group's own limits, which win over the workers'; a field left `None`
    /// goes back to the workers' setting.
    pub async fn set_group_limits(&self, group: &str, limits: GroupLimits) -> Result<(), Error> {
        self.group_control(group, "limits", Some(limits)).await
    }

    async fn group_control(
        &self,
        group: &str,
        action: &str,
        limits: Option<GroupLimits>,
    ) -> Result<(), Error> {
        let keys = GroupKeys::new(self.keys());
        let script = script(self.connection(), "groupControl")?;
        let limits = limits.unwrap_or_default();
        let concurrency = limits
            .concurrency
            .map(|c| c.to_string())
            .unwrap_or_default();
        let (max, duration) = limits.rate.map_or((String::new(), String::new()), |r| {
            (r.max.to_string(), r.duration_ms.to_string())
        });
        let now = now_ms().to_string();
        let args: [&str; 7] = [
            &keys.prefix,
            group,
            action,
            &now,
            &concurrency,
            &max,
            &duration,
        ];
        let mut conn = self.connection().connection();
        script
            .execute(&mut conn, &keys.control_keys(), &args)
            .await?;
        Ok(())
    }

    /// Deletes the groups' own keys, a page of groups at a time: each group's waiting
    /// jobs (`drain`, which removes those jobs, leaves their ids there), and with
    /// `everything` (after `obliterate`) the groups themselves, their slots, settings and
    /// the ring.
    pub async fn clear_groups(&self, everything: bool) -> Result<(), Error> {
        const PAGE: usize = 500;
        let keys = GroupKeys::new(self.keys());
        let mut after: Option<String> = None;
        loop {
            let page = self.list_groups(after.as_deref(), PAGE).await?;
            let mut del = redis::cmd("DEL");
            for group in &page {
                let base = format!("{}g:{}:", keys.prefix, group.id);
                del.arg(format!("{base}wait"));
                if everything {
                    for suffix in ["active", "meta", "limiter"] {
                        del.arg(format!("{base}{suffix}"));
                    }
                }
            }
            if !page.is_empty() {
                let mut conn = self.connection().connection();
                del.query_async::<()>(&mut conn).await?;
            }
            if page.len() < PAGE {
                break;
            }
            after = page.last().map(|g| g.id.clone());
        }
        if everything {
            let mut conn = self.connection().connection();
            redis::cmd("DEL")
                .arg(&keys.ring)
                .arg(&keys.known)
                .arg(&keys.limited)
                .arg(&keys.full)
                .query_async::<()>(&mut conn)
                .await?;
        }
        Ok(())
    }

    /// One page of the queue's groups, by id: those after `after` (from the first
    /// when `None`), at most `count` of them.
    pub async fn list_groups(
        &self,
        after: Option<&str>,
        count: usize,
    ) -> Result<Vec<GroupInfo>, Error> {
        let keys = GroupKeys::new(self.keys());
        let script = script(self.connection(), "groupList")?;
        let from = after.map_or_else(|| "-".to_owned(), |a| format!("({a}"));
        let count = count.to_string();
        let args: [&str; 3] = [&keys.prefix, &from, &count];
        let mut conn = self.connection().connection();
        let reply = script.execute(&mut conn, &[&keys.known], &args).await?;
        parse_group_page(reply)
    }
}

fn parse_group_page(reply: redis::Value) -> Result<Vec<GroupInfo>, Error> {
    let unexpected = || Error::InvalidConfig("unexpected groupList reply".to_owned());
    let redis::Value::Array(rows) = reply else {
        return Err(unexpected());
    };
    rows.into_iter()
        .map(|row| {
            let redis::Value::Array(fields) = row else {
                return Err(unexpected());
            };
            let text = |i: usize| match fields.get(i) {
                Some(redis::Value::BulkString(b)) => Ok(String::from_utf8_lossy(b).into_owned()),
                _ => Err(unexpected()),
            };
            let int = |i: usize| match fields.get(i) {
                Some(redis::Value::Int(n)) => Ok(u64::try_from(*n).unwrap_or(0)),
                _ => Err(unexpected()),
            };
            let number =
                |i: usize| -> Result<Option<u64>, Error> { Ok(text(i)?.parse::<u64>().ok()) };
            let rate = match (number(5)?, number(6)?) {
                (Some(max), Some(duration_ms)) => Some(GroupRate { max, duration_ms }),
                _ => None,
            };
            Ok(GroupInfo {
                id: text(0)?,
                waiting: int(1)?,
                active: int(2)?,
                paused: int(3)? == 1,
                limits: GroupLimits {
                    concurrency: number(4)?.and_then(|c| u32::try_from(c).ok()),
                    rate,
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_names_its_group_under_group_id() {
        let mut opts = JobOptions::default();
        assert_eq!(group_of(&opts), None);
        opts.extensions.insert(
            GROUP_OPTION.into(),
            serde_json::json!({ "id": "tenant-42" }),
        );
        assert_eq!(group_of(&opts).as_deref(), Some("tenant-42"));
        opts.extensions
            .insert(GROUP_OPTION.into(), serde_json::json!({ "id": 42 }));
        assert_eq!(group_of(&opts).as_deref(), Some("42"));
        opts.extensions
            .insert(GROUP_OPTION.into(), serde_json::json!({ "id": "" }));
        assert_eq!(group_of(&opts), None);
    }

    #[test]
    fn limits_are_sent_as_numbers_zero_for_none() {
        let args = limit_args(GroupLimits::default());
        assert_eq!(args, [b"0".to_vec(), b"0".to_vec(), b"0".to_vec()]);
        let args = limit_args(GroupLimits {
            concurrency: Some(2),
            rate: Some(GroupRate {
                max: 5,
                duration_ms: 1000,
            }),
        });
        assert_eq!(args, [b"2".to_vec(), b"5".to_vec(), b"1000".to_vec()]);
    }
}
