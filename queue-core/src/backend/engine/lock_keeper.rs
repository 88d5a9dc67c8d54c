//! Lock renewal where a blocked handler cannot starve it.
//!
//! A handler that blocks its thread (CPU work, a synchronous client,
//! `std::thread::sleep`) stops every task queued behind it on the app's runtime. The
//! engine renews job locks from such a task, so a job could lose its lock while its
//! handler still runs, be recovered as stalled and run twice: BullMQ's most reported
//! problem. So the engine's renewal is off, and this keeper renews the locks of the
//! running attempts from the engine runtime ([`super::runtime`]), over a connection
//! of its own: all of them in one `extendLocks` call, by job id and lock token,
//! without reading the jobs.
//!
//! A renewal needs slack: one pass that does not reach Redis (a timeout, a failover of
//! a second) must not cost a healthy run its lock. So the keeper renews every quarter
//! of the lock ([`Timing`]), tries a failed pass again soon instead of at the next
//! regular one, and takes back a lock that merely expired while nobody else took the
//! job (`Queue::retake_locks`). Only a lock another run holds, or a job that is no
//! longer active, stops the run: it is cancelled and reported as lost, never as a
//! failure.
//!
//! Handlers themselves stay on the app's runtime with the engine's fetch loop: moving
//! each attempt to another runtime costs two thread wake-ups, which halved throughput
//! at concurrency 1 when measured (`docs/benchmarks/2026-12-02.md`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use bullmq::worker::CancellationToken;
use bullmq::LockRetake;
use tokio::time::Instant;

use super::connection::Connection;
use super::convert::{engine_error, millis};
use super::runtime::{on_engine, spawn_on_engine};
use super::sink::{EngineEvent, EventSink};
use crate::error::Error;
use crate::job::{JobMeta, LockLost};
use crate::slab::{Slab, SlabKey};

/// Told after each pass that renewed the locks of running attempts.
pub(crate) type OnRenewed = Arc<dyn Fn() + Send + Sync>;

/// What the keeper holds for one running attempt: its job (for the id) and lock token,
/// how to stop it if its lock is lost, and the flag that tells its worker so.
#[derive(Clone, Debug)]
struct Attempt {
    job: Arc<JobMeta>,
    token: String,
    cancel: CancellationToken,
    lost: LockLost,
}

/// The attempts running now, each in a slot of its own: a hold takes a free slot and
/// gives it back, without hashing or copying the job id. Keyed by slot, not by job id:
/// a stale run of a job and a fresh run of it (under another token) hold slots of their
/// own, and the stale one's end leaves the fresh one's hold alone.
type Held = Mutex<Slab<Attempt>>;

/// The running attempts, by (job id, lock token), for one renewal pass.
fn running(held: &Slab<Attempt>) -> Running {
    held.iter()
        .map(|(slot, attempt)| {
            let key = (attempt.job.id.clone(), attempt.token.clone());
            (key, (slot, attempt.clone()))
        })
        .collect()
}

/// (job id, lock token) -> the attempt's slot and the attempt, as a pass sees them.
type Running = HashMap<(String, String), (SlabKey, Attempt)>;

/// Renews the locks of one queue's running attempts.
#[derive(Debug, Clone)]
pub(super) struct LockKeeper {
    held: Arc<Held>,
}

/// Keeps a job's lock renewed until dropped (when the attempt ends, however it ends).
#[derive(Debug)]
pub(super) struct LockHold {
    held: Arc<Held>,
    key: SlabKey,
}

impl LockKeeper {
    /// Starts renewing on the engine runtime ([`Timing`]). It stops by itself once the
    /// keeper and every hold are gone.
    pub(super) async fn start(
        conn: &Connection,
        queue: &str,
        timing: Timing,
        sink: Arc<dyn EventSink>,
        on_renewed: OnRenewed,
    ) -> Result<Self, Error> {
        let held = Arc::new(Held::default());
        let options = conn.queue_options();
        let name = queue.to_owned();
        // Made on the engine runtime, so that its connection is served there.
        let engine_queue = on_engine(queue, async move {
            bullmq::Queue::with_options(&name, options).await
        })
        .await?
        .map_err(engine_error)?;
        let renewer = Renewer {
            queue: engine_queue,
            name: queue.to_owned(),
            held: Arc::downgrade(&held),
            timing,
            sink,
            on_renewed,
        };
        spawn_on_engine(queue, renewer.run())?;
        Ok(LockKeeper { held })
    }

    /// Renews `job`'s lock (held under `token`) until the hold is dropped; if the lock
    /// is lost, `cancel` stops the attempt and `lost` is set.
    pub(super) fn hold(
        &self,
        job: Arc<JobMeta>,
        token: &str,
        cancel: CancellationToken,
        lost: LockLost,
    ) -> LockHold {
        let attempt = Attempt {
            job,
            token: token.to_owned(),
            cancel,
            lost,
        };
        let key = lock(&self.held).insert(attempt);
        LockHold {
            held: self.held.clone(),
            key,
        }
    }
}

impl Drop for LockHold {
    fn drop(&mut self) {
        lock(&self.held).remove(self.key);
    }
}

