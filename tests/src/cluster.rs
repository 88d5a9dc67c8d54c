//! A private Redis Cluster on loopback: three masters with one replica each, six
//! `redis-server` processes on free ports, made with `redis-cli --cluster create` and
//! stopped by pid on drop. The shared Redis is never touched.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::private_redis::{scratch_dir, wait_for_port};

/// One node of a [`RedisCluster`].
#[derive(Debug)]
struct Node {
    port: u16,
    child: Option<Child>,
}

/// A running cluster; every process is killed (SIGKILL) and its directory removed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: std::path::PathBuf,
}

impl RedisCluster {
    /// Three masters and three replicas, the cluster's state `ok` on every node.
    pub fn start() -> Self {
        Self::start_with(3, 1)
    }

    /// `masters` masters with `replicas` replicas each.
    pub fn start_with(masters: usize, replicas: usize) -> Self {
        let dir = scratch_dir("cluster");
        let mut nodes = Vec::new();
        for _ in 0..masters * (1 + replicas) {
            let port = cluster_port();
            let node_dir = dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir).expect("node dir");
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args([
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ])
                // Quick failover for the tests: a master is failed after 2 s of silence.
                .args(["--cluster-node-timeout", "2000"])
                // A replica's first sync at once (Redis waits 5 s by default): one that
                // has never synced cannot take over.
                .args(["--repl-diskless-sync-delay", "0"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&node_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server starts (scripts/test.sh installs it)");
            nodes.push(Node {
                port,
                child: Some(child),
            });
        }
        for node in &nodes {
            wait_for_port(node.port);
        }
        let cluster = RedisCluster { nodes, dir };
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &cluster.nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        let status = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli runs");
        assert!(status.success(), "redis-cli --cluster create failed");
        cluster.wait_until_ok(Duration::from_secs(30));
        cluster
    }

    /// Seed URLs of every node, as `QueueAppBuilder::redis_cluster` takes them.
    pub fn nodes(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect()
    }

    /// `CLUSTER INFO`'s `cluster_state:ok`, and every slot served, on every live node;
    /// every replica synced with its master.
    pub fn wait_until_ok(&self, deadline: Duration) {
        let started = Instant::now();
        loop {
            let ok = self.live_ports().iter().all(|port| {
                let info = cli(*port, &["cluster", "info"]);
                let replication = cli(*port, &["info", "replication"]);
                info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_ok:16384")
                    && (replication.contains("role:master")
                        || replication.contains("master_link_status:up"))
            });
            if ok {
                return;
            }
            assert!(
                started.elapsed() < deadline,
                "the cluster did not reach state ok within {deadline:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
            .collect()
    }

    /// The port of the master that serves `slot` now.
    pub fn master_of_slot(&self, slot: u16) -> u16 {
        // `CLUSTER NODES`: one line per node, its slot ranges last.
        let nodes = cli(self.live_ports()[0], &["cluster", "nodes"]);
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 9 || !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let serves = fields[8..].iter().any(|range| {
                let (start, end) = range.split_once('-').unwrap_or((range, range));
                match (start.parse::<u16>(), end.parse::<u16>()) {
                    (Ok(start), Ok(end)) => (start..=end).contains(&slot),
                    _ => false,
                }
            });
            if serves {
                let addr = fields[1].split('@').next().unwrap_or_default();
                let port = addr.rsplit(':').next().unwrap_or_default();
                return port.parse().expect("a port in CLUSTER NODES");
            }
        }
        panic!("no live master serves slot {slot}:\n{nodes}");
    }

    /// The slot of `key`, as the cluster computes it.
    pub fn key_slot(&self, key: &str) -> u16 {
        cli(self.live_ports()[0], &["cluster", "keyslot", key])
            .trim()
            .parse()
            .expect("CLUSTER KEYSLOT answers a number")
    }

    /// How many clients of the node on `port` subscribe to `channel` (`PUBSUB NUMSUB`
    /// counts a node's own).
    pub fn subscribers(&self, port: u16, channel: &str) -> u64 {
        let out = cli(port, &["pubsub", "numsub", channel]);
        out.lines()
            .nth(1)
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Kills (SIGKILL) the node on `port`; returns when it has exited.
    pub fn kill(&mut self, port: u16) {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a node of this cluster");
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A free port whose cluster bus port (10000 higher, so at most 55535) is free too.
/// Handed out once per process, so that clusters started at once never pick the same
/// port before its server binds it.
fn cluster_port() -> u16 {
    static NEXT: std::sync::Mutex<u16> = std::sync::Mutex::new(0);
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    let mut next = NEXT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *next == 0 {
        // Processes (test binaries) running at once start far apart.
        *next = 20000 + (std::process::id() % 25) as u16 * 1000;
    }
    loop {
        let candidate = *next;
        *next = if candidate >= 45000 {
            20000
        } else {
            candidate + 1
        };
        if free(candidate) && free(candidate + 10000) {
            return candidate;
        }
    }
}

/// `redis-cli -p <port> <args>`'s output ("" when it cannot connect).
fn cli(port: u16, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}
