//! Fair groups (PATCHES.md, changes 21 and 34): jobs of a queue belong to groups (a
//! tenant, a customer), a worker takes them one group after the other, and each group
//! has a concurrency and a rate limit of its own, held across every worker.
//!
//! A grouped job is a BullMQ job whose options carry `group: { id }` (the shape BullMQ
//! Pro uses). While it waits its turn it lives in its group, outside BullMQ's `wait`, as
//! BullMQ Pro keeps grouped jobs: our producers add it there (`groupAdd`), and a take
//! adopts the ones a Node producer adds to `wait`. The scripts (`ext/commands/group*.lua`,
//! layout in `groupCommon.lua`) do what BullMQ's open-source scripts cannot do
//! atomically: choose the next group in turn under its limits, in the script that
//! finishes the job before (`groupFinish`).

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

/// The key (after the queue's prefix) of every grouped job waiting its turn, by arrival:
/// the waiting jobs a listing reads after the wait list's.
pub(crate) const GROUPED_WAITING: &str = "gs:waiting";

/// The keys of a queue's groups, joined once per worker (the layout is in
/// `groupCommon.lua`).
#[derive(Debug, Clone)]
pub(crate) struct GroupKeys {
    /// The ring: groups with jobs waiting, by turn.
    ring: String,
    known: String,
    /// Every grouped job waiting its turn.
    waiting: String,
    /// BullMQ's job counter, whose numbers order the jobs a take adopts.
    order: String,
    meta: String,
    prefix: String,
}

impl GroupKeys {
    pub(crate) fn new(keys: &QueueKeys) -> Self {
        Self {
            ring: keys.get("gs:turns"),
            known: keys.get("gs:known"),
            waiting: keys.get(GROUPED_WAITING),
            order: keys.id(),
            meta: keys.meta(),
            prefix: keys.key_prefix(),
        }
    }

    /// The keys a take adds after upstream's own (`groupTake`, `groupFinish`).
    fn take_extra_keys(&self) -> [String; 4] {
        [
            self.ring.clone(),
            self.known.clone(),
            self.waiting.clone(),
            self.order.clone(),
        ]
    }

    /// The keys `groupAdd` adds after `addStandardJob`'s.
    pub(crate) fn add_extra_keys(&self) -> [String; 3] {
        [self.ring.clone(), self.known.clone(), self.waiting.clone()]
    }
}

/// The old layout's keys (PATCHES.md change 21 before change 34): a queue that has any
/// is moved to this one by [`Queue::migrate_groups`].
const OLD_LAYOUT: [&str; 3] = ["gs:ring", "gs:limited", "gs:full"];

/// A grouped worker's takes look outside the ring (at `wait`, `delayed` and groups
/// waiting out a limit) on one take in this many, and whenever the ring has nothing
/// (`groupFetch.lua`): a job a Node producer added, or a due delayed one, waits a few
/// takes at most, and the other takes spend nothing on it.
const LOOK_AROUND_EVERY: u64 = 16;

/// A grouped worker's side: how it takes a job and gives a slot back.
#[derive(Debug, Clone)]
pub(crate) struct Grouping {
    /// Takes so far, for [`LOOK_AROUND_EVERY`].
    takes: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// `moveToActive`'s eleven keys, then the ring, known groups, waiting jobs and
    /// the job counter.
    take_keys: Vec<String>,
    /// What `groupFinish` adds after `moveToFinished`'s keys.
    finish_keys: [String; 4],
    prefix: String,
    limits: [Vec<u8>; 3],
}

/// One slot a running job holds: its group and id.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) group: String,
    pub(crate) job_id: String,
}

/// What a grouped finish adds to `moveToFinished`'s keys and arguments.
pub(crate) struct FinishExtras<'a> {
    pub(crate) keys: &'a [String; 4],
    /// The group limits, the job's group, whether to take the next job, whether to
    /// look outside the ring first.
    pub(crate) args: [&'a [u8]; 6],
}

impl Grouping {
    pub(crate) fn new(
        keys: &QueueKeys,
        move_to_active_keys: &[String],
        limits: GroupLimits,
    ) -> Self {
        let group_keys = GroupKeys::new(keys);
        let mut take_keys = move_to_active_keys.to_vec();
        take_keys.extend(group_keys.take_extra_keys());
        Self {
            takes: Default::default(),
            take_keys,
            finish_keys: group_keys.take_extra_keys(),
            prefix: group_keys.prefix,
            limits: limit_args(limits),
        }
    }

