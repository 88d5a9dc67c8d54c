//! One shutdown: stop taking requests, finish the ones in flight (within a bound), then
//! stop the workers with a deadline. In that order. And limits on every client (a cap
//! on connections, time limits), so that slow or idle connections cannot pile up.

mod admission;
mod fd_limit;
mod limits;
mod timed_body;
mod timed_io;

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use queue_core::{worker::ShutdownReport, Workers};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tower::Service;

pub use limits::ServeLimits;

use admission::Admission;
use timed_body::TimedBody;
use timed_io::IdleTimeout;

/// Serves `router` until SIGINT or SIGTERM, then shuts down as [`serve_until`] does,
/// with the default [`ServeLimits`].
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

/// Serves `router` until `signal` resolves, with the default [`ServeLimits`]. Then the
/// listener stops accepting (new connections are refused), requests in flight finish
/// (so every job a 202 promised is written), within the drain limit, and only then
/// the workers stop: active jobs get up to `deadline`.
pub async fn serve_until(
    listener: TcpListener,
    router: Router,
    workers: Option<Workers>,
    deadline: Duration,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<Option<ShutdownReport>> {
    serve_with_limits(
        listener,
        router,
        workers,
        deadline,
        signal,
        ServeLimits::default(),
    )
    .await
}

/// [`serve_until`] with limits of your own.
pub async fn serve_with_limits(
    listener: TcpListener,
    router: Router,
    workers: Option<Workers>,
    deadline: Duration,
    signal: impl Future<Output = ()> + Send + 'static,
    limits: ServeLimits,
) -> std::io::Result<Option<ShutdownReport>> {
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let mut signal = std::pin::pin!(signal);
    let max_connections = limits.max_connections_limit();
    let per_client = limits.max_connections_per_client_limit(max_connections);
    let admission = Admission::new(max_connections, per_client);
    let mut at_cap_since: Option<Instant> = None;
    loop {
        // At the cap, connections are still accepted, answered 503 at once and closed:
        // waiting in the listen backlog, they would delay every client behind them.
        let full = admission.full();
        if full && at_cap_since.is_none() {
            at_cap_since = Some(Instant::now());
            tracing::warn!(
                max_connections,
                "connection cap reached; new connections are answered 503 until one closes"
            );
        } else if !full {
            if let Some(since) = at_cap_since.take() {
                tracing::info!(after = ?since.elapsed(), "below the connection cap again");
            }
        }
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let slot = match admission.admit(crate::client::counted(peer.ip())) {
                        Ok(slot) => slot,
                        Err(why) => {
                            tracing::debug!(%peer, ?why, "connection refused");
                            admission.refuse(stream, why);
                            continue;
                        }
                    };
                    let io = TokioIo::new(IdleTimeout::new(stream, limits.idle_timeout()));
                    let connection = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(limits.header_read_timeout())
                        // No upgrades (WebSocket): server-sent events need none.
                        .serve_connection(io, service(router.clone(), peer, limits.body_timeout()));
                    let connection = graceful.watch(connection);
                    connections.spawn(async move {
                        if let Err(e) = connection.await {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                        drop(slot);
                    });
                }
                // Out of file descriptors and the like: wait a moment, keep serving.
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next() => {}
            () = &mut signal => break,
        }
    }
    drop(listener);
    tracing::info!(
        in_flight = connections.len(),
        "HTTP server stopping; draining requests in flight"
    );
    if tokio::time::timeout(limits.drain_timeout(), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            after = ?limits.drain_timeout(),
            still_open = connections.len(),
            "requests still in flight at the drain limit; closing their connections"
        );
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
    tracing::info!("HTTP server stopped; stopping workers");
    Ok(match workers {
        Some(workers) => Some(workers.shutdown(deadline).await),
        None => None,
    })
}

/// The router as a hyper service, its request bodies under the body limit, each request
/// knowing its client's address (axum's `ConnectInfo`).
fn service(
    router: Router,
    peer: SocketAddr,
    body_limit: Duration,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl Future + Send,
> + Clone {
    hyper::service::service_fn(move |request: Request<Incoming>| {
        let mut router = router.clone();
        let mut request =
            request.map(|body| axum::body::Body::new(TimedBody::new(body, body_limit)));
        request.extensions_mut().insert(ConnectInfo(peer));
        async move { router.call(request).await }
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
