//! Batches in the worker (change 36): the take of a batch, its run and its finish. A
//! child module of `worker.rs` (declared there in one line), so that a batch's job
//! goes through the worker's own steps wherever it leaves the plain path: a failure,
//! a retry, a scheduler's next run, a flow's child are finished by the same code as a
//! single job's.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::{error, warn};

use super::{
    finished_error, pack_move_to_active_opts, write_keep_jobs, ActiveJob, ConcurrencySlotGuard,
    FetchResult, LoopContext, Worker, WorkerEvent,
};
use crate::error::Error;
use crate::ext::batch::BatchOptions;
use crate::job::{Job, ScriptContext};
use crate::options::JobOptions;
use crate::redis_connection::BlockingRedisConnection;
use crate::worker::CancellationToken;

/// A job a batch took, and whether its completion can be the batch's
/// (`batchFinish`): no parent, no deduplication id. Known from its hash as taken; a job
/// read back after a lost answer is finished the single job's way.
pub(super) struct TakenJob {
    job: Job,
    plain: bool,
}

impl TakenJob {
    /// A job found again by its token after a lost answer: its hash was not read by
    /// the take, so it is finished the single job's way.
    pub(super) fn resumed(job: Job) -> Self {
        TakenJob { job, plain: false }
    }
}

/// A batch's take: up to `size` jobs now and, when that is fewer, what arrives
/// within `wait_ms` after the first. Answers as a single take does when it found
/// nothing (rate limited, a delayed job's time, empty).
pub(super) async fn take(
    ctx: &LoopContext,
    batch: &BatchOptions,
    blocking: &BlockingRedisConnection,
    token: &str,
) -> Result<FetchResult, Error> {
    let mut jobs = match take_once(ctx, batch.size, 0, token).await? {
        Taken::Jobs(jobs) => jobs,
        Taken::Nothing(other) => return Ok(other),
    };
    if batch.wait_ms > 0 && jobs.len() < batch.size {
        let mut ids: HashSet<String> = jobs.iter().map(|t| t.job.id().to_owned()).collect();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(batch.wait_ms);
        while jobs.len() < batch.size
            && !ctx.closing.load(Ordering::Relaxed)
            && !ctx.paused.load(Ordering::Relaxed)
        {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            // A job added wakes the wait (its add writes the marker).
            Worker::wait_for_marker(blocking, ctx, left.as_millis() as u64).await;
            match take_once(ctx, batch.size - jobs.len(), 0, token).await {
                // Each job once, should a take find one again (it cannot while the
                // wait is shorter than the lock, which the options require).
                Ok(Taken::Jobs(more)) => jobs.extend(
                    more.into_iter()
                        .filter(|t| ids.insert(t.job.id().to_owned())),
                ),
                Ok(Taken::Nothing(FetchResult::RateLimited(_))) => break,
                Ok(Taken::Nothing(_)) => {}
                Err(e) => {
                    // A take whose answer was lost may have locked jobs under the
                    // batch's token: found, they join the batch.
                    warn!(error = %e, "a batch's further take failed; the batch runs with the jobs it has");
                    jobs.extend(locked_by_batch(ctx, token, &mut ids).await);
                    break;
                }
            }
        }
    }
    Ok(FetchResult::Batch(jobs))
}

/// The jobs locked under `token` that are not among `ids` (added to it), read back;
/// none when Redis cannot say (stalled-job recovery runs them then).
async fn locked_by_batch(
    ctx: &LoopContext,
    token: &str,
    ids: &mut HashSet<String>,
) -> Vec<TakenJob> {
    match crate::ext::locks::jobs_locked_by(&ctx.conn, &ctx.keys, &[token.to_owned()]).await {
        Ok(found) => read_locked(ctx, found, ids).await,
        Err(e) => {
            warn!(error = %e, "cannot look for the jobs a lost take locked; stalled-job recovery will run them");
            Vec::new()
        }
    }
}

/// The jobs of `found` (ids and tokens) that are not among `ids` (added to it), read
/// back to run.
async fn read_locked(
    ctx: &LoopContext,
    found: Vec<(String, String)>,
    ids: &mut HashSet<String>,
) -> Vec<TakenJob> {
    let mut jobs = Vec::new();
    for (job_id, _) in found {
        if !ids.insert(job_id.clone()) {
            continue;
        }
        match Job::from_id(&ctx.conn, &ctx.keys, &job_id).await {
            Ok(Some(job)) => jobs.push(TakenJob::resumed(job)),
            Ok(None) => {}
            Err(e) => {
                warn!(job_id = %job_id, error = %e, "cannot read a job a lost take locked; stalled-job recovery will run it")
            }
        }
    }
    jobs
}

