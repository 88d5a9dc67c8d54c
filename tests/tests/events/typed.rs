//! Listeners shaped like NestJS's `@OnWorkerEvent('failed') onFailed(job, err)`: an
//! `#[on_worker_event]` function that takes the job with its typed payload and, after
//! it, the failure, the typed output or the progress, for the jobs of one declared job
//! type; a failed listener on every failed attempt, or on the last one only.

use std::sync::Mutex;

use queue_core::prelude::*;
use queue_core::{app::Registrations, events::EventJob, events::JobFailure};
use queue_tests::{wait_for_state, wait_until, TestRedis, SOON};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct WelcomeMail {
    to: String,
    /// Attempts that fail before one succeeds (more than allowed: it fails for good).
    fail_times: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Receipt {
    delivered_to: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Digest {
    week: u32,
}

#[job_queue("nest-mail")]
enum NestMail {
    #[job("welcome", output = Receipt)]
    Welcome(WelcomeMail),
    #[job("digest")]
    Digest(Digest),
}

#[processor(NestMail)]
async fn welcome(job: Job<WelcomeMail>) -> Result<Receipt, JobError> {
    job.update_progress(serde_json::json!({"sending": job.data.to}))
        .await?;
    if job.attempts_made() < job.data.fail_times {
        return Err(JobError::retry(std::io::Error::other(format!(
            "smtp busy for {}",
            job.data.to
        ))));
    }
    Ok(Receipt {
        delivered_to: job.data.to.clone(),
    })
}

#[processor(NestMail)]
async fn digest(_job: Job<Digest>) -> Result<(), JobError> {
    Err(JobError::unrecoverable("digests are off"))
}

/// What the listeners were called with, in order.
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl Seen {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }

    fn lines(&self, prefix: &str) -> Vec<String> {
        let mut lines: Vec<String> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with(prefix))
            .cloned()
            .collect();
        lines.sort();
        lines
    }
}

#[on_worker_event(NestMail, failed)]
async fn every_failure(job: EventJob<WelcomeMail>, failure: JobFailure, seen: Dep<Seen>) {
    seen.push(format!(
        "each {} {} {}/{} final={} {}",
        job.id,
        job.data.to,
        failure.attempt,
        failure.max_attempts,
        failure.is_final,
        failure.reason
    ));
}

#[on_worker_event(NestMail, failed, final_only)]
async fn last_failure(job: EventJob<WelcomeMail>, failure: JobFailure, seen: Dep<Seen>) {
    seen.push(format!(
        "final {} {} {} {}",
        job.queue, job.name, job.data.to, failure.reason
    ));
}

#[on_worker_event(NestMail, completed)]
async fn delivered(job: EventJob<WelcomeMail>, receipt: Receipt, seen: Dep<Seen>) {
    seen.push(format!("done {} {}", job.id, receipt.delivered_to));
}

#[on_worker_event(NestMail, progress)]
async fn progressed(job: EventJob<WelcomeMail>, progress: serde_json::Value, seen: Dep<Seen>) {
    seen.push(format!("progress {} {}", job.data.to, progress["sending"]));
}

/// A string-named queue: any payload that deserializes, every job of the queue.
#[on_worker_event("nest-plain", failed, final_only)]
async fn plain_failure(job: EventJob<serde_json::Value>, failure: JobFailure, seen: Dep<Seen>) {
    seen.push(format!(
        "plain {} {} {}",
        job.id, job.data["n"], failure.reason
    ));
}

async fn plain(_job: Job<serde_json::Value>) -> Result<(), JobError> {
    Err(JobError::unrecoverable("plain says no"))
}

#[tokio::test]
async fn typed_listeners_get_the_job_data_with_the_failure_output_or_progress() {
    let redis = TestRedis::new("typed-listeners");
    let seen = std::sync::Arc::new(Seen::default());
    let app = redis
        .app(|b| {
            b.registrations(Registrations::Queues(vec![
                "nest-mail".into(),
                "nest-plain".into(),
            ]))
            .processor(Processor::new("nest-plain").any_job(plain))
            .provide_arc(seen.clone())
        })
        .await;
    let workers = app.start_workers().await.unwrap();
    let retry = || JobOptions::new().attempts(3);
    let mail = |to: &str, fail_times| WelcomeMail {
        to: to.into(),
        fail_times,
    };
    app.add_job(mail("ada", 1), retry().job_id("w-ada"))
        .await
        .unwrap();
    app.add_job(mail("bob", 9), retry().job_id("w-bob"))
        .await
        .unwrap();
    // Another job type of the queue: the WelcomeMail listeners never hear of it.
    app.add_job(Digest { week: 1 }, JobOptions::new().job_id("d-1"))
        .await
        .unwrap();
    let plain_queue = app.queue::<serde_json::Value>("nest-plain").unwrap();
    plain_queue
        .add(
            "p",
            serde_json::json!({"n": 7}),
            JobOptions::new().job_id("p-7"),
        )
        .await
        .unwrap();

    let q = app.queue_of::<NestMail>().unwrap();
    wait_for_state(&q, "w-ada", JobState::Completed, SOON).await;
    wait_for_state(&q, "w-bob", JobState::Failed, SOON).await;
    wait_for_state(&q, "d-1", JobState::Failed, SOON).await;
    wait_until(SOON, "every listener call", || async {
        let calls = seen.0.lock().unwrap().len();
        // ada: 1 failure, 2 progress, 1 done; bob: 3 failures, 1 final, 3 progress;
        // plain: 1 final.
        (calls >= 12).then_some(())
    })
    .await;
    workers.shutdown(SOON).await;

    assert_eq!(
        seen.lines("each"),
        [
            "each w-ada ada 1/3 final=false smtp busy for ada",
            "each w-bob bob 1/3 final=false smtp busy for bob",
            "each w-bob bob 2/3 final=false smtp busy for bob",
            "each w-bob bob 3/3 final=true smtp busy for bob",
        ]
    );
    assert_eq!(
        seen.lines("final"),
        ["final nest-mail welcome bob smtp busy for bob"]
    );
    assert_eq!(seen.lines("done"), ["done w-ada ada"]);
    assert_eq!(seen.lines("progress ada").len(), 2);
    assert_eq!(seen.lines("progress bob").len(), 3);
    assert_eq!(
        seen.lines("progress ada")[0],
        "progress ada \"ada\"",
        "the progress value as reported"
    );
    assert_eq!(seen.lines("plain"), ["plain p-7 7 plain says no"]);
    assert_eq!(seen.0.lock().unwrap().len(), 12, "nothing else");
}
