//! Testing code that uses queues, three ways.
//!
//! - **On a real Redis, under a private prefix**: [`TestApp`] builds your app under a
//!   prefix no other test uses and deletes its keys when dropped. It tells what was
//!   enqueued ([`TestApp::enqueued`]), runs one handler with its dependencies
//!   ([`TestApp::run`]), and drains a queue in-process with retries and delays
//!   fast-forwarded ([`TestApp::drain`]).
//! - **Inline, without Redis**: [`QueueAppBuilder::build_inline`] gives an app whose adds
//!   run their handler at once (see [below](#inline-mode-no-redis)).
//! - **By hand**: [`unique_prefix`] and [`delete_prefix`].
//!
//! ```no_run
//! # #[derive(serde::Serialize, serde::Deserialize)] pub struct WelcomeEmail { pub to: String }
//! # #[queue_core::job_queue("email")] pub enum Email { #[job("welcome", output = bool)] Welcome(WelcomeEmail) }
//! # async fn sign_up(app: &queue_core::QueueApp, to: &str) -> queue_core::Result<()> { Ok(()) }
//! # async fn demo() -> queue_core::Result<()> {
//! use queue_core::testing::{DrainOutcome, TestApp};
//! use queue_core::QueueApp;
//!
//! let kit = TestApp::new(QueueApp::builder()).await?;
//! sign_up(kit.app(), "ada@example.com").await?; // the code under test adds a job
//!
//! let queued = kit.enqueued::<WelcomeEmail>().await?;
//! assert_eq!(queued[0].data.to, "ada@example.com");
//! assert_eq!(queued[0].options.get_attempts(), Some(5));
//!
//! let sent = kit.run(WelcomeEmail { to: "lin@example.com".into() }).await;
//! assert_eq!(sent.ok(), Some(true));
//!
//! let drained = kit.drain::<Email>().await?;
//! assert!(matches!(drained[0].outcome, DrainOutcome::Completed(_)));
//! # Ok(()) }
//! ```
//!
//! # Inline mode (no Redis)
//!
//! An app made with [`build_inline`](crate::QueueAppBuilder::build_inline) checks its
//! registrations as `build` does and never connects. Every add (`add`, `add_bulk`,
//! `add_job`, `add_jobs`, and `add_in`, which writes no outbox row) runs the job's
//! handler at once, in the caller's task, and returns when it is done: the `AddedJob`'s
//! state is `completed` or `failed`. [`inline_jobs`] lists every job with its outcome.
//!
//! What it simulates: the handler chosen by queue and job name, the payload's JSON round
//! trip (a payload that does not fit its handler fails as it would in a worker), the
//! dependencies (`Dep<T>`, `Dep<QueueApp>`: a handler's follow-up adds run inline too,
//! nested), a job id already used (`duplicate`, nothing run), attempts (run one after
//! the other), unrecoverable errors, timeouts, and panics (as failed attempts). Its
//! claims ([`QueueApp::claims`](crate::QueueApp::claims), what queue-axum's idempotency
//! layer keeps answers in) live in the app's memory, by the same rules.
//!
//! What it does not simulate: Redis itself (every call that reads or changes Redis,
//! `get_job`, counts, `cancel`, `remove`, schedulers, `add_flow`, `queue_events`,
//! `start_workers`, fails with [`Error::Inline`] naming it), delays and backoff (a job
//! runs at once, whatever its delay; retries follow each other at once), priorities,
//! LIFO, rate limits, concurrency (one job at a time, in the caller's task), locks and
//! stalls, retention, deduplication ids (only job ids are checked), event listeners,
//! progress and logs (recorded nowhere), the outbox's transaction (the job runs even if
//! the transaction later rolls back), and other processes. Use [`TestApp`] where any of
//! that matters.
//!
//! [`QueueAppBuilder::build_inline`]: crate::QueueAppBuilder::build_inline
//! [`Error::Inline`]: crate::Error::Inline

mod kit;

pub use crate::backend::{InlineJob, InlineOutcome};
pub use crate::job::testing::TestJobHandle;
pub use kit::{run_handler, DrainOutcome, Drained, Enqueued, TestApp, DEFAULT_DRAIN_DEADLINE};

use crate::app::QueueApp;
use crate::backend::Connection;
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
    delete_keys(app.backend().redis("delete_prefix")?).await
}

/// Every job an inline app ([`build_inline`](crate::QueueAppBuilder::build_inline)) was
/// given, with what became of each, in the order they finished: a job's follow-ups,
/// which run inside it, come before it. Empty for other apps.
pub fn inline_jobs(app: &QueueApp) -> Vec<InlineJob> {
    app.backend().inline_jobs()
}

/// Sets this process's clock `ahead_ms` milliseconds ahead of the real one (behind
/// when negative; 0 puts it right), as everything in queue-core reads it: a test plays
/// a host whose clock is wrong. Process-wide, so a test that uses it runs alone in its
/// test binary. Test plumbing (feature `__private`), not an API.
#[cfg(feature = "__private")]
#[doc(hidden)]
pub fn skew_host_clock(ahead_ms: i64) {
    crate::clock::set_skew_ms(ahead_ms);
}

/// Runs `hook` before a wait for job `id` of `queue` subscribes to its events (once):
/// a test finishes the job there, between its `add` and the subscription. Test
/// plumbing (feature `__private`), not an API.
#[cfg(feature = "__private")]
#[doc(hidden)]
pub fn before_watch(
    queue: &str,
    id: &str,
    hook: impl std::future::Future<Output = ()> + Send + 'static,
) {
    crate::watch::set_before_watch(queue, id, Box::pin(hook));
}

/// Deletes every key under the connection's prefix.
pub(crate) async fn delete_keys(conn: &Connection) -> Result<u64, Error> {
    let prefix = conn.prefix();
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