/// The jobs of fetches whose answer was lost (`Worker::resume_unanswered_fetches`),
/// found by their tokens: each token's jobs run as the batch its take made.
pub(super) async fn resume(ctx: &Arc<LoopContext>, found: Vec<(String, String)>) {
    let mut by_token: std::collections::BTreeMap<String, Vec<TakenJob>> = Default::default();
    for (job_id, token) in found {
        match Job::from_id(&ctx.conn, &ctx.keys, &job_id).await {
            Ok(Some(job)) => by_token
                .entry(token)
                .or_default()
                .push(TakenJob::resumed(job)),
            Ok(None) => {}
            Err(e) => {
                warn!(job_id = %job_id, error = %e, "cannot read a job taken by a fetch whose answer was lost; stalled-job recovery will run it")
            }
        }
    }
    for (token, jobs) in by_token {
        if !Worker::acquire_concurrency_slot(ctx).await {
            break;
        }
        let slot = ConcurrencySlotGuard::new(ctx.clone());
        tracing::info!(
            jobs = jobs.len(),
            "a batch's take whose answer was lost had taken these jobs; running them"
        );
        spawn(ctx, slot, jobs, token);
    }
}

enum Taken {
    Jobs(Vec<TakenJob>),
    Nothing(FetchResult),
}

/// One `batchTake` of up to `size` jobs, none unless there are at least `least` (0: any).
async fn take_once(
    ctx: &LoopContext,
    size: usize,
    least: usize,
    token: &str,
) -> Result<Taken, Error> {
    let script = crate::ext::registered::script(&ctx.conn, "batchTake")?;
    let opts = pack_move_to_active_opts(token, &ctx.opts);
    let now = now_ms().to_string();
    let (size, least) = (size.to_string(), least.to_string());
    let args: [&[u8]; 5] = [
        &ctx.prefix_bytes,
        now.as_bytes(),
        &opts,
        size.as_bytes(),
        least.as_bytes(),
    ];
    let mut conn = ctx.conn.connection();
    let reply = script
        .execute(&mut conn, &ctx.move_to_active_keys, &args)
        .await?;
    parse_take(&reply)
}

/// `batchTake`'s reply: `{ids, packed hashes, 0, 0}`, or moveToActive's `{0, 0, ttl, next}`.
fn parse_take(reply: &redis::Value) -> Result<Taken, Error> {
    let redis::Value::Array(parts) = reply else {
        return Ok(Taken::Nothing(FetchResult::Empty));
    };
    if let (Some(redis::Value::Array(ids)), Some(redis::Value::BulkString(packed))) =
        (parts.first(), parts.get(1))
    {
        let hashes = unpack_hashes(packed)?;
        let mut jobs = Vec::with_capacity(ids.len());
        for (id, fields) in ids.iter().zip(hashes) {
            let redis::Value::BulkString(id) = id else {
                continue;
            };
            let pairs: Vec<(&str, Cow<'_, str>)> = fields
                .chunks_exact(2)
                .filter_map(|pair| {
                    let name = std::str::from_utf8(pair[0]).ok()?;
                    Some((name, String::from_utf8_lossy(pair[1])))
                })
                .collect();
            let field = |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, value)| value.as_ref())
            };
            let plain = ["parentKey", "parent", "deid"]
                .iter()
                .all(|name| field(name).is_none());
            jobs.push(TakenJob {
                job: Job::from_fields(&String::from_utf8_lossy(id), field)?,
                plain,
            });
        }
        return Ok(Taken::Jobs(jobs));
    }
    let number = |at: usize| Worker::extract_element_as_u64(parts, at);
    Ok(Taken::Nothing(match (number(2), number(3)) {
        (ttl, _) if ttl > 0 => FetchResult::RateLimited(ttl),
        (_, next) if next > 0 => FetchResult::NextTimestamp(next),
        _ => FetchResult::Empty,
    }))
}

/// Runs the batch in a task of its own, which holds the batch's concurrency slot and,
/// as long as a full batch is waiting when one ends, runs that one next.
pub(super) fn spawn(
    ctx: &Arc<LoopContext>,
    slot: ConcurrencySlotGuard,
    jobs: Vec<TakenJob>,
    token: String,
) {
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let _slot = slot;
        let mut next = Some((jobs, token));
        while let Some((jobs, token)) = next.take() {
            run(&ctx, jobs, &token).await;
            next = take_full(&ctx).await;
        }
    });
}

