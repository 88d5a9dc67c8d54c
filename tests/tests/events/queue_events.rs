//! Events: the Redis event stream seen through `QueueEvents`, from another app.

use std::time::Duration;

use queue_core::{Job, JobError, JobOptions, Processor, QueueEvent};
use queue_tests::{TestRedis, SOON};

async fn maybe_fail(job: Job<bool>) -> Result<&'static str, JobError> {
    job.update_progress(42).await?;
    if job.data {
        Err(JobError::unrecoverable(std::io::Error::other(
            "asked to fail",
        )))
    } else {
        Ok("done")
    }
}

#[tokio::test]
async fn queue_events_sees_added_active_progress_completed_and_failed() {
    let redis = TestRedis::new("events");
    let observer = redis.app(|b| b).await;
    let events = observer.queue_events("ev").await.unwrap();

    let app = redis
        .app(|b| b.processor(Processor::new("ev").any_job(maybe_fail)))
        .await;
    let q = app.queue::<bool>("ev").unwrap();
    let workers = app.start_workers().await.unwrap();
    q.add("ok", false, JobOptions::new().job_id("ok-1"))
        .await
        .unwrap();
    q.add("bad", true, JobOptions::new().job_id("bad-1"))
        .await
        .unwrap();

    let mut seen = Vec::new();
    let deadline = Duration::from_secs(10);
    while !(seen.contains(&"completed ok-1".to_owned())
        && seen.contains(&"failed bad-1".to_owned()))
    {
        let event = tokio::time::timeout(deadline, events.next())
            .await
            .expect("events keep coming")
            .unwrap();
        match &event {
            QueueEvent::Added { job_id, name } => seen.push(format!("added {job_id} {name}")),
            QueueEvent::Active { job_id } => seen.push(format!("active {job_id}")),
            QueueEvent::Progress { job_id, data } => seen.push(format!("progress {job_id} {data}")),
            QueueEvent::Completed {
                job_id,
                return_value,
            } => {
                assert_eq!(return_value, &serde_json::json!("done"));
                seen.push(format!("completed {job_id}"));
            }
            QueueEvent::Failed { job_id, reason } => {
                assert_eq!(reason, "asked to fail");
                seen.push(format!("failed {job_id}"));
            }
            _ => {}
        }
    }
    for expected in [
        "added ok-1 ok",
        "added bad-1 bad",
        "active ok-1",
        "progress ok-1 42",
        "active bad-1",
    ] {
        assert!(
            seen.contains(&expected.to_owned()),
            "{expected} missing from {seen:?}"
        );
    }

    // A duplicate add shows up too.
    q.add("ok", false, JobOptions::new().job_id("ok-1"))
        .await
        .unwrap();
    let dup = events
        .wait_for(SOON, |e| matches!(e, QueueEvent::Duplicated { .. }))
        .await
        .unwrap();
    assert_eq!(dup.job_id(), Some("ok-1"));
    events.close().await;
    workers.shutdown(SOON).await;
}

/// A reader that falls behind loses the oldest-unread events past a bound, says how
/// many, and keeps reading: it never grows memory without limit.
#[tokio::test]
async fn a_reader_that_falls_behind_is_bounded_and_told_how_much_it_lost() {
    let redis = TestRedis::new("events-lag");
    let app = redis
        .app(|b| b.registrations(queue_core::app::Registrations::None))
        .await;
    let events = app.queue_events("lagging").await.unwrap();
    let queue = app.queue::<u32>("lagging").unwrap();
    // Each add writes two events (added, waiting): well past the buffer.
    let jobs: Vec<_> = (0..queue_core::events::QUEUE_EVENTS_CAPACITY as u32)
        .map(|n| queue_core::queue::BulkJob::new("n", n))
        .collect();
    queue.add_bulk(jobs).await.unwrap();
    queue_tests::wait_until(SOON, "the reader to report lag", || async {
        (events.lagged() > 0).then_some(())
    })
    .await;
    // Still readable, and what it kept is the start of what happened.
    let first = events.next().await.unwrap();
    assert_eq!(first.kind(), "added", "{first:?}");
    assert!(events.lagged() <= queue_core::events::QUEUE_EVENTS_CAPACITY as u64 * 2);
    // Its own deadline is a timeout, not a Redis error.
    let none = events
        .wait_for(std::time::Duration::from_millis(200), |e| {
            e.kind() == "paused"
        })
        .await
        .unwrap_err();
    assert!(matches!(none, queue_core::Error::Timeout { .. }), "{none}");
    events.close().await;
}
