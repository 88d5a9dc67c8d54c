//! A batch worker SIGKILLed in the middle of its batches: the killed batches' jobs,
//! left active under the dead process's locks, come back through stalled-job recovery
//! and run in another batch; at the end every job is completed and counted done once
//! by the handler (tests/src/batch_chaos.rs), none failed or left behind.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use queue_core::testing::unique_prefix;
use queue_core::{app::Registrations, queue::BulkJob, JobOptions, QueueApp, Retention};
use queue_tests::batch_chaos::{self, Line, Started, QUEUE, WORK};
use queue_tests::PrivateRedis;
use tokio::process::{Child, Command};

const WORKERS: usize = 2;
const JOBS: u64 = 600;
/// Kills of a batch of any jobs; then one more, of a batch holding a job whose run
/// was already lost once.
const KILLS: usize = 3;
/// A batch is killed only this soon after its handler started, long before it counts
/// its jobs ([`WORK`] later): a kill between the count and the batch's completion
/// would rightly run and count them again, and is not what this run is about.
const KILL_WITHIN_MS: u64 = 80;
const DEADLINE: Duration = Duration::from_secs(30);

struct Run {
    redis_url: String,
    prefix: String,
    lines: String,
    done: String,
}

impl Run {
    fn spawn_worker(&self) -> Child {
        Command::new(env!("CARGO_BIN_EXE_batch-chaos-worker"))
            .env("REDIS_URL", &self.redis_url)
            .env("PREFIX", &self.prefix)
            .env("LINES", &self.lines)
            .env("DONE", &self.done)
            .env("RUST_LOG", "off")
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("a batch chaos worker starts")
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}:{QUEUE}:{suffix}", self.prefix)
    }
}

/// The log as read so far: every batch's start, which ended, and each process's
/// batch now running.
#[derive(Default)]
struct Seen {
    read: usize,
    starts: Vec<Started>,
    ended: HashSet<(u32, u64)>,
    running: HashMap<u32, Started>,
}

impl Seen {
    async fn catch_up(&mut self, conn: &mut redis::aio::MultiplexedConnection, key: &str) {
        let lines: Vec<String> = redis::cmd("LRANGE")
            .arg(key)
            .arg(self.read)
            .arg(-1)
            .query_async(conn)
            .await
            .expect("the log reads");
        self.read += lines.len();
        for line in lines {
            match batch_chaos::parse(&line) {
                Some(Line::Start(started)) => {
                    self.running.insert(started.pid, started.clone());
                    self.starts.push(started);
                }
                Some(Line::End(pid, seq)) => {
                    self.ended.insert((pid, seq));
                    if self.running.get(&pid).is_some_and(|s| s.seq == seq) {
                        self.running.remove(&pid);
                    }
                }
                None => panic!("a log line not the handler's: {line}"),
            }
        }
    }
}