/// The next batch for a task whose batch just ended, as a single job's finish takes
/// the next job: only a full one, which needs no wait. The batches at once then take
/// side by side instead of one after another through the driver, whose takes of a
/// batch that is not full wait for it to fill. `None`: the slot goes back to the
/// driver (also when the worker closes, pauses or was given a lower concurrency).
async fn take_full(ctx: &LoopContext) -> Option<(Vec<TakenJob>, String)> {
    let batch = ctx.opts.batch.as_ref()?;
    if !Worker::should_fetch_next(ctx) {
        return None;
    }
    let token = ctx.next_token();
    let error = match take_once(ctx, batch.size, batch.size, &token).await {
        Ok(Taken::Jobs(jobs)) if !jobs.is_empty() => return Some((jobs, token)),
        Ok(_) => return None,
        Err(e) => e,
    };
    ctx.outage
        .failed(ctx.keys.name(), "failed to take the next batch", &error);
    let _ = ctx.event_tx.send(WorkerEvent::Error(error.to_string()));
    // Its answer lost, the take may have locked jobs under the token: they are this
    // task's to run, looked for until Redis answers (the slot held meanwhile, as the
    // driver keeps the token of a fetch whose answer was lost).
    loop {
        match crate::ext::locks::jobs_locked_by(&ctx.conn, &ctx.keys, std::slice::from_ref(&token))
            .await
        {
            Ok(found) => {
                let jobs = read_locked(ctx, found, &mut HashSet::new()).await;
                return (!jobs.is_empty()).then_some((jobs, token));
            }
            Err(_) if !ctx.closing.load(Ordering::Relaxed) => {
                tokio::time::sleep(Duration::from_millis(ctx.opts.run_retry_delay)).await;
            }
            Err(e) => {
                warn!(error = %e, "closing: the jobs a lost take may have locked are left to stalled-job recovery");
                return None;
            }
        }
    }
}

/// What the finish of one job needs, kept before the job goes to the processor.
struct Kept {
    id: String,
    attempts: u32,
    attempts_made: u32,
    opts: JobOptions,
    data: serde_json::Value,
    previous_stacktrace: String,
    discarded: Arc<AtomicBool>,
    plain: bool,
}

impl Kept {
    /// Ends this job's attempt as a single job's ends (`finish_attempt`): a failure, a
    /// retry, a completion that is not plain.
    async fn finish_alone(
        &self,
        ctx: &LoopContext,
        token: &str,
        outcome: Result<serde_json::Value, Error>,
    ) {
        Worker::finish_attempt(
            ctx,
            outcome,
            &self.id,
            token,
            self.attempts,
            self.attempts_made,
            &self.opts,
            &self.data,
            &self.previous_stacktrace,
            &self.discarded,
            false,
        )
        .await;
    }
}

async fn run(ctx: &LoopContext, jobs: Vec<TakenJob>, token: &str) {
    let Some(batch) = ctx.opts.batch.as_ref() else {
        return;
    };
    let ids: HashSet<String> = jobs.iter().map(|t| t.job.id().to_owned()).collect();
    let mut kept = Vec::with_capacity(jobs.len());
    let mut handed = Vec::with_capacity(jobs.len());
    for TakenJob { mut job, plain } in jobs {
        let cancel = CancellationToken::new();
        let id = job.id().to_owned();
        let keep = Kept {
            attempts: job.opts().attempts.unwrap_or(0),
            attempts_made: job.attempts_made(),
            opts: job.opts().clone(),
            data: job.data().clone(),
            previous_stacktrace: job.stacktrace().to_owned(),
            discarded: job.discarded_handle(),
            plain,
            id: id.clone(),
        };
        let repeat_job_key = job.repeat_job_key().map(str::to_owned);
        job.set_context(ScriptContext {
            conn: ctx.conn.clone(),
            keys: ctx.keys.clone(),
            progress_tx: ctx.progress_tx.clone(),
            token: token.to_owned(),
            lock_duration: ctx.opts.lock_duration,
        });
        ctx.active_jobs.write().await.push(ActiveJob {
            job_id: id.clone(),
            token: token.to_owned(),
            cancel_token: cancel.clone(),
        });
        let _ = ctx
            .event_tx
            .send(WorkerEvent::Active { job_id: id.clone() });
        // As a single job's run: a scheduler's next run is made as this one starts,
        // and a job that must fail before it runs fails alone.
        if let Some(scheduler_id) = &repeat_job_key {
            Worker::schedule_next_run(ctx, scheduler_id, &id, &keep.data, &keep.opts).await;
        }
        if let Some(reason) = Worker::unrecoverable_before_run(ctx, &job) {
            keep.finish_alone(ctx, token, Err(Error::Unrecoverable(reason)))
                .await;
            continue;
        }
        kept.push(keep);
        handed.push((job, cancel));
    }
    if !handed.is_empty() {
        let mut outcomes = (batch.processor)(handed).await.into_iter();
        let mut completed = Vec::new();
        let mut singles = Vec::new();
        for keep in kept {
            let outcome = outcomes.next().unwrap_or_else(|| {
                Err(Error::ProcessingError(
                    "the batch processor returned no outcome for this job".to_owned(),
                ))
            });
            match outcome {
                Ok(value) if keep.plain => completed.push((keep, value)),
                outcome => singles.push((keep, outcome)),
            }
        }
        let single_finishes = singles
            .into_iter()
            .map(|(keep, outcome)| async move { keep.finish_alone(ctx, token, outcome).await });
        futures::join!(
            finish_completed(ctx, token, completed),
            futures::future::join_all(single_finishes)
        );
    }
    ctx.active_jobs
        .write()
        .await
        .retain(|j| !(j.token == token && ids.contains(&j.job_id)));
}

