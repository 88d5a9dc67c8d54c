//! The dashboard's live streams are capped per dashboard and end after their lifetime
//! (the tab's `EventSource` opens another): no process holds an unbounded number of
//! streams, nor one for ever.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::request::Parts;
use axum::Router;
use queue_core::app::Registrations;
use queue_dashboard::{Access, Dashboard};
use queue_tests::http::{listener, request};
use queue_tests::{TestRedis, SOON};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn viewer(_: &Parts) -> Access {
    Access::read_only("victor")
}

/// Opens a live stream; its status line and, when 200, the connection.
async fn open(addr: SocketAddr, queue: &str) -> (String, tokio::net::TcpStream) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "GET /q/{queue}/live HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 1024];
    while !seen.contains("\r\n\r\n") {
        let n = tokio::time::timeout(SOON, stream.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "closed: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    (seen.lines().next().unwrap_or_default().to_owned(), stream)
}

/// Reads until the server ends the stream; how long that took.
async fn until_closed(stream: &mut tokio::net::TcpStream) -> Duration {
    let started = std::time::Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        let n = tokio::time::timeout(SOON, stream.read(&mut buf))
            .await
            .expect("the stream ends within the deadline")
            .unwrap_or(0);
        if n == 0 {
            return started.elapsed();
        }
        // A chunked body ends with its last chunk; the connection may stay open.
        if String::from_utf8_lossy(&buf[..n]).contains("0\r\n\r\n") {
            return started.elapsed();
        }
    }
}

#[tokio::test]
async fn live_streams_are_capped_and_end_after_their_lifetime() {
    let redis = TestRedis::new("dash-streams");
    let app = redis.app(|b| b.registrations(Registrations::None)).await;
    app.queue::<String>("watched").unwrap();
    let dashboard = Dashboard::new(&app, viewer)
        .max_live_streams(2)
        .live_stream_lifetime(Duration::from_secs(2));
    let (listener, addr) = listener().await;
    let router = Router::new().nest("/q", dashboard.router());
    tokio::spawn(async move { axum::serve(listener, router).await });

    let (first, mut one) = open(addr, "watched").await;
    let (second, _two) = open(addr, "watched").await;
    assert!(first.starts_with("HTTP/1.1 200") && second.starts_with("HTTP/1.1 200"));
    let (third, _) = open(addr, "watched").await;
    assert!(third.starts_with("HTTP/1.1 503"), "{third}");

    // The first ends by itself after its lifetime, and its slot is free again.
    let lasted = until_closed(&mut one).await;
    assert!(lasted < Duration::from_secs(5), "{lasted:?}");
    let (again, _) = open(addr, "watched").await;
    assert!(again.starts_with("HTTP/1.1 200"), "{again}");
    let page = request(addr, "GET", "/q/watched", &[], b"").await.unwrap();
    assert_eq!(page.status, 200, "the page works whatever the streams");
}
