//! The transactional outbox: how long a committed job takes to reach Redis (PostgreSQL,
//! woken by NOTIFY; SQLite, woken by the commit hook), and how fast a relay moves a
//! backlog, against plain `add_bulk` of the same jobs in the same run.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

use queue_core::{app::Registrations, queue::BulkJob, store::Outbox, JobOptions, Queue, QueueApp};
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

use super::redis::BenchRedis;
use super::stats::{median, percentile};
use super::Settings;
use crate::BenchResult;

const QUEUE: &str = "bench-outbox";
/// Rows per transaction when writing a backlog, and jobs per `add_bulk` call.
const BATCH: usize = 500;

/// The database a run uses: a fresh SQLite file or PostgreSQL database, removed after.
enum Db {
    Sqlite(PathBuf, sqlx::SqlitePool),
    Postgres(String, sqlx::PgPool),
}

fn postgres_admin_url() -> String {
    std::env::var("PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

impl Db {
    async fn sqlite() -> BenchResult<Self> {
        let path =
            std::env::temp_dir().join(format!("queue-bench-{}.db", uuid::Uuid::new_v4().simple()));
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        Ok(Db::Sqlite(path, pool))
    }

    async fn postgres() -> BenchResult<Self> {
        let name = format!(
            "queue_bench_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&postgres_admin_url())
            .await?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&admin)
            .await?;
        let url = match postgres_admin_url().rsplit_once('/') {
            Some((base, _)) => format!("{base}/{name}"),
            None => return Err("PG_URL has no database part".into()),
        };
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .connect(&url)
            .await?;
        Ok(Db::Postgres(name, pool))
    }

    fn label(&self) -> &'static str {
        match self {
            Db::Sqlite(..) => "SQLite (commit hook)",
            Db::Postgres(..) => "PostgreSQL (NOTIFY)",
        }
    }

    fn outbox(&self) -> Outbox {
        match self {
            Db::Sqlite(_, pool) => Outbox::new(pool.clone()),
            Db::Postgres(_, pool) => Outbox::new(pool.clone()),
        }
    }

    /// Writes `jobs` in one transaction through the outbox.
    async fn commit(&self, queue: &Queue<u64>, jobs: &[u64]) -> BenchResult<()> {
        macro_rules! write {
            ($pool:expr) => {{
                let mut tx = $pool.begin().await?;
                for n in jobs {
                    queue
                        .add_in(
                            &mut *tx,
                            "job",
                            *n,
                            JobOptions::new().job_id(format!("job-{n}")),
                        )
                        .await?;
                }
                tx.commit().await?;
            }};
        }
        match self {
            Db::Sqlite(_, pool) => write!(pool),
            Db::Postgres(_, pool) => write!(pool),
        }
        Ok(())
    }

    async fn remove(self) -> BenchResult<()> {
        match self {
            Db::Sqlite(path, pool) => {
                pool.close().await;
                for suffix in ["", "-wal", "-shm"] {
                    let mut file = path.clone().into_os_string();
                    file.push(suffix);
                    let _ = std::fs::remove_file(file);
                }
            }
            Db::Postgres(name, pool) => {
                pool.close().await;
                let admin = PgPoolOptions::new()
                    .max_connections(1)
                    .connect(&postgres_admin_url())
                    .await?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&admin)
                    .await?;
            }
        }
        Ok(())
    }
}

async fn app(redis_url: &str, outbox: Outbox) -> BenchResult<QueueApp> {
    Ok(QueueApp::builder()
        .redis(redis_url)
        .registrations(Registrations::None)
        .outbox(outbox)
        .build()
        .await?)
}