/// Completes the batch's plain completions, one `batchFinish` per retention among
/// them (the worker's, or a job's own).
async fn finish_completed(
    ctx: &LoopContext,
    token: &str,
    completed: Vec<(Kept, serde_json::Value)>,
) {
    let mut by_retention: std::collections::BTreeMap<Vec<u8>, Vec<(Kept, serde_json::Value)>> =
        Default::default();
    for (keep, value) in completed {
        let retention = pack_finish_opts(ctx, keep.opts.remove_on_complete.as_ref());
        by_retention
            .entry(retention)
            .or_default()
            .push((keep, value));
    }
    for (opts, completed) in by_retention {
        finish_completed_with(ctx, token, &opts, completed).await;
    }
}

/// Completes `completed` in one `batchFinish` with `opts`, sent again while Redis does
/// not answer; a job the script left where it was is handled as a single job's refused
/// completion is.
async fn finish_completed_with(
    ctx: &LoopContext,
    token: &str,
    opts: &[u8],
    completed: Vec<(Kept, serde_json::Value)>,
) {
    if completed.is_empty() {
        return;
    }
    let values: Vec<String> = completed
        .iter()
        .map(|(_, value)| serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned()))
        .collect();
    let made: Vec<String> = completed
        .iter()
        .map(|(keep, _)| (keep.attempts_made + 1).to_string())
        .collect();
    let first = completed[0].0.id.clone();
    let retry = Worker::finishing_retry(ctx, &first, "a batch's completion");
    let (result, retried) = retry
        .run(|| send_finish(ctx, token, opts, &completed, &values, &made))
        .await;
    let codes = match result {
        Ok(codes) => codes,
        Err(e) => {
            error!(error = %e, jobs = completed.len(), "a batch's completion failed; its jobs are recovered as stalled once their locks expire");
            let _ = ctx.event_tx.send(WorkerEvent::Error(e.to_string()));
            return;
        }
    };
    for ((keep, value), code) in completed.into_iter().zip(codes) {
        let done = code == 0
            || (retried
                && code == -2
                && crate::ext::finishing::finished_earlier(
                    &ctx.conn,
                    &ctx.keys,
                    &keep.id,
                    &ctx.completed_key,
                )
                .await);
        if done {
            let _ = ctx.event_tx.send(WorkerEvent::Completed {
                job_id: keep.id,
                result: value,
            });
            continue;
        }
        Worker::handle_job_failed(
            ctx,
            &keep.id,
            token,
            finished_error(code, &keep.id, "moveToFinished", "active"),
            keep.attempts,
            keep.attempts_made,
            &keep.opts,
            &keep.data,
            &keep.previous_stacktrace,
            false,
        )
        .await;
    }
}

/// The jobs' hashes `batchTake` packed with `cmsgpack.pack`: an array of one array per
/// job, its field names and values one after the other, each a string.
fn unpack_hashes(mut packed: &[u8]) -> Result<Vec<Vec<&[u8]>>, Error> {
    let broken = |what: String| Error::Script {
        code: 0,
        message: format!("batchTake's packed jobs: {what}"),
    };
    let jobs = rmp::decode::read_array_len(&mut packed).map_err(|e| broken(e.to_string()))?;
    // Capacities bounded by the bytes there are: a header cannot ask for more.
    let mut hashes = Vec::with_capacity((jobs as usize).min(packed.len()));
    for _ in 0..jobs {
        let fields = rmp::decode::read_array_len(&mut packed).map_err(|e| broken(e.to_string()))?;
        let mut hash = Vec::with_capacity((fields as usize).min(packed.len()));
        for _ in 0..fields {
            let len =
                rmp::decode::read_str_len(&mut packed).map_err(|e| broken(e.to_string()))? as usize;
            if len > packed.len() {
                return Err(broken(format!(
                    "a string of {len} bytes, {} left",
                    packed.len()
                )));
            }
            let (text, rest) = packed.split_at(len);
            hash.push(text);
            packed = rest;
        }
        hashes.push(hash);
    }
    Ok(hashes)
}

