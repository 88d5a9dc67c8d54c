//! Sending a job's finishing command again when it could not reach Redis.
//!
//! A worker that has run a job holds its lock; the command that moves the job out of
//! `active` (to completed, failed, delayed or back to wait) names the lock's token.
//! When that command fails because the connection dropped or Redis is restarting, the
//! job is still this worker's for as long as its lock lives: leaving it `active` hands
//! it to stalled-job recovery, which runs it a second time, much later. So the command
//! is sent again, with the same token, once Redis answers.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use tracing::{info, warn};

use crate::error::Error;
use crate::job::Job;
use crate::keys::QueueKeys;
use crate::redis_connection::RedisConnection;

/// Tokens of unanswered fetches a worker remembers at most
/// (`Worker::resume_unanswered_fetches`): an outage adds one a second.
pub(crate) const MAX_UNANSWERED_FETCHES: usize = 64;

/// The first pause before sending a command again; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// Whether `error` says that Redis did not take the command: the connection dropped
/// or was refused, no answer came in time, or Redis answered "not now" (loading its
/// data, a failover). A command Redis refused (a script's error code, a wrong
/// argument) is not sent again.
pub(crate) fn is_transient(error: &Error) -> bool {
    match error {
        Error::Redis(e) => !matches!(e.retry_method(), redis::RetryMethod::NoRetry),
        _ => false,
    }
}

/// How one finishing command is retried.
pub(crate) struct Retry<'a> {
    /// The job, for the logs.
    pub(crate) job_id: &'a str,
    /// What the command does, for the logs ("the job's completion").
    pub(crate) what: &'a str,
    /// Set when the worker closes.
    pub(crate) closing: &'a AtomicBool,
    /// The job's lock duration: a closing worker stops trying once the lock has
    /// surely expired; a running one tries until Redis answers, as its fetch loop does.
    pub(crate) lock_duration: Duration,
}

impl Retry<'_> {
    /// Runs `command` until Redis answers it (with a result or a refusal). Also
    /// returns whether it was sent more than once: an earlier try may then have been
    /// carried out even though its answer was lost, which the caller checks when the
    /// last try is refused.
    pub(crate) async fn run<T, F, Fut>(&self, mut command: F) -> (Result<T, Error>, bool)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let first_failure = Instant::now();
        let mut pause = FIRST_PAUSE;
        let mut tries = 0u32;
        loop {
            let result = command().await;
            let give_up = self.closing.load(Ordering::Relaxed)
                && first_failure.elapsed() >= self.lock_duration;
            match result {
                Err(e) if is_transient(&e) && !give_up => {
                    if tries == 0 {
                        warn!(
                            job_id = %self.job_id,
                            error = %e,
                            "{} did not reach Redis; sending it again with the job's lock token once Redis answers",
                            self.what
                        );
                    }
                    tries += 1;
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                result => {
                    if tries > 0 {
                        info!(
                            job_id = %self.job_id,
                            tries = tries + 1,
                            ok = result.is_ok(),
                            "{} reached Redis again",
                            self.what
                        );
                    }
                    return (result, tries > 0);
                }
            }
        }
    }
}

/// Whether `job_id` was already moved to `finished_key` (completed or failed) by an
/// earlier try whose answer was lost: it is in that set, or it is gone (removed at once
/// by its retention). Asked when a try sent again is refused.
pub(crate) async fn finished_earlier(
    conn: &RedisConnection,
    keys: &QueueKeys,
    job_id: &str,
    finished_key: &str,
) -> bool {
    let mut pipe = redis::pipe();
    pipe.cmd("EXISTS")
        .arg(keys.job_key(job_id))
        .cmd("ZSCORE")
        .arg(finished_key)
        .arg(job_id);
    match conn.pipe::<(bool, Option<f64>)>(&pipe).await {
        Ok((exists, score)) => !exists || score.is_some(),
        Err(_) => false,
    }
}

/// The job a finishing command fetched (`fetch_next`) in a try whose answer was lost:
/// active under `token`, waiting for the task that sent it to process it.
pub(crate) async fn resume_chained_fetch(
    conn: &RedisConnection,
    keys: &QueueKeys,
    token: &str,
) -> Option<Job> {
    let tokens = [token.to_owned()];
    let found = crate::ext::locks::jobs_locked_by(conn, keys, &tokens)
        .await
        .ok()?;
    let (job_id, _) = found.into_iter().next()?;
    let job = Job::from_id(conn, keys, &job_id).await.ok()??;
    info!(job_id = %job_id, "a finishing command whose answer was lost had fetched this job; processing it");
    Some(job)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(kind: std::io::ErrorKind) -> Error {
        Error::Redis(redis::RedisError::from(std::io::Error::from(kind)))
    }

    #[test]
    fn a_lost_connection_or_a_loading_redis_is_transient_a_refusal_is_not() {
        assert!(is_transient(&io(std::io::ErrorKind::ConnectionReset)));
        assert!(is_transient(&io(std::io::ErrorKind::ConnectionRefused)));
        assert!(is_transient(&io(std::io::ErrorKind::BrokenPipe)));
        assert!(is_transient(&io(std::io::ErrorKind::TimedOut)));
        let loading = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading),
            "Redis is loading the dataset in memory",
        ));
        assert!(is_transient(&Error::Redis(loading)));

        let refused = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "ERR wrong number of arguments",
        ));
        assert!(!is_transient(&Error::Redis(refused)));
        assert!(!is_transient(&Error::from_script_code(-2)));
        assert!(!is_transient(&Error::ConnectionClosed));
    }

    #[tokio::test(start_paused = true)]
    async fn a_command_is_sent_again_until_redis_answers() {
        let closing = AtomicBool::new(false);
        let retry = Retry {
            job_id: "j-1",
            what: "the job's completion",
            closing: &closing,
            lock_duration: Duration::from_secs(30),
        };
        let mut tries = 0;
        let (result, retried) = retry
            .run(|| {
                tries += 1;
                let answer = if tries < 4 {
                    Err(io(std::io::ErrorKind::ConnectionRefused))
                } else {
                    Ok(tries)
                };
                std::future::ready(answer)
            })
            .await;
        assert_eq!(result.unwrap(), 4);
        assert!(retried);

        let (refused, retried) = retry
            .run(|| std::future::ready(Err::<(), _>(Error::from_script_code(-6))))
            .await;
        assert!(refused.is_err());
        assert!(!retried, "a refusal is final at once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_closing_worker_stops_trying_once_the_lock_has_expired() {
        let closing = AtomicBool::new(true);
        let retry = Retry {
            job_id: "j-1",
            what: "the job's completion",
            closing: &closing,
            lock_duration: Duration::from_secs(2),
        };
        let started = tokio::time::Instant::now();
        let (result, retried) = retry
            .run(|| std::future::ready(Err::<(), _>(io(std::io::ErrorKind::ConnectionRefused))))
            .await;
        assert!(result.is_err() && retried);
        assert!(started.elapsed() >= Duration::from_secs(2));
        assert!(started.elapsed() < Duration::from_secs(4));
    }
}