    /// Runs `groupTake`; answers as `moveToActive` does. `giving_back` is the slot
    /// of the attempt the caller just finished (its lock token is the one in
    /// `packed_opts`): freed in the same call; `fetch` false only frees it.
    pub(crate) async fn take(
        &self,
        conn: &RedisConnection,
        packed_opts: &[u8],
        giving_back: Option<&Slot>,
        fetch: bool,
    ) -> Result<redis::Value, Error> {
        let script = script(conn, "groupTake")?;
        let now = now_ms().to_string().into_bytes();
        let (group, job_id) =
            giving_back.map_or(("", ""), |slot| (slot.group.as_str(), slot.job_id.as_str()));
        let args: [&[u8]; 10] = [
            self.prefix.as_bytes(),
            &now,
            packed_opts,
            &self.limits[0],
            &self.limits[1],
            &self.limits[2],
            flag(fetch),
            group.as_bytes(),
            job_id.as_bytes(),
            flag(self.look_around()),
        ];
        let mut redis_conn = conn.connection();
        script
            .execute(&mut redis_conn, &self.take_keys, &args)
            .await
    }

    /// What `groupFinish` needs beyond `moveToFinished`'s keys and arguments, for the
    /// job in `slot`; `fetch`: whether to take the next job.
    pub(crate) fn finish_extras<'a>(&'a self, slot: &'a Slot, fetch: bool) -> FinishExtras<'a> {
        FinishExtras {
            keys: &self.finish_keys,
            args: [
                &self.limits[0],
                &self.limits[1],
                &self.limits[2],
                slot.group.as_bytes(),
                flag(fetch),
                flag(self.look_around()),
            ],
        }
    }

    /// Whether this take looks outside the ring first ([`LOOK_AROUND_EVERY`]).
    fn look_around(&self) -> bool {
        self.takes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .is_multiple_of(LOOK_AROUND_EVERY)
    }

    /// The slot a job taken by [`take`](Self::take) holds.
    pub(crate) fn slot_of(job: &crate::job::Job) -> Slot {
        Slot {
            group: group_of(job.opts()).unwrap_or_default().into_owned(),
            job_id: job.id().to_owned(),
        }
    }
}

