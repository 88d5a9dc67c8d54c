//! One shutdown: stop taking requests, finish the ones in flight (and the jobs they
//! add), then stop the workers with a deadline. In that order.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use queue_core::{ShutdownReport, Workers};
use tokio::net::TcpListener;

/// Serves `router` until SIGINT or SIGTERM, then shuts down as
/// [`serve_until`] does.
///
/// ```no_run
/// # async fn demo(app: queue_core::QueueApp, router: axum::Router) -> std::io::Result<()> {
/// use std::time::Duration;
///
/// let workers = app.start_workers().await.expect("workers start");
/// let listener = tokio::net::TcpListener::bind("0.0.0.0:3000").await?;
/// queue_axum::serve(listener, router, Some(workers), Duration::from_secs(30)).await?;
/// # Ok(()) }
/// ```
pub async fn serve(
    listener: TcpListener,
    router: Router,
    workers: Option<Workers>,
    deadline: Duration,
) -> std::io::Result<Option<ShutdownReport>> {
    serve_until(listener, router, workers, deadline, shutdown_signal()).await
}

/// Serves `router` until `signal` resolves. Then the listener stops accepting (new
/// connections are refused), requests in flight finish (so every job a 202 promised is
/// in Redis), and only then the workers stop: active jobs get up to `deadline`.
pub async fn serve_until(
    listener: TcpListener,
    router: Router,
    workers: Option<Workers>,
    deadline: Duration,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<Option<ShutdownReport>> {
    axum::serve(listener, router)
        .with_graceful_shutdown(signal)
        .await?;
    tracing::info!("HTTP server stopped; stopping workers");
    Ok(match workers {
        Some(workers) => Some(workers.shutdown(deadline).await),
        None => None,
    })
}

/// Resolves on SIGINT (Ctrl-C) or, on Unix, SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT received; shutting down"),
        () = terminate => tracing::info!("SIGTERM received; shutting down"),
    }
}
