//! The engine runtime: threads of our own for the work that must go on while the app's
//! runtime is blocked, which today is renewing job locks ([`super::lock_keeper`]).
//! No handler ever runs here.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

use crate::error::Error;

/// One thread: it only sends a lock renewal now and then, and parses the reply.
const ENGINE_THREADS: usize = 1;

static ENGINE: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The process-wide engine runtime, started on first use and kept for the life of the
/// process (a runtime cannot be dropped from async code, and every app shares it).
fn engine(queue: &str) -> Result<&'static Handle, Error> {
    let runtime = ENGINE.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(ENGINE_THREADS)
            .thread_name("queue-engine")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    });
    match runtime {
        Ok(runtime) => Ok(runtime.handle()),
        Err(reason) => Err(Error::Worker {
            queue: queue.to_owned(),
            reason: format!("cannot start the engine's threads: {reason}"),
        }),
    }
}

/// Runs `future` (for `queue`) on the engine runtime and waits for it from wherever we
/// are.
pub(crate) async fn on_engine<F>(queue: &str, future: F) -> Result<F::Output, Error>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match engine(queue)?.spawn(future).await {
        Ok(output) => Ok(output),
        // A panic in the engine is a bug: passed on as it was.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(Error::Worker {
            queue: queue.to_owned(),
            reason: format!("an engine task was stopped: {e}"),
        }),
    }
}

/// Spawns `future` (for `queue`) on the engine runtime without waiting for it.
pub(crate) fn spawn_on_engine<F>(queue: &str, future: F) -> Result<(), Error>
where
    F: Future<Output = ()> + Send + 'static,
{
    drop(engine(queue)?.spawn(future));
    Ok(())
}
