//! Bull Board on our queues: its API (`@bull-board/api` 9.x, and the newest 6.x, on
//! Node BullMQ 5 and 6) reads what our workers wrote as it reads Node's: the same
//! counts as ours, and for each failed job the same reason, attempts, added time,
//! payload and record of every failed attempt (`stacktrace`, which Bull Board lists
//! newest first). Our dashboard's own agreement with Bull Board is in `dashboard/queues.rs`.

use queue_core::{Job, JobError, JobOptions, JobState, Processor};
use queue_tests::node::Bullmq;
use queue_tests::{wait_for_state, TestRedis, SOON};

/// Fails each attempt of a job whose data says `fail`.
async fn fails(job: Job<serde_json::Value>) -> Result<(), JobError> {
    if job.data["fail"] == true {
        let cause = std::io::Error::other("smtp said <no>");
        return Err(JobError::retry(cause));
    }
    Ok(())
}

#[tokio::test]
async fn bull_board_6_reads_our_queues_on_bullmq_5_and_6() {
    for bullmq in Bullmq::ALL {
        board_reads_ours(bullmq, "6").await;
    }
}

#[tokio::test]
async fn bull_board_9_reads_our_queues_on_bullmq_6() {
    board_reads_ours(Bullmq::V6, "9").await;
}

async fn board_reads_ours(bullmq: Bullmq, board_major: &str) {
    let redis = TestRedis::new(&format!("board{board_major}-{}", bullmq.major()));
    let app = redis
        .app(|b| b.processor(Processor::new("bb-mail").any_job(fails)))
        .await;
    let q = app.queue::<serde_json::Value>("bb-mail").unwrap();
    let workers = app.start_workers().await.unwrap();
    for i in 0..2 {
        let id = format!("bad-{i}");
        q.add(
            "welcome",
            serde_json::json!({"fail": true, "n": i}),
            JobOptions::new().job_id(&id).attempts(2),
        )
        .await
        .unwrap();
        wait_for_state(&q, &id, JobState::Failed, SOON).await;
    }
    q.add(
        "welcome",
        serde_json::json!({}),
        JobOptions::new().job_id("good-1"),
    )
    .await
    .unwrap();
    wait_for_state(&q, "good-1", JobState::Completed, SOON).await;
    workers.shutdown(SOON).await;
    let later = JobOptions::new().delay(std::time::Duration::from_secs(3600));
    q.add("later", serde_json::json!({}), later).await.unwrap();
    q.add("now", serde_json::json!({}), JobOptions::new().priority(5))
        .await
        .unwrap();
    q.add("next", serde_json::json!({}), JobOptions::new())
        .await
        .unwrap();

    let args = ["board", "bb-mail", "failed", board_major];
    let board = bullmq.run(redis.prefix(), &args).await.remove(0);
    let version = board["boardVersion"].as_str().unwrap_or_default();
    assert!(
        version.starts_with(&format!("{board_major}.")),
        "Bull Board {version}"
    );
    let what = format!("Bull Board {version} on BullMQ {}", bullmq.major());

    let ours = q.get_job_counts().await.unwrap();
    for (state, count) in [
        ("waiting", ours.waiting),
        ("prioritized", ours.prioritized),
        ("delayed", ours.delayed),
        ("active", ours.active),
        ("completed", ours.completed),
        ("failed", ours.failed),
    ] {
        assert_eq!(
            board["counts"][state].as_u64(),
            Some(count),
            "{what}: {state} in {}",
            board["counts"]
        );
    }

    let jobs = board["jobs"].as_array().expect("the failed jobs");
    let ids: Vec<&str> = jobs.iter().filter_map(|j| j["id"].as_str()).collect();
    assert_eq!(ids, ["bad-1", "bad-0"], "{what}: newest failure first");
    for job in jobs {
        let id = job["id"].as_str().unwrap_or_default();
        let info = q.get_job(id).await.unwrap().unwrap();
        assert_eq!(job["failedReason"], "smtp said <no>", "{what}: {id}");
        assert_eq!(job["attempts"], 2, "{what}: {id}");
        assert_eq!(job["timestamp"].as_u64(), Some(info.timestamp_ms), "{what}");
        assert_eq!(job["data"], info.data, "{what}: {id}");
        // One record per failed attempt, as Node's workers leave them.
        let mut newest_first = info.stacktrace.clone();
        newest_first.reverse();
        assert_eq!(info.stacktrace.len(), 2, "{what}: {id}");
        assert_eq!(job["stacktrace"], serde_json::json!(newest_first), "{what}");
        assert_eq!(job["isFailed"], true, "{what}: {id}");
    }
}
