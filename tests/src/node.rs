//! Runs the Node BullMQ peer (`tests/node/peer.mjs`) and reads its JSON lines.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

fn peer_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node")
}

/// Starts `node peer.mjs <args>` against the test Redis and `prefix`.
pub fn spawn(prefix: &str, args: &[&str]) -> Child {
    let dir = peer_dir();
    assert!(
        dir.join("node_modules/bullmq").exists(),
        "the Node peer is not installed: run scripts/test.sh, or `npm ci` in {}",
        dir.display()
    );
    Command::new("node")
        .arg(dir.join("peer.mjs"))
        .args(args)
        .env("REDIS_URL", crate::redis_url())
        .env("PREFIX", prefix)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs")
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

/// Runs a peer command to completion.
pub async fn run(prefix: &str, args: &[&str]) -> Vec<serde_json::Value> {
    output(spawn(prefix, args), Duration::from_secs(30)).await
}