/// Microseconds from each commit until its job is in Redis, one job at a time.
async fn latency(db: &Db, redis_url: &str, n: u64) -> BenchResult<Vec<u64>> {
    let app = app(redis_url, db.outbox()).await?;
    let queue = app.queue::<u64>(QUEUE)?;
    let client = redis::Client::open(redis_url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut samples = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    for i in 0..n {
        db.commit(&queue, &[i]).await?;
        let committed = Instant::now();
        let key = format!("bull:{QUEUE}:job-{i}");
        loop {
            let there: bool = redis::cmd("EXISTS")
                .arg(&key)
                .query_async(&mut conn)
                .await?;
            if there {
                break;
            }
            if committed.elapsed() > Duration::from_secs(10) {
                return Err(format!("job-{i} never reached Redis").into());
            }
        }
        samples.push(u64::try_from(committed.elapsed().as_micros()).unwrap_or(u64::MAX));
    }
    app.stop_relay().await;
    Ok(samples)
}

/// Seconds a relay takes to move `rows` committed rows into Redis.
async fn relay_backlog(db: &Db, redis: &mut BenchRedis, rows: u64) -> BenchResult<f64> {
    let app = app(&redis.url(), db.outbox().start_relay(false)).await?;
    let queue = app.queue::<u64>(QUEUE)?;
    let all: Vec<u64> = (0..rows).collect();
    for chunk in all.chunks(BATCH) {
        db.commit(&queue, chunk).await?;
    }
    let started = Instant::now();
    let relay = app.start_relay()?;
    while redis.waiting(QUEUE)? < rows {
        if started.elapsed() > Duration::from_secs(300) {
            return Err("the relay did not finish within 5 minutes".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    relay.shutdown().await;
    Ok(seconds)
}

/// Seconds plain `add_bulk` takes for the same jobs, in the same batches.
async fn add_bulk(redis: &mut BenchRedis, rows: u64) -> BenchResult<f64> {
    let app = QueueApp::builder()
        .redis(redis.url())
        .registrations(Registrations::None)
        .build()
        .await?;
    let queue = app.queue::<u64>(QUEUE)?;
    let all: Vec<u64> = (0..rows).collect();
    let started = Instant::now();
    for chunk in all.chunks(BATCH) {
        let jobs = chunk
            .iter()
            .map(|n| BulkJob::new("job", *n).options(JobOptions::new().job_id(format!("job-{n}"))))
            .collect();
        queue.add_bulk(jobs).await?;
    }
    Ok(started.elapsed().as_secs_f64())
}

pub(super) fn measure(redis: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut out = String::from(
        "### Transactional outbox\n\n\
         Commit to job in Redis, one job per transaction (µs), and a backlog moved by one relay \
         against plain `add_bulk` of the same jobs in batches of 500 (jobs/s, median of the rounds).\n\n\
         | database | commit→Redis p50 | p99 | relay | add_bulk | relay/add_bulk |\n\
         |---|---|---|---|---|---|\n",
    );
    for postgres in [true, false] {
        let (mut lat, mut relayed, mut bulk) = (Vec::new(), Vec::new(), Vec::new());
        let mut label = "";
        for round in 0..settings.rounds {
            let db = runtime.block_on(async {
                if postgres {
                    Db::postgres().await
                } else {
                    Db::sqlite().await
                }
            })?;
            label = db.label();
            redis.flush()?;
            lat.extend(runtime.block_on(latency(&db, &redis.url(), settings.latency_jobs))?);
            // Alternate which of the two runs first.
            let mut pair = [None, None];
            for which in if round % 2 == 0 { [0, 1] } else { [1, 0] } {
                redis.flush()?;
                pair[which] = Some(if which == 0 {
                    runtime.block_on(relay_backlog(&db, redis, settings.jobs))?
                } else {
                    runtime.block_on(add_bulk(redis, settings.jobs))?
                });
            }
            relayed.push(settings.jobs as f64 / pair[0].unwrap_or(f64::NAN));
            bulk.push(settings.jobs as f64 / pair[1].unwrap_or(f64::NAN));
            runtime.block_on(db.remove())?;
            eprintln!(
                "outbox {label} round {round}: relay {:?} add_bulk {:?}",
                relayed.last(),
                bulk.last()
            );
        }
        let (relay, plain) = (median(&relayed), median(&bulk));
        out.push_str(&format!(
            "| {label} | {} | {} | {relay:.0} | {plain:.0} | {:.2} |\n",
            percentile(&lat, 50.0),
            percentile(&lat, 99.0),
            relay / plain
        ));
    }
    out.push('\n');
    Ok(out)
}
