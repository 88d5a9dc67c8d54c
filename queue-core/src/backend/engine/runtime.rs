//! The engine runtime: threads of our own for the work that must go on while the app's
//! runtime is blocked, which today is renewing job locks ([`super::lock_keeper`]).
//! No handler ever runs here.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle};

use crate::error::Error;

static ENGINE: OnceLock<Result<Handle, String>> = OnceLock::new();

/// The process-wide engine runtime, started on first use and kept for the life of the
/// process (a runtime cannot be dropped from async code, and every app shares it).
///
/// One thread, driving a current-thread runtime: it only sends a lock renewal now and
/// then and parses the reply. (A current-thread runtime on a thread of our own, rather
/// than a multi-thread one with one worker, so that tokio's `rt-multi-thread` is not
/// asked of the application.)
fn engine(queue: &str) -> Result<&'static Handle, Error> {
    let runtime = ENGINE.get_or_init(|| {
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("queue-engine".to_owned())
            .spawn(move || {
                match Builder::new_current_thread().enable_all().build() {
                    Ok(runtime) => {
                        let _ = handle_tx.send(Ok(runtime.handle().clone()));
                        // Drives every task spawned through the handle, for ever.
                        runtime.block_on(std::future::pending::<()>());
                    }
                    Err(e) => {
                        let _ = handle_tx.send(Err(e.to_string()));
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        handle_rx
            .recv()
            .map_err(|_| "the engine thread stopped at start".to_owned())?
    });
    match runtime {
        Ok(handle) => Ok(handle),
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
