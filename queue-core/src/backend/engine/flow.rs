//! Adding a flow through the engine's flow producer: our checked jobs as its
//! `FlowJob` tree, each child's failure policy as BullMQ's option for it.
//!
//! A flow whose jobs all have ids of the engine's making is written at once: none of
//! them can exist. One that names ids of the caller's is written in an optimistic
//! transaction: `WATCH` those jobs, read them, judge them (`crate::flow::claims`), and
//! write the flow in `MULTI` .. `EXEC`, which Redis aborts if one of them changed
//! meanwhile; then the reads start again. So what the answer says of each job (new, or
//! an existing one in its state) is what the write did, and a flow that cannot be
//! written as asked leaves nothing behind: BullMQ's scripts, run in a plain `MULTI`,
//! would write the root and then refuse a child (a child of another parent), or hang
//! the parent on a child that failed long ago.

use std::collections::HashMap;

use super::connection::Connection;
use super::convert::{engine_error, options_to_engine};
use super::flow_gate::CONTINUES_PAST_FAILURES;
use super::queue::EngineQueue;
use super::watch::{redis_error, Watched};
use crate::clock::now_ms;
use crate::error::flow::FlowError;
use crate::error::Error;
use crate::job::flow::{judge, AddedIds, Claim, FlowWrite, Found, OnChildFailure, PreparedJob};
use crate::job::{ChildKey, JobState};

/// How many times the checks and the write are tried when the jobs they read keep
/// changing, before the add is refused as contended.
const MAX_TRIES: u32 = 10;