/// A kill, and what it hit.
struct Kill {
    batch: Started,
    /// How long after the batch's start the kill was sent.
    after_ms: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_killed_mid_run_is_recovered_and_each_job_counted_done_once() {
    let redis = PrivateRedis::start();
    let prefix = unique_prefix("batch-chaos");
    let run = Run {
        redis_url: format!("redis://127.0.0.1:{}", redis.port()),
        lines: format!("{prefix}:lines"),
        done: format!("{prefix}:done"),
        prefix,
    };
    let producer = QueueApp::builder()
        .redis(run.redis_url.clone())
        .prefix(run.prefix.clone())
        .registrations(Registrations::None)
        .build()
        .await
        .expect("the producer connects");
    let q = producer.queue::<u64>(QUEUE).unwrap();
    let ids: Vec<String> = (0..JOBS).map(|n| format!("job-{n}")).collect();
    let jobs = (0..JOBS)
        .zip(&ids)
        .map(|(n, id)| {
            let options = JobOptions::new().job_id(id.clone());
            // A job with a retention of its own is completed alone, past the batch's
            // one script for the rest: every fifth job takes that way.
            let options = if n % 5 == 0 {
                options.remove_on_complete(Retention::All)
            } else {
                options
            };
            BulkJob::new("row", n).options(options)
        })
        .collect();
    q.add_bulk(jobs).await.unwrap();
    let mut conn = redis::Client::open(run.redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();

    let started = Instant::now();
    let mut workers: Vec<Child> = (0..WORKERS).map(|_| run.spawn_worker()).collect();
    let mut seen = Seen::default();
    let mut kills: Vec<Kill> = Vec::new();
    loop {
        let counts = q.get_job_counts().await.unwrap();
        if counts.completed + counts.failed == JOBS {
            break;
        }
        if started.elapsed() >= DEADLINE {
            let state = unfinished_jobs(&run, &ids).await;
            panic!("not done after {DEADLINE:?}: {counts:?}\n{state}");
        }
        seen.catch_up(&mut conn, &run.lines).await;
        let now = batch_chaos::now_ms();
        let victim = workers.iter().position(|worker| {
            let Some(batch) = worker.id().and_then(|pid| seen.running.get(&pid)) else {
                return false;
            };
            let fresh = now.saturating_sub(batch.ms) < KILL_WITHIN_MS;
            // After the first kills, only a batch holding a job already recovered.
            fresh && (kills.len() < KILLS || !batch.recovered.is_empty())
        });
        if let Some(victim) = victim.filter(|_| kills.len() <= KILLS) {
            let pid = workers[victim].id().unwrap();
            let batch = seen.running.remove(&pid).unwrap();
            workers[victim].start_kill().expect("SIGKILL sent");
            let after_ms = batch_chaos::now_ms().saturating_sub(batch.ms);
            let _ = workers[victim].wait().await;
            // The kill hit a running batch: its jobs are still active (the dead
            // process's locks on them last a second more).
            let active: Vec<String> = redis::cmd("LRANGE")
                .arg(run.key("active"))
                .arg(0)
                .arg(-1)
                .query_async(&mut conn)
                .await
                .unwrap();
            let active: HashSet<&String> = active.iter().collect();
            let not_active: Vec<&String> =
                batch.ids.iter().filter(|id| !active.contains(id)).collect();
            assert!(
                not_active.is_empty(),
                "the killed batch {}/{}'s jobs are active: not {not_active:?}",
                batch.pid,
                batch.seq
            );
            kills.push(Kill { batch, after_ms });
            workers[victim] = run.spawn_worker();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let wall = started.elapsed();
    for worker in &mut workers {
        let _ = worker.start_kill();
        let _ = worker.wait().await;
    }
    seen.catch_up(&mut conn, &run.lines).await;

    let counts = q.get_job_counts().await.unwrap();
    let done: HashMap<String, u64> = redis::cmd("HGETALL")
        .arg(&run.done)
        .query_async(&mut conn)
        .await
        .unwrap();
    // Each job's attempts made and started, and its stalls, as BullMQ keeps them.
    let mut fields = redis::pipe();
    for id in &ids {
        fields
            .cmd("HMGET")
            .arg(run.key(id))
            .arg(&["atm", "ats", "stc"][..]);
    }
    let fields: Vec<Vec<Option<u64>>> = fields.query_async(&mut conn).await.unwrap();
    let fields: HashMap<&String, &Vec<Option<u64>>> = ids.iter().zip(&fields).collect();

    let job_runs: usize = seen.starts.iter().map(|s| s.ids.len()).sum();
    let killed_jobs: usize = kills.iter().map(|k| k.batch.ids.len()).sum();
    let recovered_runs: usize = seen.starts.iter().map(|s| s.recovered.len()).sum();
    println!(
        "batch chaos: {JOBS} jobs, {WORKERS} worker processes, {} batches, {job_runs} job runs, \
         {recovered_runs} of them recoveries, {wall:.1?}\n\
         kills: {}\nfinal counts: {counts:?}",
        seen.starts.len(),
        kills
            .iter()
            .map(|k| format!(
                "{} jobs ({} recovered) {} ms into the batch",
                k.batch.ids.len(),
                k.batch.recovered.len(),
                k.after_ms
            ))
            .collect::<Vec<_>>()
            .join("; "),
    );

    assert_eq!(counts.completed, JOBS, "every job completed: {counts:?}");
    assert_eq!(counts.failed, 0, "nothing failed: {counts:?}");
    assert_eq!(counts.unfinished(), 0, "nothing left behind: {counts:?}");

    // Each job counted done exactly once, and nothing else counted.
    let not_once: Vec<(&String, Option<&u64>)> = ids
        .iter()
        .map(|id| (id, done.get(id)))
        .filter(|(_, n)| *n != Some(&1))
        .collect();
    assert!(
        not_once.is_empty(),
        "jobs not counted done exactly once: {not_once:?}"
    );
    assert_eq!(done.len(), ids.len(), "only the run's jobs were counted");

    // The kills happened, each in the middle of a batch's work.
    assert_eq!(
        kills.len(),
        KILLS + 1,
        "{KILLS} batches killed, and one of a job already recovered"
    );
    assert!(
        kills.iter().all(|k| k.after_ms < WORK.as_millis() as u64),
        "every kill came before its batch's count"
    );

    // Every batch either counted its jobs or was killed, and a killed batch's jobs
    // were counted by a later batch of another process, which ran them as recovered.
    let killed: HashSet<(u32, u64)> = kills.iter().map(|k| (k.batch.pid, k.batch.seq)).collect();
    for s in &seen.starts {
        let key = (s.pid, s.seq);
        assert!(
            seen.ended.contains(&key) != killed.contains(&key),
            "batch {}/{} ended: {}, killed: {}",
            s.pid,
            s.seq,
            seen.ended.contains(&key),
            killed.contains(&key)
        );
    }
    let counted_by: HashMap<&String, &Started> = seen
        .starts
        .iter()
        .filter(|s| seen.ended.contains(&(s.pid, s.seq)))
        .flat_map(|s| s.ids.iter().map(move |id| (id, s)))
        .collect();
    for kill in &kills {
        for id in &kill.batch.ids {
            let counter = counted_by[id];
            assert_ne!(
                counter.pid, kill.batch.pid,
                "{id} counted by the dead process"
            );
            assert!(
                counter.recovered.contains(id),
                "{id}'s counting run knew it was a recovery: {counter:?}"
            );
            let fields = fields[id];
            assert!(
                fields[1].unwrap_or(0) >= 2,
                "{id}'s runs were all started: {fields:?} (atm, ats, stc)"
            );
        }
    }
    assert_eq!(
        job_runs,
        ids.len() + killed_jobs,
        "every job ran once, and once more for each kill of its batch"
    );
    // A lost run is no attempt: every job completed on its first.
    let not_first: Vec<(&String, &Vec<Option<u64>>)> = fields
        .iter()
        .filter(|(_, f)| f[0] != Some(1))
        .map(|(id, f)| (*id, *f))
        .collect();
    assert!(
        not_first.is_empty(),
        "jobs whose attempts made are not 1 (atm, ats, stc): {not_first:?}"
    );
}

/// What Redis holds for every job not completed: the fields that say where it is, its
/// lock, and the lists it sits in. Printed when the run does not finish.
async fn unfinished_jobs(run: &Run, ids: &[String]) -> String {
    let Ok(mut admin) =
        redis::Client::open(run.redis_url.as_str()).and_then(|c| c.get_connection())
    else {
        return "(no connection to read the state)".into();
    };
    let read = |cmd: &mut redis::Cmd, admin: &mut redis::Connection| -> String {
        cmd.query::<redis::Value>(admin)
            .map_or_else(|e| format!("error: {e}"), |v| format!("{v:?}"))
    };
    let mut out = String::new();
    for list in ["active", "wait"] {
        let cmd = &mut redis::cmd("LRANGE");
        out += &format!(
            "{list}: {}\n",
            read(cmd.arg(run.key(list)).arg(0).arg(-1), &mut admin)
        );
    }
    out += &format!(
        "stalled: {}\n",
        read(redis::cmd("SMEMBERS").arg(run.key("stalled")), &mut admin)
    );
    let completed: HashSet<String> = redis::cmd("ZRANGE")
        .arg(run.key("completed"))
        .arg(0)
        .arg(-1)
        .query(&mut admin)
        .unwrap_or_default();
    for id in ids.iter().filter(|id| !completed.contains(*id)) {
        let fields = &[
            "processedOn",
            "finishedOn",
            "atm",
            "ats",
            "stc",
            "failedReason",
        ][..];
        out += &format!(
            "job {id}: {} lock {} ttl {} done {}\n",
            read(redis::cmd("HMGET").arg(run.key(id)).arg(fields), &mut admin),
            read(
                redis::cmd("GET").arg(run.key(&format!("{id}:lock"))),
                &mut admin
            ),
            read(
                redis::cmd("PTTL").arg(run.key(&format!("{id}:lock"))),
                &mut admin
            ),
            read(redis::cmd("HGET").arg(&run.done).arg(id), &mut admin),
        );
    }
    out
}
