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
//! new template. The worker that runs it computes the next run from the time it ends,
//! so however many runs were missed, one is made up.

use crate::error::{error_code, Error};
use crate::keys::QueueKeys;
use crate::redis_connection::RedisConnection;

/// The millis of the run `scheduler_id` owes, if it owes one: its pending run's time has
/// passed (`<= now`), that run's job is still there (not taken, finished or removed),
/// and the pattern and time zone are the ones being upserted (a changed schedule starts
/// afresh).
pub(crate) async fn owed_run(
    conn: &RedisConnection,
    keys: &QueueKeys,
    scheduler_id: &str,
    pattern: &str,
    tz: Option<&str>,
    now: u64,
) -> Result<Option<u64>, Error> {
    let mut redis_conn = conn.connection();
    let scheduler_key = format!("{}:{scheduler_id}", keys.repeat());
    let (pending, stored): (Option<f64>, (Option<String>, Option<String>)) = redis::pipe()
        .zscore(keys.repeat(), scheduler_id)
        .cmd("HMGET")
        .arg(&scheduler_key)
        .arg("pattern")
        .arg("tz")
        .query_async(&mut redis_conn)
        .await?;
    let Some(pending) = pending.map(|score| score as u64).filter(|at| *at <= now) else {
        return Ok(None);
    };
    if stored.0.as_deref() != Some(pattern) || stored.1.as_deref() != tz {
        return Ok(None);
    }
    let job_key = format!("{}repeat:{scheduler_id}:{pending}", keys.key_prefix());
    let exists: bool = redis::cmd("EXISTS")
        .arg(&job_key)
        .query_async(&mut redis_conn)
        .await?;
    Ok(exists.then_some(pending))
}

/// Whether the script refused the owed run's millis because its job is taken now (a
/// worker took it between [`owed_run`]'s read and the script): the upsert then goes on
/// with the next time, as it would have, and the worker's run is the one owed.
pub(crate) fn taken_meanwhile(error: &Error) -> bool {
    matches!(error, Error::Script { code, .. } if *code == error_code::SCHEDULER_JOB_ID_COLLISION)
}
