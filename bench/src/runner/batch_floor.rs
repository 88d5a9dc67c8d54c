//! The floor of a batch on BullMQ's record of a job (issue #46): how little Redis CPU a
//! job can cost when each job keeps its own hash, lock and events, as Node BullMQ, Bull
//! Board and stalled-job recovery read them, and nothing else is done.
//!
//! The floors, on the very jobs the batch rows run (the raw engine's `add_bulk`):
//! - **BullMQ's record, in Lua**: one script per 100 jobs making only the calls each job
//!   needs (read its hash, write its start, lock it, its `active` event; take it off
//!   `active`, write its end, its `completed` event) and once per batch the list moves,
//!   the locks' release and the finished set. No check at all: no lock compared, no
//!   limit, no retention, no metrics. A batch worker built on scripts that keeps this
//!   record, ours or any other, cannot cost Redis less than this;
//! - **the same record without the `active` event a job**, and **also with one lock a
//!   batch** instead of one a job: records that other BullMQ clients would see
//!   differently (`QueueEvents`' `active`, a job's own lock for stalled-job recovery),
//!   measured so that the choice of giving them up is made on figures;
//! - **BullMQ's record, plain commands**: the same commands pipelined from the client,
//!   no script. Not a design (nothing is atomic: a finish would not see whether its
//!   lock was still held), only where Redis's own cost of those commands lies once
//!   Lua's is gone.
//!
//! The single-job worker's Redis CPU a job over a floor's is about the most that a
//! batch worker keeping that record can run past it while Redis bounds both.

use super::redis::BenchRedis;
use super::systems::System;
use crate::BenchResult;

const LOCK_TOKEN: &str = "floor-token";
const LOCK_MS: &str = "30000";

/// KEYS: wait, active, events, completed. ARGV: key prefix, timestamp, lock token, lock
/// ms, jobs to take, "1" for an `active` event a job, "1" for a lock a job (else one a
/// batch). Returns the hashes packed (as `batchTake` does) or 0 when `wait` is empty.
const FLOOR_SCRIPT: &str = r#"
local prefix, ts, token, lockMs, size = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local activeEvents, jobLocks = ARGV[6] == "1", ARGV[7] == "1"
local ids = redis.call("LRANGE", KEYS[1], -size, -1)
if #ids == 0 then return 0 end
redis.call("LTRIM", KEYS[1], 0, -(#ids + 1))
redis.call("LPUSH", KEYS[2], unpack(ids))
local hashes, scored, locks = {}, {}, {}
if not jobLocks then
  locks[1] = prefix .. "batch:" .. ids[1] .. ":lock"
  redis.call("SET", locks[1], token, "PX", lockMs)
end
for i, id in ipairs(ids) do
  local key = prefix .. id
  hashes[i] = redis.call("HGETALL", key)
  redis.call("HSET", key, "processedOn", ts, "ats", "1")
  if jobLocks then
    locks[i] = key .. ":lock"
    redis.call("SET", locks[i], token, "PX", lockMs)
  end
  if activeEvents then
    redis.call("XADD", KEYS[3], "*", "event", "active", "jobId", id, "prev", "waiting")
  end
end
for i, id in ipairs(ids) do
  local key = prefix .. id
  redis.call("LREM", KEYS[2], -1, id)
  redis.call("HSET", key, "returnvalue", "null", "finishedOn", ts, "atm", "1")
  redis.call("XADD", KEYS[3], "*", "event", "completed", "jobId", id, "returnvalue", "null", "prev", "active")
  scored[#scored + 1] = ts
  scored[#scored + 1] = id
end
redis.call("DEL", unpack(locks))
redis.call("ZADD", KEYS[4], unpack(scored))
return cmsgpack.pack(hashes)
"#;

/// A floor: which record of a job, and how its commands reach Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Floor {
    /// One script a batch: `active_events`, an `active` event a job; `job_locks`, a lock
    /// a job (else one a batch).
    Lua {
        active_events: bool,
        job_locks: bool,
    },
    /// BullMQ's record in plain pipelined commands.
    Plain,
}

impl Floor {
    /// BullMQ's record of a job, in a script.
    pub(super) const RECORD: Floor = Floor::Lua {
        active_events: true,
        job_locks: true,
    };
    pub(super) const ALL: [Floor; 4] = [
        Floor::RECORD,
        Floor::Lua {
            active_events: false,
            job_locks: true,
        },
        Floor::Lua {
            active_events: false,
            job_locks: false,
        },
        Floor::Plain,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            Floor::RECORD => "BullMQ's record (seven calls a job) in one script a batch, no check",
            Floor::Lua {
                active_events: false,
                job_locks: true,
            } => "the same without the `active` event a job (six calls)",
            Floor::Lua {
                active_events: false,
                ..
            } => "the same without the `active` event, one lock a batch (five calls)",
            Floor::Lua { .. } => "the same with the `active` events, one lock a batch",
            Floor::Plain => "BullMQ's record in plain pipelined commands, no script (not atomic)",
        }
    }
}

/// Where a floor runs: the batch rows' queue (its jobs the raw engine's bulk adds) and
/// the target row's batch size, as `batches.rs` gives them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Place<'a> {
    pub(super) queue: &'a str,
    pub(super) size: usize,
}

impl Place<'_> {
    fn key(&self, name: &str) -> String {
        format!("bull:{}:{name}", self.queue)
    }
}

