//! Shared helpers of the end-to-end tests: the Redis URL, a private key prefix per test
//! (deleted when the test ends, even by a panic), and waiting on a condition.

use std::future::Future;
use std::time::{Duration, Instant};

use queue_core::app::Registrations;
use queue_core::{testing, QueueApp, QueueAppBuilder};

pub mod batch_chaos;
mod bench_figures;
pub mod chaos;
mod cluster;
pub mod db;
mod doc_pages;
pub mod fixtures;
pub mod group_chaos;
pub mod http;
pub mod logs;
pub mod node;
mod private_redis;
pub mod python;
pub mod sentinel;

pub use cluster::{ClusterSecurity, RedisCluster};
/// The loopback fault proxy (`tools/fault-proxy`), as the tests name it.
pub use fault_proxy;
pub use private_redis::{command_calls, free_port, PrivateRedis};

/// `REDIS_URL`, or the local default.
pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| queue_core::app::DEFAULT_REDIS_URL.to_owned())
}

/// `REDIS_CLUSTER_NODES`, comma-separated seed URLs: when set, every [`TestRedis`] runs
/// on that Redis Cluster instead of `REDIS_URL` (`scripts/test.sh` runs the core of the
/// suite so, on a private cluster).
pub fn cluster_nodes() -> Option<Vec<String>> {
    let nodes = std::env::var("REDIS_CLUSTER_NODES").ok()?;
    let nodes: Vec<String> = nodes
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    (!nodes.is_empty()).then_some(nodes)
}

/// A builder pointed at the test Redis, or at the cluster of [`cluster_nodes`]: for
/// the helper processes, which get the test's prefix from their environment.
///
/// It starts with [`Registrations::None`]: a test binary holds the records of many
/// tests (an area's), so an app names the queues whose records it uses
/// (`Registrations::of::<Q>()`) or gives its processors to the builder.
pub fn redis_builder() -> QueueAppBuilder {
    let builder = match cluster_nodes() {
        Some(nodes) => QueueApp::builder().redis_cluster(nodes),
        None => QueueApp::builder().redis(redis_url()),
    };
    builder.registrations(Registrations::None)
}

/// A test's private corner of Redis: a unique prefix whose keys are deleted on drop. On
/// a cluster ([`cluster_nodes`]) the prefix is a hash tag, `{test-...}`: every key of the
/// test in one slot, as BullMQ needs.
#[derive(Debug)]
pub struct TestRedis {
    prefix: String,
}

