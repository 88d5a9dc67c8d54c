//! Helpers for testing code that uses queues: a key prefix per test, and its cleanup.
//!
//! ```no_run
//! # async fn demo() -> queue_core::Result<()> {
//! use queue_core::{testing, QueueApp};
//!
//! let app = QueueApp::builder().prefix(testing::unique_prefix("signup")).build().await?;
//! // ... exercise the code under test ...
//! testing::delete_prefix(&app).await?;
//! # Ok(()) }
//! ```

use crate::app::QueueApp;
use crate::error::Error;

/// The prefix every test prefix starts with; [`delete_prefix`] refuses any other.
pub const TEST_PREFIX_START: &str = "test-";

/// A key prefix no other test uses: `test-<label>-<random>`. Give each test its own
/// so tests run in parallel on one Redis without seeing each other's keys.
pub fn unique_prefix(label: &str) -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{TEST_PREFIX_START}{label}-{}", &random[..12])
}

/// Deletes every key under the app's prefix; returns how many. Refuses prefixes not
/// made by [`unique_prefix`], so it can never wipe a real queue.
pub async fn delete_prefix(app: &QueueApp) -> Result<u64, Error> {
    let prefix = app.prefix();
    // A cluster test prefix is the same in a hash tag: `{test-...}`.
    if !prefix
        .trim_start_matches('{')
        .starts_with(TEST_PREFIX_START)
    {
        return Err(Error::invalid(
            "prefix",
            format!("delete_prefix only deletes test prefixes (`{TEST_PREFIX_START}...`), not `{prefix}`"),
        ));
    }
    let conn = app.connection();
    let pattern = format!("{prefix}:*");
    if conn.is_cluster() {
        // `SCAN` would read one node; `KEYS` is sent to every master.
        let keys: Vec<String> = conn.query(redis::cmd("KEYS").arg(&pattern)).await?;
        let mut deleted = 0;
        for key in keys {
            deleted += conn.query::<u64>(redis::cmd("UNLINK").arg(&key)).await?;
        }
        return Ok(deleted);
    }
    let mut cursor: u64 = 0;
    let mut deleted = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = conn
            .query(
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(500),
            )
            .await?;
        if !keys.is_empty() {
            deleted += conn.query::<u64>(redis::cmd("UNLINK").arg(&keys)).await?;
        }
        if next == 0 {
            return Ok(deleted);
        }
        cursor = next;
    }
}