/// Redis's CPU a job, µs, for `jobs` jobs taken and completed through `floor`.
pub(super) fn run(
    redis: &mut BenchRedis,
    place: Place<'_>,
    jobs: u64,
    floor: Floor,
) -> BenchResult<f64> {
    redis.flush()?;
    let n = jobs.to_string();
    System::Raw.run(&redis.url(), &["enqueue", place.queue, "bulk", &n])?;
    let prefix = place.key("");
    let cpu_before = redis.cpu_seconds()?;
    let conn = redis.connection();
    let script = redis::Script::new(FLOOR_SCRIPT);
    let mut batches = 0_u64;
    loop {
        let stamp = batches.to_string();
        let more = match floor {
            Floor::Lua {
                active_events,
                job_locks,
            } => {
                let flag = |on: bool| if on { "1" } else { "0" };
                let reply: redis::Value = script
                    .key(place.key("wait"))
                    .key(place.key("active"))
                    .key(place.key("events"))
                    .key(place.key("completed"))
                    .arg(&prefix)
                    .arg(&stamp)
                    .arg(LOCK_TOKEN)
                    .arg(LOCK_MS)
                    .arg(place.size)
                    .arg(flag(active_events))
                    .arg(flag(job_locks))
                    .invoke(conn)?;
                !matches!(reply, redis::Value::Int(0))
            }
            Floor::Plain => plain_batch(conn, place, &prefix, &stamp)?,
        };
        if !more {
            break;
        }
        batches += 1;
    }
    let cpu = redis.cpu_seconds()? - cpu_before;
    let completed = redis.zcard(place.queue, "completed")?;
    if completed != jobs {
        return Err(format!("the {floor:?} floor completed {completed} of {jobs} jobs").into());
    }
    Ok(cpu * 1e6 / jobs as f64)
}

/// One batch of the plain floor; false when `wait` was empty.
fn plain_batch(
    conn: &mut redis::Connection,
    place: Place<'_>,
    prefix: &str,
    stamp: &str,
) -> BenchResult<bool> {
    let key = |name: &str| place.key(name);
    let size = place.size as i64;
    let (ids, ()): (Vec<String>, ()) = redis::pipe()
        .cmd("LRANGE")
        .arg(key("wait"))
        .arg(-size)
        .arg(-1)
        .cmd("LTRIM")
        .arg(key("wait"))
        .arg(0)
        .arg(-size - 1)
        .query(conn)?;
    if ids.is_empty() {
        return Ok(false);
    }
    let (active, events) = (key("active"), key("events"));
    let mut take = redis::pipe();
    take.cmd("LPUSH").arg(&active).arg(&ids).ignore();
    let mut finish = redis::pipe();
    let mut completed = redis::cmd("ZADD");
    completed.arg(key("completed"));
    let mut unlock = redis::cmd("DEL");
    for id in &ids {
        let job = format!("{prefix}{id}");
        let lock = format!("{job}:lock");
        take.cmd("HGETALL").arg(&job);
        take.cmd("HSET")
            .arg(&job)
            .arg(&["processedOn", stamp, "ats", "1"])
            .ignore();
        take.cmd("SET")
            .arg(&lock)
            .arg(LOCK_TOKEN)
            .arg("PX")
            .arg(LOCK_MS)
            .ignore();
        take.cmd("XADD")
            .arg(&events)
            .arg(&["*", "event", "active", "jobId", id, "prev", "waiting"])
            .ignore();
        finish.cmd("LREM").arg(&active).arg(-1).arg(id).ignore();
        finish
            .cmd("HSET")
            .arg(&job)
            .arg(&["returnvalue", "null", "finishedOn", stamp, "atm", "1"])
            .ignore();
        finish
            .cmd("XADD")
            .arg(&events)
            .arg(&[
                "*",
                "event",
                "completed",
                "jobId",
                id,
                "returnvalue",
                "null",
            ])
            .arg(&["prev", "active"])
            .ignore();
        unlock.arg(&lock);
        completed.arg(stamp).arg(id);
    }
    finish.add_command(unlock).ignore();
    finish.add_command(completed).ignore();
    // The hashes are read back as a worker would need them; their parse is the
    // client's cost, not Redis's.
    let _hashes: Vec<Vec<String>> = take.query(conn)?;
    finish.query::<()>(conn)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_floor_says_which_record_it_keeps() {
        let labels: Vec<&str> = Floor::ALL.iter().map(|floor| floor.label()).collect();
        assert!(labels[0].starts_with("BullMQ's record (seven calls a job)"));
        assert!(labels[1].contains("without the `active` event a job (six calls)"));
        assert!(labels[2].contains("one lock a batch (five calls)"));
        assert!(labels[3].contains("plain pipelined commands"));
    }
}
