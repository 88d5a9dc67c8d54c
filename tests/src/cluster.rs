//! A private Redis Cluster on loopback: three masters with one replica each, six
//! `redis-server` processes on free ports, made with `redis-cli --cluster create` and
//! stopped by pid on drop. The shared Redis is never touched.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::private_redis::{scratch_dir, wait_for_port, TlsFiles};

/// One node of a [`RedisCluster`].
#[derive(Debug)]
struct Node {
    port: u16,
    child: Option<Child>,
}

/// How a [`RedisCluster`] is secured.
#[derive(Debug, Clone, Default)]
pub struct ClusterSecurity {
    /// An ACL user, `(name, password)`, allowed everything; the default user is off.
    pub acl_user: Option<(String, String)>,
    /// TLS only (clients, the cluster bus and replication), with a throw-away CA.
    pub tls: bool,
}

/// A running cluster; every process is killed (SIGKILL) and its directory removed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: std::path::PathBuf,
    security: ClusterSecurity,
    /// What `redis-cli` needs to reach a node: credentials, TLS.
    cli_args: Vec<String>,
}

impl RedisCluster {
    /// Three masters and three replicas, the cluster's state `ok` on every node.
    pub fn start() -> Self {
        Self::start_with(3, 1)
    }

    /// `masters` masters with `replicas` replicas each.
    pub fn start_with(masters: usize, replicas: usize) -> Self {
        Self::start_secured(masters, replicas, ClusterSecurity::default())
    }

    /// `masters` masters with `replicas` replicas each, secured as `security` says.
    pub fn start_secured(masters: usize, replicas: usize, security: ClusterSecurity) -> Self {
        let dir = scratch_dir("cluster");
        let mut server_args: Vec<String> = Vec::new();
        let mut cli_args: Vec<String> = Vec::new();
        if let Some((user, password)) = &security.acl_user {
            // Each word its own argument: redis-server joins them into one directive.
            server_args.extend([
                "--user".to_owned(),
                user.clone(),
                "on".to_owned(),
                format!(">{password}"),
                "~*".to_owned(),
                "&*".to_owned(),
                "+@all".to_owned(),
                "--user".to_owned(),
                "default".to_owned(),
                "off".to_owned(),
                "--masteruser".to_owned(),
                user.clone(),
                "--masterauth".to_owned(),
                password.clone(),
            ]);
            cli_args.extend([
                "--user".to_owned(),
                user.clone(),
                "--pass".to_owned(),
                password.clone(),
            ]);
            cli_args.push("--no-auth-warning".to_owned());
        }
        if security.tls {
            let certs = TlsFiles::make(&dir);
            server_args.extend(certs.server_args());
            server_args
                .extend(["--tls-cluster", "yes", "--tls-replication", "yes"].map(str::to_owned));
            cli_args.extend([
                "--tls".to_owned(),
                "--cacert".to_owned(),
                certs.ca().to_owned(),
            ]);
        }
        let mut nodes = Vec::new();
        for _ in 0..masters * (1 + replicas) {
            let port = cluster_port();
            let node_dir = dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir).expect("node dir");
            let listen = if security.tls {
                [
                    "--port".to_owned(),
                    "0".to_owned(),
                    "--tls-port".to_owned(),
                    port.to_string(),
                ]
            } else {
                [
                    "--port".to_owned(),
                    port.to_string(),
                    "--tls-port".to_owned(),
                    "0".to_owned(),
                ]
            };
            let child = Command::new("redis-server")
                .args(&listen)
                .args(["--bind", "127.0.0.1"])
                .args(&server_args)
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
        let cluster = RedisCluster {
            nodes,
            dir,
            security,
            cli_args,
        };
        let mut create = Command::new("redis-cli");
        create
            .args(&cluster.cli_args)
            .arg("--cluster")
            .arg("create");
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

    /// Seed URLs of every node, as `QueueAppBuilder::redis_cluster` takes them (with
    /// the ACL user's credentials, and `rediss://` for TLS).
    pub fn nodes(&self) -> Vec<String> {
        let scheme = if self.security.tls { "rediss" } else { "redis" };
        let auth = match &self.security.acl_user {
            Some((user, password)) => format!("{user}:{password}@"),
            None => String::new(),
        };
        self.nodes
            .iter()
            .map(|n| format!("{scheme}://{auth}127.0.0.1:{}", n.port))
            .collect()
    }

    /// The PEM of the CA that signed a TLS cluster's certificates.
    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("ca.crt")).expect("a TLS cluster has a CA")
    }

    /// `CLUSTER INFO`'s `cluster_state:ok`, and every slot served, on every live node;
    /// every replica synced with its master.
    pub fn wait_until_ok(&self, deadline: Duration) {
        let started = Instant::now();
        loop {
            let ok = self.live_ports().iter().all(|port| {
                let info = self.cli(*port, &["cluster", "info"]);
                let replication = self.cli(*port, &["info", "replication"]);
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
        let nodes = self.cli(self.live_ports()[0], &["cluster", "nodes"]);
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
        self.cli(self.live_ports()[0], &["cluster", "keyslot", key])
            .trim()
            .parse()
            .expect("CLUSTER KEYSLOT answers a number")
    }

    /// How many clients of the node on `port` subscribe to `channel` (`PUBSUB NUMSUB`
    /// counts a node's own).
    pub fn subscribers(&self, port: u16, channel: &str) -> u64 {
        let out = self.cli(port, &["pubsub", "numsub", channel]);
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

/// A free port whose cluster bus port (10000 higher) is free too, both below Linux's
/// ephemeral ports (32768 and up: there an outgoing connection can hold a port the bind
/// check does not see, and the node fails to start). Handed out once per process, so
/// that clusters started at once never pick the same port before its server binds it.
fn cluster_port() -> u16 {
    static NEXT: std::sync::Mutex<u16> = std::sync::Mutex::new(0);
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    let mut next = NEXT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *next == 0 {
        // Processes (test binaries) running at once start far apart.
        *next = 10000 + (std::process::id() % 12) as u16 * 1000;
    }
    loop {
        let candidate = *next;
        *next = if candidate >= 22000 {
            10000
        } else {
            candidate + 1
        };
        if free(candidate) && free(candidate + 10000) {
            return candidate;
        }
    }
}

impl RedisCluster {
    /// `redis-cli -p <port> <args>`'s output ("" when it cannot connect).
    fn cli(&self, port: u16, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(&self.cli_args)
            .args(["-p", &port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}
