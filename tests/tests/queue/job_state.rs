//! A job's fields and its state are read together: a status read while jobs finish
//! never says `completed` without the finish time and the return value (two separate
//! reads could pair the state of one moment with the fields of the moment before; the
//! packaged example's check saw it once on a busy host).

use queue_core::app::Registrations;
use queue_core::prelude::*;
use queue_tests::TestRedis;

async fn answer(job: Job<u64>) -> Result<u64, JobError> {
    Ok(job.data * 2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_state_always_comes_with_its_finish_time_and_return_value() {
    let redis = TestRedis::new("status-torn");
    let app = redis
        .app(|b| {
            b.registrations(Registrations::None)
                .processor(Processor::new("torn").concurrency(8).any_job(answer))
        })
        .await;
    let q = app.queue::<u64>("torn").unwrap();
    let mut ids = Vec::new();
    for n in 0..300u64 {
        ids.push(q.add("x", n, JobOptions::new()).await.unwrap().id);
    }
    let workers = app.start_workers().await.unwrap();
    let mut torn = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let mut all_done = true;
        for id in &ids {
            let info = q.get_job(id).await.unwrap().expect("the job");
            if info.state == Some(JobState::Completed) {
                if info.finished_on_ms.is_none() || info.return_value.is_none() {
                    torn.push((id.clone(), info.finished_on_ms, info.return_value));
                }
            } else {
                all_done = false;
            }
        }
        if all_done {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "jobs still running after 30 s"
        );
    }
    workers.shutdown(std::time::Duration::from_secs(10)).await;
    assert!(torn.is_empty(), "{} torn reads: {torn:?}", torn.len());
}

#[tokio::test]
async fn a_key_beside_the_jobs_that_is_no_hash_reads_as_no_job() {
    let redis = TestRedis::new("status-wrongtype");
    let app = redis.app(|b| b.registrations(Registrations::None)).await;
    let q = app.queue::<u64>("odd").unwrap();
    let mut conn = queue_tests::sync_connection();
    let _: () = redis::cmd("SET")
        .arg(format!("{}:odd:stray", redis.prefix()))
        .arg("not a job")
        .query(&mut *conn)
        .unwrap();
    assert!(q.get_job("stray").await.unwrap().is_none());
    assert!(q.get_job("stray").await.unwrap().is_none());
}
