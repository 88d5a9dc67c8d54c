//! `queue_axum::serve` against clients that hold connections open: partial headers, a
//! body that stops halfway, silence, and a request that never finishes at shutdown.
//! Each must be cut off within its limit instead of holding a connection for ever.

use std::time::{Duration, Instant};

use axum::routing::{get, post};
use axum::Router;
use queue_axum::{serve_with_limits, ServeLimits};
use queue_tests::http::listener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn limits() -> ServeLimits {
    ServeLimits::default()
        .header_read(Duration::from_millis(300))
        .body(Duration::from_millis(300))
        .idle(Duration::from_millis(500))
        .drain(Duration::from_millis(300))
}

/// Serves a tiny router with short limits; the returned sender stops it.
async fn start() -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let router = Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/echo", post(|body: String| async move { body }))
        .route("/hang", get(std::future::pending::<&'static str>));
    let (listener, addr) = listener().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let signal = async {
            let _ = stopped.await;
        };
        serve_with_limits(
            listener,
            router,
            None,
            Duration::from_secs(1),
            signal,
            limits(),
        )
        .await
        .expect("serves");
    });
    (addr, stop, server)
}

/// Sends `bytes`, then reads until the server closes the connection; returns what it
/// answered and how long the connection stayed open. Fails after 5 s.
async fn hold(addr: std::net::SocketAddr, bytes: &[u8]) -> (String, Duration) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection was still open after 5 s");
    (
        String::from_utf8_lossy(&answer).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn partial_headers_partial_bodies_and_silence_are_cut_off() {
    let (addr, _stop, _server) = start().await;
    // Headers that never end.
    let (_, open) = hold(addr, b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ").await;
    assert!(
        open < Duration::from_secs(2),
        "partial headers held {open:?}"
    );
    // A body that stops halfway: the handler's read fails, the request is refused.
    let (answer, open) = hold(
        addr,
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten..",
    )
    .await;
    assert!(
        open < Duration::from_secs(2),
        "a partial body held {open:?}"
    );
    assert!(!answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Nothing at all.
    let (_, open) = hold(addr, b"").await;
    assert!(open < Duration::from_secs(2), "silence held {open:?}");
    // An idle keep-alive connection after a good request.
    let (answer, open) = hold(addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok"),
        "{answer}"
    );
    assert!(
        open < Duration::from_secs(2),
        "an idle connection held {open:?}"
    );
}

#[tokio::test]
async fn a_hung_request_does_not_hold_up_shutdown_past_the_drain_limit() {
    let (addr, stop, server) = start().await;
    let hung = tokio::spawn(hold(addr, b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n"));
    // The request is in: the server has it (a plain request on another connection
    // answers, so the listener has taken both).
    let (answer, _) = hold(
        addr,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let started = Instant::now();
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server stopped within the drain limit")
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    // The hung request's connection was closed, not left behind.
    let (answer, _) = hung.await.unwrap();
    assert!(!answer.contains("200"), "{answer}");
}