async fn send_finish(
    ctx: &LoopContext,
    token: &str,
    opts: &[u8],
    completed: &[(Kept, serde_json::Value)],
    values: &[String],
    made: &[String],
) -> Result<Vec<i64>, Error> {
    let script = crate::ext::registered::script(&ctx.conn, "batchFinish")?;
    let now = now_ms().to_string();
    let keys = [
        ctx.keys.active(),
        ctx.keys.events(),
        ctx.keys.stalled(),
        ctx.completed_key.clone(),
        ctx.keys.meta(),
        ctx.metrics_completed_key.clone(),
        ctx.keys.wait(),
        ctx.keys.prioritized(),
    ];
    let mut args: Vec<&[u8]> = Vec::with_capacity(4 + completed.len() * 3);
    args.extend([
        ctx.prefix_bytes.as_slice(),
        now.as_bytes(),
        token.as_bytes(),
        opts,
    ]);
    for (((keep, _), value), made) in completed.iter().zip(values).zip(made) {
        args.extend([keep.id.as_bytes(), value.as_bytes(), made.as_bytes()]);
    }
    let mut conn = ctx.conn.connection();
    let reply = script.execute(&mut conn, &keys, &args).await?;
    match reply {
        redis::Value::Array(codes) => Ok(codes
            .iter()
            .map(|code| match code {
                redis::Value::Int(code) => *code,
                _ => -1,
            })
            .collect()),
        other => Err(Error::Script {
            code: 0,
            message: format!("batchFinish answered {other:?}, not one code per job"),
        }),
    }
}

/// `{ keepJobs, maxMetricsSize }` as `moveToFinished`'s opts carry them: the job's own
/// retention, else the worker's.
fn pack_finish_opts(ctx: &LoopContext, own: Option<&crate::types::RemoveOnFinish>) -> Vec<u8> {
    use rmp::encode::{write_map_len, write_str};
    let mut buf = Vec::with_capacity(64);
    // Writing to a Vec cannot fail.
    let _ = write_map_len(&mut buf, 2);
    let _ = write_str(&mut buf, "keepJobs");
    write_keep_jobs(&mut buf, own.or(ctx.opts.remove_on_complete.as_ref()));
    let _ = write_str(&mut buf, "maxMetricsSize");
    let metrics = ctx
        .opts
        .metrics
        .as_ref()
        .map(|m| m.max_data_points.to_string())
        .unwrap_or_default();
    let _ = write_str(&mut buf, &metrics);
    buf
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::unpack_hashes;

    /// Packs `jobs` as `cmsgpack.pack` does a Lua array of arrays of strings.
    fn packed(jobs: &[&[&str]]) -> Vec<u8> {
        let mut buf = Vec::new();
        rmp::encode::write_array_len(&mut buf, jobs.len() as u32).unwrap();
        for fields in jobs {
            rmp::encode::write_array_len(&mut buf, fields.len() as u32).unwrap();
            for field in *fields {
                rmp::encode::write_str(&mut buf, field).unwrap();
            }
        }
        buf
    }

    #[test]
    fn a_takes_packed_hashes_are_read_back_field_by_field() {
        let long = "x".repeat(300);
        let bytes = packed(&[&["name", "email", "data", &long], &["name", ""]]);
        let hashes = unpack_hashes(&bytes).unwrap();
        let texts: Vec<Vec<&str>> = hashes
            .iter()
            .map(|h| h.iter().map(|f| std::str::from_utf8(f).unwrap()).collect())
            .collect();
        assert_eq!(
            texts,
            vec![
                vec!["name", "email", "data", long.as_str()],
                vec!["name", ""]
            ]
        );
    }

    #[test]
    fn a_cut_pack_is_an_error_not_a_panic() {
        let bytes = packed(&[&["name", "email", "data", "{\"to\":\"a@b.c\"}"]]);
        for cut in 0..bytes.len() {
            assert!(unpack_hashes(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        // A header that claims four billion jobs, with nothing behind it.
        assert!(unpack_hashes(&[0xdd, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(unpack_hashes(&[0x91, 0xdd, 0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
