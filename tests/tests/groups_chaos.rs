//! A group's concurrency holds across worker processes while one of them is SIGKILLed
//! every second, and the killed workers' slots come back through stalled-job
//! recovery: every job completes. Counted by the handlers (tests/src/group_chaos.rs).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use queue_core::testing::unique_prefix;
use queue_core::{BulkJob, JobOptions, Keep, QueueApp, Registrations};
use queue_tests::group_chaos::{self, Task, GROUP_CONCURRENCY, QUEUE};
use queue_tests::PrivateRedis;
use tokio::process::{Child, Command};

const WORKERS: usize = 3;
const KILL_EVERY: Duration = Duration::from_secs(1);
const GROUPS: usize = 6;
const JOBS_PER_GROUP: u64 = 40;

struct Run {
    redis_url: String,
    prefix: String,
    reports: String,
}

impl Run {
    fn spawn_worker(&self) -> Child {
        Command::new(env!("CARGO_BIN_EXE_group-chaos-worker"))
            .env("REDIS_URL", &self.redis_url)
            .env("PREFIX", &self.prefix)
            .env("REPORTS", &self.reports)
            .env("RUST_LOG", "off")
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("a group chaos worker starts")
    }
}

// Seen once in scripts/test.sh under load: 239 of 240 jobs done and one left `active`
// for good (a grouped job whose worker was killed not recovered). Under investigation
// (#31 stays open); run it with `cargo test -p queue-tests --test groups_chaos -- --ignored`.
#[ignore = "one job left active once under load: a grouped job not recovered after a kill (#31)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_concurrency_of_two_holds_while_worker_processes_are_killed() {
    let redis = PrivateRedis::start();
    let prefix = unique_prefix("group-chaos");
    let run = Run {
        redis_url: format!("redis://127.0.0.1:{}", redis.port()),
        reports: format!("{prefix}:reports"),
        prefix,
    };
    let producer = QueueApp::builder()
        .redis(run.redis_url.clone())
        .prefix(run.prefix.clone())
        .registrations(Registrations::None)
        .build()
        .await
        .expect("the producer connects");
    let q = producer.queue::<Task>(QUEUE).unwrap();
    let mut jobs = Vec::new();
    for g in 0..GROUPS {
        for n in 0..JOBS_PER_GROUP {
            let group = format!("tenant-{g}");
            jobs.push(
                BulkJob::new(
                    "work",
                    Task {
                        group: group.clone(),
                        ms: 100 + (n * 37) % 200,
                    },
                )
                .options(
                    JobOptions::new()
                        .group(group.clone())
                        .job_id(format!("{group}-{n}"))
                        .remove_on_complete(Keep::All),
                ),
            );
        }
    }
    q.add_bulk(jobs).await.unwrap();
    let total = JOBS_PER_GROUP * GROUPS as u64;

    let started = Instant::now();
    let deadline = Duration::from_secs(180);
    let mut workers: Vec<Child> = (0..WORKERS).map(|_| run.spawn_worker()).collect();
    let mut killed: HashMap<u32, u64> = HashMap::new();
    let mut kills = 0usize;
    let mut next_kill = started + KILL_EVERY;
    loop {
        let counts = q.get_job_counts().await.unwrap();
        if counts.completed == total {
            break;
        }
        assert!(
            started.elapsed() < deadline,
            "not done after {deadline:?}: {counts:?} (slots lost?)"
        );
        if Instant::now() >= next_kill {
            let victim = kills % WORKERS;
            let pid = workers[victim].id();
            let _ = workers[victim].start_kill();
            let _ = workers[victim].wait().await;
            if let Some(pid) = pid {
                killed.insert(pid, group_chaos::now_ms());
            }
            workers[victim] = run.spawn_worker();
            kills += 1;
            next_kill = Instant::now() + KILL_EVERY;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let wall = started.elapsed();
    for worker in &mut workers {
        let _ = worker.start_kill();
        let _ = worker.wait().await;
    }

    let mut admin = redis::Client::open(run.redis_url.as_str())
        .and_then(|c| c.get_connection())
        .unwrap();
    let lines: Vec<String> = redis::cmd("LRANGE")
        .arg(&run.reports)
        .arg(0)
        .arg(-1)
        .query(&mut admin)
        .unwrap();
    let most = group_chaos::most_at_once(&lines, &killed);
    let starts = lines.iter().filter(|l| l.starts_with("start")).count();
    println!(
        "group chaos: {total} jobs in {GROUPS} groups, {WORKERS} processes, {kills} kills, \
         {starts} attempts, {wall:.1?}; most at once per group: {most:?}"
    );
    assert!(kills >= 3, "the chaos happened ({kills} kills)");
    assert!(
        starts > total as usize,
        "some attempts were cut by a kill and ran again"
    );
    for (group, n) in &most {
        assert!(
            *n <= GROUP_CONCURRENCY as usize,
            "{group} ran {n} jobs at once, over its concurrency of {GROUP_CONCURRENCY}"
        );
    }
    assert!(
        most.values().any(|n| *n == GROUP_CONCURRENCY as usize),
        "the limit was reached: {most:?}"
    );
}