fn lock(held: &Held) -> std::sync::MutexGuard<'_, Slab<Attempt>> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

/// When locks are renewed, and how long one renewal may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Timing {
    /// How long a lock lasts once set.
    pub(super) lock_duration: Duration,
    /// A regular pass every quarter of the lock: a lock survives two failed passes
    /// and most of a third before it expires.
    pub(super) every: Duration,
    /// A pass that did not reach Redis is tried again this soon (a twentieth of the
    /// lock, 50 ms to 1 s), not a whole `every` later.
    pub(super) retry_after: Duration,
    /// How long one pass may take: the app's command timeout, and at most `every`
    /// (a renewal slower than that is late anyway, and must not hold up the next), but
    /// 100 ms at least (a round trip on a busy host; `lock_duration` is 100 ms at least).
    pub(super) renew_within: Duration,
}

impl Timing {
    pub(super) fn new(lock_duration: Duration, command_timeout: Duration) -> Self {
        let every = lock_duration / 4;
        Timing {
            lock_duration,
            every,
            retry_after: (lock_duration / 20)
                .clamp(Duration::from_millis(50), Duration::from_secs(1)),
            renew_within: command_timeout.min(every.max(Duration::from_millis(100))),
        }
    }
}

/// Splits the running attempts into batches in which each job id appears once: BullMQ's
/// script answers with job ids, so a stale run and a fresh run of one job (two tokens)
/// must not share a batch. Nearly always there is one batch.
fn batches(running: &[(String, String)]) -> Vec<Vec<(&str, &str)>> {
    let mut batches: Vec<Vec<(&str, &str)>> = Vec::new();
    for (job_id, token) in running {
        let free = batches
            .iter_mut()
            .find(|batch| batch.iter().all(|(id, _)| id != job_id));
        match free {
            Some(batch) => batch.push((job_id, token)),
            None => batches.push(vec![(job_id, token)]),
        }
    }
    batches
}

/// The task that renews one queue's locks.
struct Renewer {
    queue: bullmq::Queue,
    name: String,
    held: Weak<Held>,
    timing: Timing,
    sink: Arc<dyn EventSink>,
    on_renewed: OnRenewed,
}

/// How a pass went.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pass {
    /// Redis answered for every lock.
    Answered,
    /// Some renewal did not reach Redis (why): try again soon.
    Unanswered(String),
}

impl Renewer {
    async fn run(self) {
        let mut next = Instant::now() + self.timing.every;
        let mut failing_since: Option<Instant> = None;
        loop {
            tokio::time::sleep_until(next).await;
            let started = Instant::now();
            let Some(now_held) = self.held.upgrade() else {
                break;
            };
            let running = running(&lock(&now_held));
            drop(now_held);
            match self.pass(&running).await {
                Pass::Answered => {
                    if !running.is_empty() {
                        (self.on_renewed)();
                    }
                    if let Some(since) = failing_since.take() {
                        tracing::info!(queue = %self.name, failing_for = ?since.elapsed(), "lock renewals reach Redis again");
                    }
                    next = started + self.timing.every;
                }
                Pass::Unanswered(error) => {
                    // Said once per streak; the retries that follow are quiet.
                    if failing_since.is_none() {
                        tracing::warn!(
                            queue = %self.name, %error, retry_after = ?self.timing.retry_after,
                            "could not renew the locks of running jobs; trying again until Redis answers (a lock that expires meanwhile is taken back if no other worker took its job)"
                        );
                    } else {
                        tracing::debug!(queue = %self.name, %error, "lock renewal still failing");
                    }
                    failing_since.get_or_insert(started);
                    next = Instant::now() + self.timing.retry_after;
                }
            }
        }
    }

    /// Renews every running attempt's lock once; takes back the locks that merely
    /// expired, and stops the attempts whose job is another run's now.
    async fn pass(&self, running: &Running) -> Pass {
        let keys: Vec<(String, String)> = running.keys().cloned().collect();
        let batches = batches(&keys);
        // All batches at once, on the multiplexed connection: a pass costs one round
        // trip and one script call, however many jobs run.
        let results = futures::future::join_all(batches.iter().map(|batch| {
            self.timed(
                self.queue
                    .extend_locks(batch, millis(self.timing.lock_duration)),
            )
        }))
        .await;
        let mut pass = Pass::Answered;
        let mut not_extended: Vec<(String, String)> = Vec::new();
        for (batch, result) in batches.iter().zip(results) {
            match result {
                Ok(failed) => not_extended.extend(
                    batch
                        .iter()
                        .filter(|(id, _)| failed.iter().any(|f| f == id))
                        .map(|(id, token)| ((*id).to_owned(), (*token).to_owned())),
                ),
                Err(e) => pass = Pass::Unanswered(e),
            }
        }
        if !not_extended.is_empty() {
            if let Pass::Unanswered(e) = self.retake(running, &not_extended).await {
                pass = Pass::Unanswered(e);
            }
        }
        pass
    }

