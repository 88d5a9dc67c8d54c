//! A private Redis Sentinel deployment on loopback: one master, one replica and three
//! sentinels (`redis-server --sentinel`), each a process of its own on a free port,
//! killed by pid on drop. The shared Redis is never touched.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::private_redis::{scratch_dir, wait_for_port, TlsFiles};

/// The name the sentinels monitor the master under.
pub const MASTER_NAME: &str = "mymaster";

/// How a [`RedisSentinel`] is secured.
#[derive(Debug, Clone, Default)]
pub struct SentinelSecurity {
    /// An ACL user of the master and replica, `(name, password)`, allowed everything but
    /// `ROLE`, an admin command a locked-down user may lack (the default user stays on
    /// for replication and the sentinels, with a password of its own).
    pub acl_user: Option<(String, String)>,
    /// The password of the sentinels themselves (`requirepass` in their config).
    pub sentinel_password: Option<String>,
    /// TLS only, everywhere: clients, replication, sentinels; a throw-away CA.
    pub tls: bool,
}

/// The default user's password on the data nodes of a secured deployment (replication
/// and the sentinels use it).
const DATA_PASSWORD: &str = "data-s3cret";

/// One process of the deployment.
#[derive(Debug)]
struct Process {
    port: u16,
    child: Option<Child>,
}

impl Process {
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A master, its replica and three sentinels with a quick failover (`down-after` 1 s).
#[derive(Debug)]
pub struct RedisSentinel {
    /// `[0]` the first master, `[1]` its replica.
    data: Vec<Process>,
    sentinels: Vec<Process>,
    dir: PathBuf,
    security: SentinelSecurity,
    /// What `redis-cli` needs to reach a data node, and a sentinel.
    data_cli: Vec<String>,
    sentinel_cli: Vec<String>,
}

/// The sentinels' failover settings: a master silent for `DOWN_AFTER` is down; a
/// failover that stalls is retried after twice `FAILOVER_TIMEOUT`.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);
/// See [`DOWN_AFTER`].
pub const FAILOVER_TIMEOUT: Duration = Duration::from_millis(5000);

impl RedisSentinel {
    /// Plain TCP, no passwords.
    pub fn start() -> Self {
        Self::start_secured(SentinelSecurity::default())
    }

    /// Secured as `security` says. Returns once the replica has synced and every
    /// sentinel knows the replica and the two other sentinels.
    pub fn start_secured(security: SentinelSecurity) -> Self {
        let dir = scratch_dir("sentinel");
        let mut common: Vec<String> = Vec::new();
        let mut data_args: Vec<String> = Vec::new();
        let mut data_cli: Vec<String> = vec!["--no-auth-warning".to_owned()];
        let mut sentinel_cli: Vec<String> = vec!["--no-auth-warning".to_owned()];
        let secured = security.acl_user.is_some() || security.sentinel_password.is_some();
        if secured {
            data_args.extend(
                [
                    "--requirepass",
                    DATA_PASSWORD,
                    "--masterauth",
                    DATA_PASSWORD,
                ]
                .map(str::to_owned),
            );
            data_cli.extend(["-a".to_owned(), DATA_PASSWORD.to_owned()]);
        }
        if let Some((user, password)) = &security.acl_user {
            // Each word its own argument: redis-server joins them into one directive.
            data_args.extend([
                "--user".to_owned(),
                user.clone(),
                "on".to_owned(),
                format!(">{password}"),
                "~*".to_owned(),
                "&*".to_owned(),
                "+@all".to_owned(),
                "-role".to_owned(),
            ]);
        }
        if let Some(password) = &security.sentinel_password {
            sentinel_cli.extend(["-a".to_owned(), password.clone()]);
        }
        if security.tls {
            let certs = TlsFiles::make(&dir);
            common.extend(certs.server_args());
            common.extend(["--tls-replication", "yes"].map(str::to_owned));
            for cli in [&mut data_cli, &mut sentinel_cli] {
                cli.extend([
                    "--tls".to_owned(),
                    "--cacert".to_owned(),
                    certs.ca().to_owned(),
                ]);
            }
        }

        let master_port = loopback_port();
        let replica_port = loopback_port();
        let mut data = Vec::new();
        for (port, replica_of) in [(master_port, None), (replica_port, Some(master_port))] {
            let node_dir = dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir).expect("node dir");
            let mut command = Command::new("redis-server");
            command
                .args(listen_args(port, security.tls))
                .args(["--bind", "127.0.0.1"])
                .args(&common)
                .args(&data_args)
                // The replica's first sync at once (Redis waits 5 s by default).
                .args(["--repl-diskless-sync-delay", "0"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&node_dir);
            if let Some(master) = replica_of {
                command.args(["--replicaof", "127.0.0.1", &master.to_string()]);
            }
            data.push(Process {
                port,
                child: Some(spawn(&mut command)),
            });
            wait_for_port(port);
        }
        let mut deployment = RedisSentinel {
            data,
            sentinels: Vec::new(),
            dir,
            security,
            data_cli,
            sentinel_cli,
        };
        deployment.wait(Duration::from_secs(20), "the replica to sync", |d| {
            d.data_cli(replica_port, &["info", "replication"])
                .contains("master_link_status:up")
        });

        for _ in 0..3 {
            let port = loopback_port();
            let config = deployment.sentinel_config(port, master_port);
            let path = deployment.dir.join(format!("sentinel-{port}.conf"));
            std::fs::write(&path, config).expect("write the sentinel's config");
            let mut command = Command::new("redis-server");
            command.arg(&path).arg("--sentinel");
            deployment.sentinels.push(Process {
                port,
                child: Some(spawn(&mut command)),
            });
            wait_for_port(port);
        }
        deployment.wait(
            Duration::from_secs(30),
            "every sentinel to know the replica and the two other sentinels",
            |d| {
                d.sentinels.iter().all(|s| {
                    let master = d.sentinel_cli(s.port, &["sentinel", "master", MASTER_NAME]);
                    field(&master, "num-slaves") == Some("1")
                        && field(&master, "num-other-sentinels") == Some("2")
                })
            },
        );
        deployment
    }