impl TestRedis {
    /// A new unique prefix, labelled for debugging.
    pub fn new(label: &str) -> Self {
        let prefix = testing::unique_prefix(label);
        TestRedis {
            prefix: match cluster_nodes() {
                Some(_) => format!("{{{prefix}}}"),
                None => prefix,
            },
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A builder already pointed at the test Redis and prefix.
    pub fn builder(&self) -> QueueAppBuilder {
        redis_builder().prefix(self.prefix.clone())
    }

    /// Builds an app from [`TestRedis::builder`] after `configure`.
    pub async fn app(
        &self,
        configure: impl FnOnce(QueueAppBuilder) -> QueueAppBuilder,
    ) -> QueueApp {
        configure(self.builder())
            .build()
            .await
            .expect("test app builds")
    }

    /// Keys under this prefix right now.
    pub fn keys(&self) -> Vec<String> {
        let mut conn = sync_connection();
        redis::cmd("KEYS")
            .arg(format!("{}:*", self.prefix))
            .query(&mut *conn)
            .expect("KEYS")
    }

    /// The keys under this prefix whose values hold `text` in clear, read as a client
    /// reads them by type (a hash's fields and values, a list's, set's or sorted set's
    /// members, a stream's entries): what someone reading Redis would find. (Not
    /// `DUMP`: its RDB form compresses long strings, which would hide a value.)
    pub fn keys_holding(&self, text: &str) -> Vec<String> {
        let mut conn = sync_connection();
        let needle = text.as_bytes();
        let holds = |values: Vec<Vec<u8>>| {
            values
                .iter()
                .any(|v| v.windows(needle.len().max(1)).any(|w| w == needle))
        };
        self.keys()
            .into_iter()
            .filter(|key| {
                let kind: String = redis::cmd("TYPE")
                    .arg(key)
                    .query(&mut *conn)
                    .unwrap_or_default();
                let read = |cmd: &mut redis::Cmd, conn: &mut dyn redis::ConnectionLike| {
                    cmd.query::<Vec<Vec<u8>>>(conn).unwrap_or_default()
                };
                let values = match kind.as_str() {
                    "string" => read(redis::cmd("GET").arg(key), &mut *conn),
                    "hash" => read(redis::cmd("HGETALL").arg(key), &mut *conn),
                    "list" => read(redis::cmd("LRANGE").arg(key).arg(0).arg(-1), &mut *conn),
                    "set" => read(redis::cmd("SMEMBERS").arg(key), &mut *conn),
                    "zset" => read(redis::cmd("ZRANGE").arg(key).arg(0).arg(-1), &mut *conn),
                    "stream" => {
                        let entries: redis::Value = redis::cmd("XRANGE")
                            .arg(key)
                            .arg("-")
                            .arg("+")
                            .query(&mut *conn)
                            .unwrap_or(redis::Value::Nil);
                        vec![format!("{entries:?}").into_bytes()]
                    }
                    _ => Vec::new(),
                };
                holds(values)
            })
            .collect()
    }

    /// Reads one field of a job's hash directly, as another BullMQ client would.
    pub fn job_field(&self, queue: &str, id: &str, field: &str) -> Option<String> {
        let mut conn = sync_connection();
        redis::cmd("HGET")
            .arg(format!("{}:{queue}:{id}", self.prefix))
            .arg(field)
            .query(&mut *conn)
            .expect("HGET")
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        // Synchronous on purpose: it also runs while a failed test unwinds.
        let mut conn = sync_connection();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:*", self.prefix))
            .query(&mut *conn)
            .unwrap_or_default();
        if !keys.is_empty() {
            let _: Result<u64, _> = redis::cmd("DEL").arg(&keys).query(&mut *conn);
        }
    }
}

/// A blocking connection to the test Redis, or to the cluster of [`cluster_nodes`], for
/// tests that read or write keys as another client would (on a cluster, `KEYS` goes to
/// every master; a test's keys share one slot, so one `DEL` takes them all).
pub fn sync_connection() -> Box<dyn redis::ConnectionLike> {
    match cluster_nodes() {
        Some(nodes) => Box::new(
            redis::cluster::ClusterClient::new(nodes)
                .and_then(|c| c.get_connection())
                .expect("the test cluster answers"),
        ),
        None => Box::new(
            redis::Client::open(redis_url())
                .and_then(|c| c.get_connection())
                .expect("the test Redis answers"),
        ),
    }
}

/// An async connection to the test Redis, or to the cluster of [`cluster_nodes`].
pub async fn async_connection() -> AnyConnection {
    match cluster_nodes() {
        Some(nodes) => AnyConnection::Cluster(
            redis::cluster::ClusterClient::new(nodes)
                .expect("the cluster's seed URLs")
                .get_async_connection()
                .await
                .expect("the test cluster answers"),
        ),
        None => AnyConnection::Single(
            redis::Client::open(redis_url())
                .expect("REDIS_URL")
                .get_multiplexed_async_connection()
                .await
                .expect("the test Redis answers"),
        ),
    }
}

/// What [`async_connection`] gives: one server's connection, or a cluster's.
#[derive(Clone)]
#[allow(missing_debug_implementations)] // The cluster connection has no `Debug`.
pub enum AnyConnection {
    /// One server.
    Single(redis::aio::MultiplexedConnection),
    /// A cluster: each command goes to its slot's master.
    Cluster(redis::cluster_async::ClusterConnection),
}

impl redis::aio::ConnectionLike for AnyConnection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            AnyConnection::Single(c) => c.req_packed_command(cmd),
            AnyConnection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            AnyConnection::Single(c) => c.req_packed_commands(cmd, offset, count),
            AnyConnection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            AnyConnection::Single(c) => c.get_db(),
            AnyConnection::Cluster(c) => c.get_db(),
        }
    }
}

/// Polls `condition` every 20 ms until it returns `Some`, or panics after `deadline`
/// with `what` in the message.
pub async fn wait_until<T, F, Fut>(deadline: Duration, what: &str, mut condition: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = condition().await {
            return value;
        }
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `queue`'s job `id` reaches `state`.
pub async fn wait_for_state<T>(
    queue: &queue_core::Queue<T>,
    id: &str,
    state: queue_core::JobState,
    deadline: Duration,
) {
    wait_until(deadline, &format!("job {id} to be {state}"), || async {
        (queue.get_job_state(id).await.expect("state") == Some(state)).then_some(())
    })
    .await;
}

/// Waits until `queue` holds exactly `count` completed jobs.
pub async fn wait_for_completed<T>(queue: &queue_core::Queue<T>, count: u64, deadline: Duration) {
    wait_until(deadline, &format!("{count} completed jobs"), || async {
        (queue.get_job_counts().await.expect("counts").completed == count).then_some(())
    })
    .await;
}

/// The generous deadline for things that should take well under a second.
pub const SOON: Duration = Duration::from_secs(10);