/// Adds `root` and its descendants atomically, as the module says. `claims` are the
/// jobs of the tree with ids of the caller's (`crate::flow::claims`).
pub(crate) async fn add_flow(
    conn: &Connection,
    root: &PreparedJob,
    claims: &[Claim<'_>],
) -> Result<FlowWrite, Error> {
    let producer = conn.flow_producer()?;
    let tree = to_engine(root, now_ms());
    if claims.is_empty() {
        let node = Box::pin(producer.add(tree)).await.map_err(engine_error)?;
        return Ok(FlowWrite::Added(ids(&node, "root", &HashMap::new())));
    }
    let transaction = producer
        .transaction_with_opts(tree, &bullmq::FlowOptions::default())
        .map_err(engine_error)?;
    let keys: Vec<String> = claims
        .iter()
        .map(|c| format!("{}:{}", conn.queue_base(c.queue), c.id))
        .collect();
    for attempt in 1..=MAX_TRIES {
        let mut watched = conn.watch(&keys).await?;
        transaction
            .load_scripts(watched.conn())
            .await
            .map_err(engine_error)?;
        let existing = match check(conn, claims, &keys, &mut watched).await? {
            Checked::Write(existing) => existing,
            Checked::RootExists => {
                watched.unwatch().await?;
                return Ok(FlowWrite::RootExists);
            }
            Checked::Refused(refusal) => {
                watched.unwatch().await?;
                return Err(refusal.into());
            }
            Checked::Changed => {
                watched.unwatch().await?;
                continue;
            }
        };
        let replies: Option<Vec<redis::Value>> = transaction
            .pipeline()
            .query_async(watched.conn())
            .await
            .map_err(redis_error)?;
        watched.release();
        match replies {
            Some(replies) => {
                let node = transaction.finish(&replies).map_err(engine_error)?;
                return Ok(FlowWrite::Added(ids(&node, "root", &existing)));
            }
            None => {
                tracing::debug!(
                    attempt,
                    "a job the flow names changed before the write; checking again"
                )
            }
        }
    }
    Err(FlowError::Contended { tries: MAX_TRIES }.into())
}

/// What the reads under the watch found.
enum Checked {
    /// Write the flow; the existing jobs it takes in, by place, with their states.
    Write(HashMap<String, JobState>),
    /// The root exists: nothing is written.
    RootExists,
    /// A job cannot be taken in: nothing is written.
    Refused(FlowError),
    /// A job vanished between two reads: read again.
    Changed,
}

/// Reads each claimed job, under the watch on `keys` (one per claim): whether it
/// exists, its state and whether a live parent waits for it; a parent it names is
/// watched too (re-created meanwhile, it would make BullMQ refuse the child mid-write).
async fn check(
    conn: &Connection,
    claims: &[Claim<'_>],
    keys: &[String],
    watched: &mut Watched,
) -> Result<Checked, Error> {
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.cmd("EXISTS").arg(key);
        pipe.cmd("HGET").arg(key).arg("parentKey");
    }
    let found: Vec<(bool, Option<String>)> = {
        let flat: Vec<redis::Value> = pipe
            .query_async(watched.conn())
            .await
            .map_err(redis_error)?;
        let mut flat = flat.into_iter();
        let mut found = Vec::with_capacity(keys.len());
        while let (Some(exists), Some(parent)) = (flat.next(), flat.next()) {
            found.push((
                redis::from_redis_value(exists).map_err(|e| Error::Redis(Box::new(e)))?,
                redis::from_redis_value(parent).map_err(|e| Error::Redis(Box::new(e)))?,
            ));
        }
        found
    };
    if claims
        .iter()
        .zip(&found)
        .any(|(claim, (exists, _))| claim.is_root && *exists)
    {
        return Ok(Checked::RootExists);
    }
    let taken: Vec<(&Claim<'_>, Option<&String>)> = claims
        .iter()
        .zip(&found)
        .filter(|(_, (exists, _))| *exists)
        .map(|(claim, (_, parent))| (claim, parent.as_ref().filter(|p| !p.is_empty())))
        .collect();
    if taken.is_empty() {
        return Ok(Checked::Write(HashMap::new()));
    }
    let parents: Vec<&String> = taken.iter().filter_map(|(_, parent)| *parent).collect();
    let live: Vec<bool> = if parents.is_empty() {
        Vec::new()
    } else {
        redis::cmd("WATCH")
            .arg(&parents)
            .query_async::<()>(watched.conn())
            .await
            .map_err(redis_error)?;
        let mut pipe = redis::pipe();
        for parent in &parents {
            pipe.cmd("EXISTS").arg(*parent);
        }
        pipe.query_async(watched.conn())
            .await
            .map_err(redis_error)?
    };
    let live: HashMap<&String, bool> = parents.into_iter().zip(live).collect();
    let mut existing = HashMap::new();
    for (claim, parent) in taken {
        let Some(state) = EngineQueue::open(conn, claim.queue)
            .await?
            .get_job_state(claim.id)
            .await?
        else {
            return Ok(Checked::Changed);
        };
        let live_parent = parent
            .filter(|p| live.get(p).copied().unwrap_or(false))
            .map(|p| ChildKey::from_redis_key(p).to_string());
        match judge(claim, &Found { state, live_parent }) {
            Ok(state) => {
                existing.insert(claim.path.clone(), state);
            }
            Err(refusal) => return Ok(Checked::Refused(refusal)),
        }
    }
    Ok(Checked::Write(existing))
}

fn to_engine(job: &PreparedJob, timestamp: u64) -> bullmq::FlowJob {
    let mut opts = options_to_engine(&job.options, timestamp);
    match job.on_failure {
        None => {}
        Some(OnChildFailure::FailParent) => opts.fail_parent_on_failure = Some(true),
        Some(OnChildFailure::ContinueParent) => opts.continue_parent_on_failure = Some(true),
        Some(OnChildFailure::IgnoreDependency) => opts.ignore_dependency_on_failure = Some(true),
        Some(OnChildFailure::RemoveDependency) => opts.remove_dependency_on_failure = Some(true),
    }
    // A child's failure may release this parent while its other children run: the
    // worker that takes it checks them first, whatever its handler (`flow_gate`).
    if job
        .children
        .iter()
        .any(|c| c.on_failure == Some(OnChildFailure::ContinueParent))
    {
        opts.extensions
            .insert(CONTINUES_PAST_FAILURES.to_owned(), true.into());
    }
    bullmq::FlowJob {
        name: job.name.clone(),
        queue_name: job.queue.clone(),
        data: job.data.clone(),
        opts: Some(opts),
        prefix: None,
        children: (!job.children.is_empty()).then(|| {
            job.children
                .iter()
                .map(|c| to_engine(c, timestamp))
                .collect()
        }),
    }
}

/// The ids of the written tree, each job with the state it was found in when it
/// existed already (by its place in the tree).
fn ids(node: &bullmq::JobNode, path: &str, existing: &HashMap<String, JobState>) -> AddedIds {
    AddedIds {
        id: node.job.id().to_owned(),
        existing: existing.get(path).copied(),
        children: node
            .children
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, child)| ids(child, &format!("{path}.{i}"), existing))
            .collect(),
    }
}