fn flag(on: bool) -> &'static [u8] {
    if on {
        b"1"
    } else {
        b"0"
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
        let args: [&str; 6] = [&keys.prefix, group, action, &concurrency, &max, &duration];
        let mut conn = self.connection().connection();
        script
            .execute(
                &mut conn,
                &[&keys.ring, &keys.known, &keys.meta, &self.keys().marker()],
                &args,
            )
            .await?;
        Ok(())
    }

    /// Wakes a worker when grouped jobs wait their turn: after a resume of the queue,
    /// whose script (upstream's `pause`) adds the marker only when `wait` or
    /// `prioritized` holds jobs, and grouped jobs wait in their groups.
    pub(crate) async fn wake_for_grouped_jobs(&self) -> Result<(), Error> {
        let keys = GroupKeys::new(self.keys());
        let mut conn = self.connection().connection();
        let waiting: u64 = redis::cmd("ZCARD")
            .arg(&keys.waiting)
            .query_async(&mut conn)
            .await?;
        if waiting > 0 {
            redis::cmd("ZADD")
                .arg(self.keys().marker())
                .arg(0)
                .arg("0")
                .query_async::<()>(&mut conn)
                .await?;
        }
        Ok(())
    }

    /// How many grouped jobs wait their turn (in their groups, outside BullMQ's
    /// `wait`; a job another client removed counts until a take passes over it).
    pub async fn count_grouped_waiting(&self) -> Result<u64, Error> {
        let keys = GroupKeys::new(self.keys());
        let mut conn = self.connection().connection();
        Ok(redis::cmd("ZCARD")
            .arg(&keys.waiting)
            .query_async(&mut conn)
            .await?)
    }

    /// Takes a job out of its group if it waits there (before it is removed: BullMQ's
    /// `removeJob` knows nothing of groups). Returns whether it waited in a group.
    pub async fn leave_group(&self, job_id: &str) -> Result<bool, Error> {
        let keys = GroupKeys::new(self.keys());
        let script = script(self.connection(), "groupRemoveJob")?;
        let mut conn = self.connection().connection();
        let reply = script
            .execute(&mut conn, &[&keys.waiting], &[keys.prefix.as_str(), job_id])
            .await?;
        Ok(matches!(reply, redis::Value::Int(1)))
    }

    /// Removes up to `count` grouped jobs waiting their turn, oldest first, with their
    /// keys; with `added_before` (ms), only those added at or before it. Returns the
    /// removed ids.
    pub async fn remove_grouped_waiting(
        &self,
        count: usize,
        added_before: Option<u64>,
    ) -> Result<Vec<String>, Error> {
        let keys = GroupKeys::new(self.keys());
        let script = script(self.connection(), "groupDrain")?;
        let count = count.max(1).to_string();
        let before = added_before.map(|t| t.to_string()).unwrap_or_default();
        let mut conn = self.connection().connection();
        let reply = script
            .execute(
                &mut conn,
                &[&keys.waiting],
                &[keys.prefix.as_str(), &count, &before],
            )
            .await?;
        strings(reply, "groupDrain")
    }

    /// Removes every grouped job waiting its turn, with its keys (each leaves its group
    /// in the same script: a job added meanwhile keeps its place and its group's turn,
    /// and a group left empty is dropped by the take that pops it); with `everything`
    /// (obliterate: the queue is paused) also deletes the groups themselves, a page at a
    /// time, their slots, settings and the ring.
    pub async fn clear_groups(&self, everything: bool) -> Result<(), Error> {
        const PAGE: usize = 500;
        while !self.remove_grouped_waiting(PAGE, None).await?.is_empty() {}
        if !everything {
            return Ok(());
        }
        let keys = GroupKeys::new(self.keys());
        let mut after: Option<String> = None;
        loop {
            let page = self.list_groups(after.as_deref(), PAGE).await?;
            let mut del = redis::cmd("DEL");
            for group in &page {
                let base = format!("{}g:{}:", keys.prefix, group.id);
                for suffix in ["wait", "active", "meta", "limiter"] {
                    del.arg(format!("{base}{suffix}"));
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
        let mut conn = self.connection().connection();
        let mut del = redis::cmd("DEL");
        del.arg(&keys.ring).arg(&keys.known).arg(&keys.waiting);
        for old in OLD_LAYOUT {
            del.arg(self.keys().get(old));
        }
        del.query_async::<()>(&mut conn).await?;
        Ok(())
    }

    /// Moves a queue's groups from the first layout (grouped jobs waiting in BullMQ's
    /// `prioritized` too, a list ring) to this one, a page at a time; does nothing for
    /// a queue without the old keys. Returns whether there was anything to move. The
    /// first layout's workers must be stopped first.
    pub async fn migrate_groups(&self) -> Result<bool, Error> {
        const PAGE: usize = 200;
        let old: Vec<String> = OLD_LAYOUT.iter().map(|k| self.keys().get(k)).collect();
        let mut conn = self.connection().connection();
        let present: u64 = redis::cmd("EXISTS")
            .arg(&old)
            .query_async(&mut conn)
            .await?;
        if present == 0 {
            return Ok(false);
        }
        let keys = GroupKeys::new(self.keys());
        let script = script(self.connection(), "groupMigrate")?;
        let prioritized = self.keys().prioritized();
        let mut from = "-".to_owned();
        loop {
            let reply = script
                .execute(
                    &mut conn,
                    &[
                        &keys.known,
                        &keys.ring,
                        &keys.waiting,
                        &prioritized,
                        &keys.meta,
                        &keys.order,
                    ],
                    &[keys.prefix.as_str(), &from, &PAGE.to_string()],
                )
                .await?;
            let page = strings(reply, "groupMigrate")?;
            match page.last() {
                Some(last) if page.len() == PAGE => from = format!("({last}"),
                _ => break,
            }
        }
        redis::cmd("DEL")
            .arg(&old)
            .query_async::<()>(&mut conn)
            .await?;
        Ok(true)
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

/// A script's reply of ids or names.
fn strings(reply: redis::Value, script: &str) -> Result<Vec<String>, Error> {
    let unexpected = || Error::InvalidConfig(format!("unexpected {script} reply"));
    let redis::Value::Array(items) = reply else {
        return Err(unexpected());
    };
    items
        .into_iter()
        .map(|item| match item {
            redis::Value::BulkString(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
            _ => Err(unexpected()),
        })
        .collect()
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
