//! A private `redis-server` on a free port, for tests that must kill Redis or need a
//! TLS listener. The shared Redis is never restarted.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` child process, killed on drop.
#[derive(Debug)]
pub struct PrivateRedis {
    child: Child,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

/// Calls of `command` (its `INFO commandstats` name, a script's own included) since the
/// server's statistics were last reset: `(calls, failed calls)`.
pub fn command_calls(conn: &mut redis::Connection, command: &str) -> (u64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .expect("INFO commandstats");
    let Some(fields) = info
        .lines()
        .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:")))
    else {
        return (0, 0);
    };
    let field = |name: &str| {
        fields
            .split(',')
            .find_map(|f| f.strip_prefix(name))
            .map_or(0, |v| v.parse().expect("a count in INFO commandstats"))
    };
    (field("calls="), field("failed_calls="))
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl PrivateRedis {
    /// Plain Redis on a free port.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Redis on a free port that keeps its data across [`PrivateRedis::restart`]: every
    /// write is in its append-only file, synced to disk before Redis answers
    /// (`--appendonly yes --appendfsync always`), as a production Redis that must not
    /// lose acknowledged writes runs.
    pub fn start_persistent() -> Self {
        Self::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
    }

    /// Plain Redis on a free port, with extra `redis-server` arguments (which override
    /// the defaults: no snapshots, no append-only file).
    pub fn start_with(extra: &[&str]) -> Self {
        let port = free_port();
        let dir = scratch_dir("plain");
        let port_arg = port.to_string();
        let mut args = vec!["--port", &port_arg];
        args.extend_from_slice(extra);
        Self::spawn(port, dir, &args)
    }

    /// Redis with only a TLS listener, its certificate signed by a throw-away CA made
    /// with `openssl`; [`PrivateRedis::ca_pem`] gives the CA to trust.
    pub fn start_tls() -> Self {
        let port = free_port();
        let dir = scratch_dir("tls");
        let certs = TlsFiles::make(&dir);
        let port_arg = port.to_string();
        let mut args = vec!["--port", "0", "--tls-port", &port_arg];
        let tls_args = certs.server_args();
        args.extend(tls_args.iter().map(String::as_str));
        Self::spawn(port, dir.clone(), &args)
    }

    /// The PEM of the CA that signed a TLS server's certificate.
    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("ca.crt")).expect("a TLS private redis has a CA")
    }

    fn spawn(port: u16, dir: PathBuf, args: &[&str]) -> Self {
        let child = spawn_child(&dir, args);
        wait_for_port(port);
        PrivateRedis {
            child,
            port,
            dir,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    /// Kills it (SIGKILL) and starts it again on the same port and directory: it keeps
    /// no data, unless started with [`PrivateRedis::start_persistent`].
    pub fn restart(&mut self) {
        self.kill();
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.child = spawn_child(&self.dir, &args);
        wait_for_port(self.port);
    }

    /// Its working directory: its append-only file, when it keeps one.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Zeroes its command statistics (`CONFIG RESETSTAT`), for [`commands_run`].
    ///
    /// [`commands_run`]: PrivateRedis::commands_run
    pub fn reset_stats(&self) {
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query::<()>(&mut self.connection())
            .expect("CONFIG RESETSTAT");
    }

    /// Every command it ran since its statistics were last zeroed, a script's own
    /// included (`INFO commandstats`), but `INFO` and `CONFIG` (these readings'
    /// own): the statistics are the server's, so a count is what every client sent.
    pub fn commands_run(&self) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.connection())
            .expect("INFO commandstats");
        info.lines()
            .filter_map(|line| line.strip_prefix("cmdstat_")?.split_once(':'))
            .filter(|(name, _)| !matches!(*name, "info" | "config"))
            .filter_map(|(_, fields)| {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix("calls="))?
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    }

    /// A connection of its own to it, for a test's reads and writes.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("a connection to the private Redis")
    }

    /// Stops it (SIGSTOP) without closing its connections: commands sent to it get no
    /// answer until [`PrivateRedis::thaw`], as from a server that hangs.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets a frozen server go on (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill {signal} {}", self.child.id());
    }

    /// Kills it (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A throw-away CA (`ca.crt`) and a server certificate it signed for 127.0.0.1, made
/// with `openssl` in a directory.
pub(crate) struct TlsFiles {
    crt: String,
    key: String,
    ca: String,
}

impl TlsFiles {
    pub(crate) fn make(dir: &Path) -> Self {
        let file = |name: &str| path(&dir.join(name));
        let openssl = |args: &[&str]| {
            let ok = Command::new("openssl")
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("openssl runs");
            assert!(ok.success(), "openssl {args:?}");
        };
        let (ca_key, ca) = (file("ca.key"), file("ca.crt"));
        let (key, csr, crt, ext) = (
            file("redis.key"),
            file("redis.csr"),
            file("redis.crt"),
            file("san.ext"),
        );
        std::fs::write(&ext, "subjectAltName=IP:127.0.0.1\n").expect("write ext");
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=test-ca",
            "-keyout",
            &ca_key,
            "-out",
            &ca,
        ]);
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            &key,
            "-out",
            &csr,
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &ext,
            "-out",
            &crt,
        ]);
        TlsFiles { crt, key, ca }
    }

    /// `redis-server`'s TLS arguments (clients are not asked for certificates).
    pub(crate) fn server_args(&self) -> Vec<String> {
        [
            "--tls-cert-file",
            &self.crt,
            "--tls-key-file",
            &self.key,
            "--tls-ca-cert-file",
            &self.ca,
            "--tls-auth-clients",
            "no",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// The CA's file.
    pub(crate) fn ca(&self) -> &str {
        &self.ca
    }
}

fn spawn_child(dir: &Path, args: &[&str]) -> Child {
    // The defaults first: a later argument wins, so the caller's override them.
    Command::new("redis-server")
        .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
        .args(args)
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts (scripts/test.sh installs it)")
}

pub(crate) fn wait_for_port(port: u16) {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "private redis on port {port} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn scratch_dir(kind: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(queue_core::testing::unique_prefix(&format!("redis-{kind}")));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
