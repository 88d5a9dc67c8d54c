//! A cron scheduler's run that fell due while no worker ran is kept through an upsert
//! (change 31).
//!
//! BullMQ's `addJobScheduler` replaces a scheduler's pending job with one at the next
//! time the pattern gives after now. For a run still in the future that is the same
//! run; for one already due (its time passed while no worker was there to take it) it
//! silently drops the run. An application that upserts its schedulers at start-up, as it
//! should, then loses exactly the run its downtime made it miss. An `every` scheduler
//! keeps its slot already (the script reuses the previous millis); a pattern one is
//! handed the due run's millis here, so the script puts the run back at once with the
//! new template. The worker that runs it makes the next run after now (change 32), so
//! however many runs were missed, one is made up.
//!
//! The script runs in a transaction that holds only while the run is still owed: with
//! the scheduler set watched, the pending run is read again, and the script goes out
//! only if it is the owed one. Another process's worker may take the run meanwhile and
//! make the next one (a `ZADD` on the watched set: the transaction does not run), or
//! take it only (the script finds the id active and refuses it, `-10`): either way the
//! upsert goes on as upstream's, and the worker's run is the one owed. Without the
//! transaction, a stale owed time made the script store a job over the running one.

use redis::aio::MultiplexedConnection;

use crate::error::{error_code, Error};
use crate::keys::QueueKeys;
use crate::redis_connection::RedisConnection;
use crate::scripts::{script_command, LuaScript};

/// The scheduler an upsert is for.
pub(crate) struct Owed<'a> {
    pub(crate) scheduler_id: &'a str,
    pub(crate) pattern: &'a str,
    pub(crate) tz: Option<&'a str>,
    /// The upsert's time, ms.
    pub(crate) now: u64,
}

/// Runs `addJobScheduler` (`script` on `keys`) with the args `args_for` gives for the
/// owed run's millis, if the scheduler owes a run: its pending run's time has passed,
/// that run's job is still there, and the pattern and time zone are the ones being
/// upserted (a changed schedule starts afresh). The script's reply, or `None` when
/// nothing is owed, the run was taken meanwhile, or the connection has no server of its
/// own to hold a transaction on (a cluster, Sentinel): the caller then upserts as
/// upstream does.
pub(crate) async fn add_owed(
    conn: &RedisConnection,
    keys: &QueueKeys,
    owed: Owed<'_>,
    script: &LuaScript,
    script_keys: &[String],
    args_for: impl FnOnce(u64) -> Vec<Vec<u8>>,
) -> Result<Option<redis::Value>, Error> {
    let Some(client) = conn.try_client() else {
        return Ok(None);
    };
    // Most upserts find their pending run in the future: asked on the shared
    // connection, they open no other.
    let pending: Option<f64> = conn
        .cmd(
            redis::cmd("ZSCORE")
                .arg(keys.repeat())
                .arg(owed.scheduler_id),
        )
        .await?;
    if pending.is_none_or(|at| at as u64 > owed.now) {
        return Ok(None);
    }
    // A connection of its own: a watch holds for the connection that set it.
    let mut own = client.get_multiplexed_async_connection().await?;
    redis::cmd("WATCH")
        .arg(keys.repeat())
        .query_async::<()>(&mut own)
        .await?;
    let Some(millis) = owed_millis(&mut own, keys, &owed).await? else {
        return Ok(None);
    };
    let args = args_for(millis);
    let eval = script_command("EVAL", &script.content, script.num_keys, script_keys, &args);
    let mut transaction = redis::pipe();
    transaction.atomic().add_command(eval);
    // `None`: the watched set changed, and the transaction did not run.
    let reply: Option<(redis::Value,)> = transaction.query_async(&mut own).await?;
    Ok(reply
        .map(|(reply,)| reply)
        .filter(|reply| !taken_meanwhile(reply)))
}

/// The millis of the run the scheduler owes, read on the watching connection.
async fn owed_millis(
    own: &mut MultiplexedConnection,
    keys: &QueueKeys,
    owed: &Owed<'_>,
) -> Result<Option<u64>, Error> {
    let scheduler_key = format!("{}:{}", keys.repeat(), owed.scheduler_id);
    let (pending, stored): (Option<f64>, (Option<String>, Option<String>)) = redis::pipe()
        .zscore(keys.repeat(), owed.scheduler_id)
        .cmd("HMGET")
        .arg(&scheduler_key)
        .arg("pattern")
        .arg("tz")
        .query_async(own)
        .await?;
    let Some(pending) = pending
        .map(|score| score as u64)
        .filter(|at| *at <= owed.now)
    else {
        return Ok(None);
    };
    if stored.0.as_deref() != Some(owed.pattern) || stored.1.as_deref() != owed.tz {
        return Ok(None);
    }
    let job_key = format!(
        "{}repeat:{}:{pending}",
        keys.key_prefix(),
        owed.scheduler_id
    );
    let exists: bool = redis::cmd("EXISTS").arg(&job_key).query_async(own).await?;
    Ok(exists.then_some(pending))
}

/// Whether the script refused the owed run's id because its job is taken (a worker
/// took it before making the next run).
fn taken_meanwhile(reply: &redis::Value) -> bool {
    matches!(reply, redis::Value::Int(code) if *code == error_code::SCHEDULER_JOB_ID_COLLISION)
}
