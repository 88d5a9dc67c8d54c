//! What a grouped job costs Redis, in commands per processed job (`INFO commandstats`):
//! a figure that does not depend on the machine (but for a rate limit's windows, which
//! more starts share on a faster one), so it is held here as well as in the benchmark.
//! On a private `redis-server` (the counts are server-wide), ungrouped jobs first as the
//! reference, then grouped ones: with many groups of one or two jobs a grouped job may
//! cost at most 28 commands (an ungrouped one 23), and the cost stays flat from one
//! group to 10,000; under a group's concurrency and rate limit, at most 33 (33.9 before
//! a rate limit's check became the count of the start itself).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queue_core::{
    app::Registrations, group::GroupLimits, queue::BulkJob, Dep, Job, JobError, JobOptions,
    Processor, QueueApp, Retention,
};
use queue_tests::{wait_until, PrivateRedis};

/// The most Redis commands a processed grouped job may cost.
const MOST_PER_GROUPED_JOB: f64 = 28.0;
/// The most a grouped job may cost under a concurrency and a rate limit of its group:
/// its slot taken and given back, its start counted in the group's window.
const MOST_PER_LIMITED_JOB: f64 = 33.0;

async fn count(_: Job<u64>, done: Dep<AtomicU64>) -> Result<(), JobError> {
    done.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Commands per job to process `jobs` no-op jobs spread over `groups` groups (`None`:
/// ungrouped jobs and worker), with a worker of concurrency 10 and, for grouped jobs,
/// the group limits `limits`.
async fn commands_per_job(
    redis: &PrivateRedis,
    jobs: u64,
    groups: Option<u64>,
    limits: GroupLimits,
) -> f64 {
    let url = redis.url();
    let done = Arc::new(AtomicU64::new(0));
    let mut processor = Processor::new("cost").concurrency(10).any_job(count);
    if groups.is_some() {
        processor = processor.groups(limits);
    }
    let app = QueueApp::builder()
        .redis(url.as_str())
        .prefix(format!(
            "cost-{}-{}",
            groups.unwrap_or(0),
            limits.get_concurrency().unwrap_or(0)
        ))
        .registrations(Registrations::None)
        .provide_arc(done.clone())
        .processor(processor)
        .build()
        .await
        .expect("the app builds");
    let queue = app.queue::<u64>("cost").expect("the queue");
    let numbers: Vec<u64> = (0..jobs).collect();
    for chunk in numbers.chunks(1000) {
        let batch = chunk
            .iter()
            .map(|n| {
                let mut options = JobOptions::new().remove_on_complete(Retention::None);
                if let Some(groups) = groups {
                    options = options.group(format!("tenant-{}", n % groups));
                }
                BulkJob::new("job", *n).options(options)
            })
            .collect();
        queue.add_bulk(batch).await.expect("the jobs are added");
    }
    redis.reset_stats();
    let workers = app.start_workers().await.expect("the workers start");
    wait_until(Duration::from_secs(120), "every job processed", || async {
        (done.load(Ordering::Relaxed) >= jobs).then_some(())
    })
    .await;
    assert!(workers.shutdown(Duration::from_secs(10)).await.is_clean());
    redis.commands_run() as f64 / jobs as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grouped_job_costs_at_most_28_commands_flat_from_one_group_to_10_000() {
    let redis = PrivateRedis::start();
    let ungrouped = commands_per_job(&redis, 3_000, None, GroupLimits::new()).await;
    let one_group = commands_per_job(&redis, 3_000, Some(1), GroupLimits::new()).await;
    let ten = commands_per_job(&redis, 3_000, Some(10), GroupLimits::new()).await;
    // 15,000 jobs over 10,000 groups: half the groups get two jobs, half one.
    let many = commands_per_job(&redis, 15_000, Some(10_000), GroupLimits::new()).await;
    println!(
        "commands per job: ungrouped {ungrouped:.1}, 1 group {one_group:.1}, \
         10 groups {ten:.1}, 10,000 groups {many:.1}"
    );
    assert!(
        many <= MOST_PER_GROUPED_JOB,
        "10,000 groups: {many:.1} commands a job (ungrouped: {ungrouped:.1})"
    );
    for (label, cost) in [("1 group", one_group), ("10 groups", ten)] {
        assert!(
            (cost - many).abs() <= many * 0.1,
            "{label}: {cost:.1} commands a job against {many:.1} with 10,000 groups"
        );
    }
}

/// Under a group's concurrency and rate limit (2 at once, 100 starts a second, as the
/// benchmark's limited shape; here 10,000 groups of one or two jobs) a processed job
/// costs at most 33 commands: 32.2 measured, 33.9 before the rate limit's check became
/// the count of the start. A second start in a group's window costs one `PEXPIRE` less
/// than a first, so a slower machine counts a little more (at most a third of a command
/// a job here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grouped_job_under_group_limits_costs_at_most_33_commands() {
    let redis = PrivateRedis::start();
    let limits = GroupLimits::new()
        .concurrency(2)
        .rate(100, Duration::from_secs(1));
    let limited = commands_per_job(&redis, 15_000, Some(10_000), limits).await;
    println!("commands per job under group limits, 10,000 groups: {limited:.1}");
    assert!(
        limited <= MOST_PER_LIMITED_JOB,
        "10,000 groups under limits: {limited:.1} commands a job"
    );
}