    /// The locks `extendLocks` could not extend: taken back when they merely expired,
    /// else their attempts are stopped.
    async fn retake(&self, running: &Running, not_extended: &[(String, String)]) -> Pass {
        let mut pass = Pass::Answered;
        for batch in batches(not_extended) {
            let retaken = self
                .timed(
                    self.queue
                        .retake_locks(&batch, millis(self.timing.lock_duration)),
                )
                .await;
            let outcomes = match retaken {
                Ok(outcomes) => outcomes,
                Err(e) => {
                    pass = Pass::Unanswered(e);
                    continue;
                }
            };
            for ((job_id, token), outcome) in batch.iter().zip(outcomes) {
                let key = ((*job_id).to_owned(), (*token).to_owned());
                match outcome {
                    LockRetake::Retaken => tracing::warn!(
                        queue = %self.name, %job_id,
                        "the job's lock had expired (renewals did not reach Redis in time); nobody had taken the job, so this run took the lock back"
                    ),
                    LockRetake::Taken | LockRetake::Gone => {
                        if let Some((_, attempt)) =
                            running.get(&key).filter(|(slot, _)| self.still_held(*slot))
                        {
                            self.lose(job_id, attempt, outcome);
                        }
                    }
                    _ => {}
                }
            }
        }
        pass
    }

    /// Two runs of one job must not go on side by side unknowingly: this one stops (its
    /// `job.cancelled()` fires), its outcome is dropped, and it says so.
    fn lose(&self, job_id: &str, attempt: &Attempt, outcome: LockRetake) {
        let why = if outcome == LockRetake::Taken {
            "another run holds it"
        } else {
            "the job is no longer active"
        };
        tracing::warn!(queue = %self.name, %job_id, why, "the job's lock was lost; cancelling this run");
        attempt.lost.set();
        attempt.cancel.cancel();
        self.sink.deliver(EngineEvent::LockLost {
            job_id: job_id.to_owned(),
        });
    }

    /// An attempt that ended during the pass released its lock: it is not lost.
    fn still_held(&self, slot: SlabKey) -> bool {
        self.held
            .upgrade()
            .is_some_and(|held| lock(&held).contains(slot))
    }

    /// Bounds a script call by [`Timing::renew_within`].
    async fn timed<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, bullmq::Error>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(self.timing.renew_within, call).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {:?}", self.timing.renew_within)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_leave_slack_for_failed_passes() {
        let timing = Timing::new(Duration::from_secs(30), Duration::from_secs(3));
        assert_eq!(timing.every, Duration::from_millis(7500));
        assert_eq!(timing.retry_after, Duration::from_secs(1));
        assert_eq!(timing.renew_within, Duration::from_secs(3));
        // Two whole failed passes and their retries still leave the lock alive.
        assert!(timing.every * 2 + timing.renew_within * 2 < timing.lock_duration);

        let short = Timing::new(Duration::from_secs(1), Duration::from_secs(3));
        assert_eq!(short.every, Duration::from_millis(250));
        assert_eq!(short.retry_after, Duration::from_millis(50));
        assert_eq!(short.renew_within, Duration::from_millis(250));

        let shortest = Timing::new(Duration::from_millis(100), Duration::from_secs(3));
        assert_eq!(shortest.every, Duration::from_millis(25));
        assert_eq!(shortest.renew_within, Duration::from_millis(100));
    }

    fn attempt(id: &str, token: &str) -> Attempt {
        let job = crate::job::Job::for_test(())
            .with_test_meta(id, "send", 0)
            .meta()
            .clone();
        Attempt {
            job,
            token: token.to_owned(),
            cancel: CancellationToken::new(),
            lost: LockLost::default(),
        }
    }

    /// A stale run of a job and a fresh one hold slots of their own: the stale one's
    /// end leaves the fresh one renewed, and a slot used again is a new attempt.
    #[test]
    fn each_hold_has_its_own_slot_and_generation() {
        let mut slots = Slab::default();
        let stale = slots.insert(attempt("a", "t1"));
        let fresh = slots.insert(attempt("a", "t2"));
        assert_ne!(stale, fresh);
        slots.remove(stale);
        assert!(!slots.contains(stale));
        assert!(slots.contains(fresh));
        let running = running(&slots);
        assert_eq!(running.len(), 1);
        assert_eq!(running[&("a".to_owned(), "t2".to_owned())].0, fresh);

        // The freed slot is taken again, under a new generation: the old key does not
        // name the new attempt, nor can it remove it.
        let next = slots.insert(attempt("b", "t3"));
        assert_eq!(next.index, stale.index);
        assert!(!slots.contains(stale));
        slots.remove(stale);
        assert!(slots.contains(next));
        slots.remove(next);
        slots.remove(fresh);
        assert!(super::running(&slots).is_empty());
    }

    #[test]
    fn a_job_id_appears_once_per_batch() {
        let running = [
            ("a".to_owned(), "t1".to_owned()),
            ("b".to_owned(), "t2".to_owned()),
            ("a".to_owned(), "t3".to_owned()),
        ];
        let batches = batches(&running);
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[0], [("a", "t1"), ("b", "t2")]);
        assert_eq!(batches[1], [("a", "t3")]);
    }
}