    fn sentinel_config(&self, port: u16, master_port: u16) -> String {
        let mut lines = vec![
            "bind 127.0.0.1".to_owned(),
            format!("dir {}", self.dir.display()),
            format!("sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2"),
            format!(
                "sentinel down-after-milliseconds {MASTER_NAME} {}",
                DOWN_AFTER.as_millis()
            ),
            format!(
                "sentinel failover-timeout {MASTER_NAME} {}",
                FAILOVER_TIMEOUT.as_millis()
            ),
            format!("sentinel parallel-syncs {MASTER_NAME} 1"),
        ];
        if self.security.tls {
            lines.push(format!("port 0\ntls-port {port}"));
            let certs = self.dir.join("redis.crt");
            let key = self.dir.join("redis.key");
            let ca = self.dir.join("ca.crt");
            lines.extend([
                format!("tls-cert-file {}", certs.display()),
                format!("tls-key-file {}", key.display()),
                format!("tls-ca-cert-file {}", ca.display()),
                "tls-auth-clients no".to_owned(),
                "tls-replication yes".to_owned(),
            ]);
        } else {
            lines.push(format!("port {port}"));
        }
        if self.security.acl_user.is_some() || self.security.sentinel_password.is_some() {
            lines.push(format!("sentinel auth-pass {MASTER_NAME} {DATA_PASSWORD}"));
        }
        if let Some(password) = &self.security.sentinel_password {
            // The sentinels' own password, which they also use with each other.
            lines.push(format!("requirepass {password}"));
            lines.push(format!("sentinel sentinel-pass {password}"));
        }
        lines.join("\n") + "\n"
    }

    /// The app's URL: `redis+sentinel://` (or `rediss+sentinel://` with TLS), the ACL
    /// user's credentials for the master, the three sentinels and the master's name.
    pub fn url(&self) -> String {
        let scheme = if self.security.tls {
            "rediss+sentinel"
        } else {
            "redis+sentinel"
        };
        let auth = match &self.security.acl_user {
            Some((user, password)) => format!("{user}:{password}@"),
            None => String::new(),
        };
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        let query = match &self.security.sentinel_password {
            Some(password) => format!("?sentinel_password={password}"),
            None => String::new(),
        };
        format!("{scheme}://{auth}{}/{MASTER_NAME}{query}", hosts.join(","))
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// The first master's port, and its replica's.
    pub fn data_ports(&self) -> (u16, u16) {
        (self.data[0].port, self.data[1].port)
    }

    /// The PEM of the CA of a TLS deployment.
    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("ca.crt")).expect("a TLS deployment has a CA")
    }

