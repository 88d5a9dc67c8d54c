//! Runs the Python BullMQ peer (`tests/python/peer.py`, `bullmq` pinned in
//! `tests/python/requirements.txt`) and reads its JSON lines. It runs in the venv
//! `scripts/test.sh` makes at `target/python-peer` (`QUEUE_TESTS_PYTHON` names another
//! interpreter).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repository")
        .to_path_buf()
}

fn interpreter() -> PathBuf {
    if let Some(python) = std::env::var_os("QUEUE_TESTS_PYTHON") {
        return PathBuf::from(python);
    }
    let venv = repository().join("target/python-peer/bin/python");
    assert!(
        venv.exists(),
        "the Python peer is not installed: run scripts/test.sh, or `python3 -m venv target/python-peer && target/python-peer/bin/pip install -r tests/python/requirements.txt` in {}",
        repository().display()
    );
    venv
}

/// Runs `python peer.py <args>` against the test Redis and `prefix`, to completion
/// (at most 30 s), and returns its lines.
pub async fn run(prefix: &str, args: &[&str]) -> Vec<serde_json::Value> {
    run_with_keys(prefix, args, "").await
}

/// [`run`], with `keyring` (the text form of `queue_core::encryption::Keyring`) in
/// `QUEUE_KEYS`, for the sealed commands.
pub async fn run_with_keys(prefix: &str, args: &[&str], keyring: &str) -> Vec<serde_json::Value> {
    let child = Command::new(interpreter())
        .arg(repository().join("tests/python/peer.py"))
        .args(args)
        .env("REDIS_URL", crate::redis_url())
        .env("PREFIX", prefix)
        .env("QUEUE_KEYS", keyring)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("python runs");
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the Python peer finished in time")
        .expect("the Python peer ran");
    assert!(
        output.status.success(),
        "the Python peer failed: {:?}",
        output.status
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}")))
        .collect()
}
