//! Reading jobs, states and counts.

use super::EngineQueue;
use crate::backend::engine::convert::{counts_from_engine, job_info, state_range_name};
use crate::error::Error;
use crate::job::{JobCounts, JobInfo, JobState};

/// The sorted sets whose membership is a state, in the order they are asked.
const STATE_SETS: [(&str, JobState); 5] = [
    ("completed", JobState::Completed),
    ("failed", JobState::Failed),
    ("delayed", JobState::Delayed),
    ("prioritized", JobState::Prioritized),
    ("waiting-children", JobState::WaitingChildren),
];

impl EngineQueue {
    /// The job's state from its own keys, in one round trip of O(1) and O(log n)
    /// commands, whatever the backlog. (The engine's `getState` script copies the
    /// whole wait and active lists: 125-228 ms of Redis time per call with 500,000
    /// waiting jobs.) A job in the active list whose lock has expired reads as waiting:
    /// it is about to be recovered as stalled.
    pub(crate) async fn get_job_state(&self, id: &str) -> Result<Option<JobState>, Error> {
        let mut pipe = redis::pipe();
        self.state_commands(&mut pipe, id);
        let replies: Vec<redis::Value> = self.conn.pipeline(&pipe).await?;
        Self::state_of(replies.into_iter())
    }

    /// The job with its state, read together (`MULTI` .. `EXEC`, all keys in the
    /// queue's slot): a status never pairs a state with fields of another moment
    /// (`completed` with no return value, read while the job finished between two reads).
    pub(crate) async fn get_job(&self, id: &str) -> Result<Option<JobInfo>, Error> {
        let mut pipe = redis::pipe();
        // Each reply as it came, errors included: a key beside the jobs that is no hash
        // answers HGETALL with WRONGTYPE, and is no job.
        pipe.atomic()
            .ignore_errors()
            .cmd("HGETALL")
            .arg(self.job_key(id));
        self.state_commands(&mut pipe, id);
        let replies: Vec<redis::Value> = self.conn.pipeline(&pipe).await?;
        let mut replies = replies.into_iter();
        let fields: std::collections::HashMap<String, String> = match replies.next() {
            Some(redis::Value::ServerError(e)) if e.code() == "WRONGTYPE" => return Ok(None),
            Some(value) => redis::from_redis_value(value).map_err(|e| Error::Redis(Box::new(e)))?,
            None => return Ok(None),
        };
        if fields.is_empty() {
            return Ok(None);
        }
        let job = bullmq::Job::from_redis_hash(id, &fields).map_err(|e| self.error(e))?;
        let replies: Vec<redis::Value> = replies.collect();
        let mut info = job_info(&job);
        info.runs_at_ms = Self::due_of(&replies);
        info.state = Self::state_of(replies.into_iter())?;
        Ok(Some(info))
    }

    /// The commands that tell a job's state: its score in each sorted set of a state,
    /// whether it is locked (active), whether it exists (waiting).
    pub(super) fn state_commands(&self, pipe: &mut redis::Pipeline, id: &str) {
        let base = self.conn.queue_base(self.name());
        let job = self.job_key(id);
        for (set, _) in STATE_SETS {
            pipe.cmd("ZSCORE").arg(format!("{base}:{set}")).arg(id);
        }
        pipe.cmd("EXISTS").arg(format!("{job}:lock"));
        pipe.cmd("EXISTS").arg(&job);
    }

    /// When the job is due, from its score in the delayed set among the replies of
    /// [`Self::state_commands`]: BullMQ scores a delayed job `due_ms * 4096 + counter`.
    fn due_of(replies: &[redis::Value]) -> Option<u64> {
        let delayed = STATE_SETS
            .iter()
            .position(|(_, state)| *state == JobState::Delayed)?;
        let score: Option<f64> = redis::from_redis_value(replies.get(delayed)?.clone()).ok()?;
        score.map(|score| (score / 4096.0).floor() as u64)
    }

    /// The state from the replies of [`Self::state_commands`].
    pub(super) fn state_of(
        mut replies: impl Iterator<Item = redis::Value>,
    ) -> Result<Option<JobState>, Error> {
        let scores = replies
            .by_ref()
            .take(STATE_SETS.len())
            .map(|v| redis::from_redis_value(v).map_err(|e| Error::Redis(Box::new(e))))
            .collect::<Result<Vec<Option<f64>>, Error>>()?;
        let flag = |v: Option<redis::Value>| -> Result<bool, Error> {
            v.map_or(Ok(false), |v| {
                redis::from_redis_value(v).map_err(|e| Error::Redis(Box::new(e)))
            })
        };
        let (locked, exists) = (flag(replies.next())?, flag(replies.next())?);
        if let Some((_, state)) = STATE_SETS
            .iter()
            .zip(&scores)
            .find_map(|(set, score)| score.map(|_| set))
        {
            return Ok(Some(*state));
        }
        Ok(if locked {
            Some(JobState::Active)
        } else if exists {
            Some(JobState::Waiting)
        } else {
            None
        })
    }

    /// BullMQ's counts, grouped jobs waiting their turn counted as waiting (they wait
    /// in their groups, outside BullMQ's `wait`).
    pub(crate) async fn get_job_counts(&self) -> Result<JobCounts, Error> {
        let (counts, grouped) = tokio::try_join!(
            self.inner.get_job_counts(),
            self.inner.count_grouped_waiting()
        )
        .map_err(|e| self.error(e))?;
        let mut counts = counts_from_engine(&counts);
        counts.waiting += grouped;
        Ok(counts)
    }

    pub(crate) async fn get_jobs(
        &self,
        states: &[JobState],
        start: i64,
        end: i64,
    ) -> Result<Vec<JobInfo>, Error> {
        self.get_jobs_ordered(states, start, end, false).await
    }

    /// Jobs in `states`, newest first, or oldest first with `asc`.
    pub(crate) async fn get_jobs_ordered(
        &self,
        states: &[JobState],
        start: i64,
        end: i64,
        asc: bool,
    ) -> Result<Vec<JobInfo>, Error> {
        // Pending jobs are in the application's outbox, never in Redis.
        let names: Vec<&str> = states
            .iter()
            .filter(|s| **s != JobState::Pending)
            .map(|s| state_range_name(*s))
            .collect();
        if names.is_empty() && !states.is_empty() {
            return Ok(Vec::new());
        }
        let jobs = self
            .inner
            .get_jobs(&names, start, end, asc)
            .await
            .map_err(|e| self.error(e))?;
        // A listing of one state says it of each job.
        let state = match states {
            [one] => Some(*one),
            _ => None,
        };
        Ok(jobs
            .iter()
            .map(|job| JobInfo {
                state,
                ..job_info(job)
            })
            .collect())
    }

    pub(crate) async fn get_job_logs(
        &self,
        id: &str,
        start: isize,
        end: isize,
    ) -> Result<(Vec<String>, usize), Error> {
        self.inner
            .get_job_logs(id, start, end, true)
            .await
            .map_err(|e| self.error(e))
    }
}