    /// The master's port as the live sentinels name it now, when a majority of them
    /// agree (the one they name, `SENTINEL GET-MASTER-ADDR-BY-NAME`).
    pub fn master_port(&self) -> Option<u16> {
        let named: Vec<u16> = self
            .sentinels
            .iter()
            .filter(|s| s.child.is_some())
            .filter_map(|s| {
                let out = self.sentinel_cli(
                    s.port,
                    &["sentinel", "get-master-addr-by-name", MASTER_NAME],
                );
                out.lines().nth(1)?.trim().parse().ok()
            })
            .collect();
        let first = *named.first()?;
        (named.iter().filter(|p| **p == first).count() >= 2).then_some(first)
    }

    /// `ROLE`'s first word on the data node on `port` (`master`, `slave`), "" when it
    /// does not answer.
    pub fn role(&self, port: u16) -> String {
        self.data_cli(port, &["role"])
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    /// Kills (SIGKILL) the data node on `port`; returns when it has exited.
    pub fn kill(&mut self, port: u16) {
        if let Some(node) = self.data.iter_mut().find(|n| n.port == port) {
            node.kill();
        }
    }

    /// `redis-cli` on a data node, as an operator would, authenticated; its output ("" when
    /// it cannot connect).
    pub fn data_cli(&self, port: u16, args: &[&str]) -> String {
        cli(&self.data_cli, port, args)
    }

    /// `redis-cli` on a sentinel; its output.
    pub fn sentinel_cli(&self, port: u16, args: &[&str]) -> String {
        cli(&self.sentinel_cli, port, args)
    }

    /// A plain connection to the data node on `port` (for plain deployments), as another
    /// client would open one.
    pub fn data_connection(&self, port: u16) -> redis::Connection {
        assert!(
            !self.security.tls,
            "data_connection is for plain deployments"
        );
        let auth = if self.security.acl_user.is_some() || self.security.sentinel_password.is_some()
        {
            format!(":{DATA_PASSWORD}@")
        } else {
            String::new()
        };
        redis::Client::open(format!("redis://{auth}127.0.0.1:{port}"))
            .and_then(|c| c.get_connection())
            .expect("the data node answers")
    }

    fn wait(&self, deadline: Duration, what: &str, ready: impl Fn(&Self) -> bool) {
        let started = Instant::now();
        while !ready(self) {
            assert!(
                started.elapsed() < deadline,
                "timed out after {deadline:?} waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        for process in self.sentinels.iter_mut().chain(self.data.iter_mut()) {
            process.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn listen_args(port: u16, tls: bool) -> [String; 4] {
    let (plain, secure) = if tls {
        ("0".to_owned(), port.to_string())
    } else {
        (port.to_string(), "0".to_owned())
    };
    ["--port".to_owned(), plain, "--tls-port".to_owned(), secure]
}

fn spawn(command: &mut Command) -> Child {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts (scripts/test.sh installs it)")
}

fn cli(auth: &[String], port: u16, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(auth)
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A field of `redis-cli`'s output of a flat map (`key` on one line, its value on the next).
fn field<'a>(out: &'a str, name: &str) -> Option<&'a str> {
    let mut lines = out.lines();
    while let Some(line) = lines.next() {
        if line.trim() == name {
            return lines.next().map(str::trim);
        }
    }
    None
}

/// A free loopback port above Linux's ephemeral range (32768–60999: there an outgoing
/// connection can hold a port the bind check does not see, and the server fails to
/// start), handed out once per process, so that deployments started at once never pick
/// the same port before its server binds it.
fn loopback_port() -> u16 {
    static NEXT: std::sync::Mutex<u16> = std::sync::Mutex::new(0);
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    let mut next = NEXT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *next == 0 {
        // Processes (test binaries) running at once start far apart.
        *next = 61000 + (std::process::id() % 16) as u16 * 250;
    }
    loop {
        let candidate = *next;
        *next = if candidate >= 64999 {
            61000
        } else {
            candidate + 1
        };
        if free(candidate) {
            return candidate;
        }
    }
}
