//! Runs the Node BullMQ peer (`tests/node/peer.mjs`) and reads its JSON lines.
//!
//! Two Node BullMQ majors are installed side by side (`tests/node/package-lock.json`):
//! 5.x with `bullmq-otel` 1.x, and 6.x with `bullmq-otel` 2.x in the `bullmq6/`
//! workspace. [`spawn`] and [`run`] use 5.x; [`Bullmq::spawn`] and [`Bullmq::run`]
//! pick one.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// A Node BullMQ major the peer can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bullmq {
    /// `bullmq` 5.x with `bullmq-otel` 1.x.
    V5,
    /// `bullmq` 6.x with `bullmq-otel` 2.x.
    V6,
}

impl Bullmq {
    /// Both, for tests that run against each.
    pub const ALL: [Bullmq; 2] = [Bullmq::V5, Bullmq::V6];

    /// The major, as `BULLMQ` names it to the peer.
    pub fn major(self) -> &'static str {
        match self {
            Bullmq::V5 => "5",
            Bullmq::V6 => "6",
        }
    }

    /// Starts `node peer.mjs <args>` on this major, against the test Redis and `prefix`.
    pub fn spawn(self, prefix: &str, args: &[&str]) -> Child {
        self.spawn_with_keys(prefix, args, "")
    }

    /// [`spawn`](Self::spawn), with `keyring` (the text form of
    /// `queue_core::encryption::Keyring`) in `QUEUE_KEYS`, for the sealed commands.
    pub fn spawn_with_keys(self, prefix: &str, args: &[&str], keyring: &str) -> Child {
        self.spawn_on(None, prefix, args, keyring)
    }

    /// Runs a peer command on this major to completion, against the Redis at `url`
    /// (a private one, say) rather than the test Redis, even in a cluster run.
    pub async fn run_on(self, url: &str, prefix: &str, args: &[&str]) -> Vec<serde_json::Value> {
        output(
            self.spawn_on(Some(url), prefix, args, ""),
            Duration::from_secs(30),
        )
        .await
    }

    /// Starts the peer against `url`, or against the test Redis (`None`): the one at
    /// `REDIS_URL`, or the cluster a cluster run names in `REDIS_CLUSTER_NODES`, which
    /// the peer prefers and inherits.
    fn spawn_on(self, url: Option<&str>, prefix: &str, args: &[&str], keyring: &str) -> Child {
        let dir = peer_dir();
        let installed = match self {
            Bullmq::V5 => dir.join("node_modules/bullmq"),
            Bullmq::V6 => dir.join("bullmq6/node_modules/bullmq"),
        };
        assert!(
            installed.exists(),
            "Node BullMQ {} is not installed for the peer: run scripts/test.sh, or `npm ci` in {}",
            self.major(),
            dir.display()
        );
        let mut node = Command::new("node");
        match url {
            Some(url) => node.env("REDIS_URL", url).env_remove("REDIS_CLUSTER_NODES"),
            None => node.env("REDIS_URL", crate::redis_url()),
        };
        node.arg(dir.join("peer.mjs"))
            .args(args)
            .env("PREFIX", prefix)
            .env("BULLMQ", self.major())
            .env("QUEUE_KEYS", keyring)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs")
    }

    /// Runs a peer command on this major to completion.
    pub async fn run(self, prefix: &str, args: &[&str]) -> Vec<serde_json::Value> {
        output(self.spawn(prefix, args), Duration::from_secs(30)).await
    }

    /// The `bullmq` and `bullmq-otel` versions the peer loads for this major, as
    /// `{"bullmq": "6.7.6", "bullmqOtel": "2.0.1"}`.
    pub async fn versions(self) -> serde_json::Value {
        self.run("unused", &["version"]).await.remove(0)
    }
}

fn peer_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node")
}

/// Starts `node peer.mjs <args>` (BullMQ 5.x) against the test Redis and `prefix`.
pub fn spawn(prefix: &str, args: &[&str]) -> Child {
    Bullmq::V5.spawn(prefix, args)
}

/// Waits for a peer started with [`spawn`] (at most `deadline`) and returns its lines.
pub async fn output(child: Child, deadline: Duration) -> Vec<serde_json::Value> {
    let output = tokio::time::timeout(deadline, child.wait_with_output())
        .await
        .expect("the Node peer finished in time")
        .expect("the Node peer ran");
    assert!(
        output.status.success(),
        "the Node peer failed: {:?}",
        output.status
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}")))
        .collect()
}

/// Runs a peer command (BullMQ 5.x) to completion.
pub async fn run(prefix: &str, args: &[&str]) -> Vec<serde_json::Value> {
    Bullmq::V5.run(prefix, args).await
}
