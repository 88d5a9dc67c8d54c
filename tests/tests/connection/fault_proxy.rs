//! The fault proxy (`queue_tests::fault_proxy`) does what each fault says, seen from a
//! raw RESP connection: the other tests trust it to put exactly that fault between an
//! app and Redis.

use std::time::Duration;

use queue_tests::fault_proxy::{Direction, FaultProxy};
use queue_tests::PrivateRedis;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout, Instant};

/// Longer than any loopback round trip; short enough for a test to wait on.
const QUIET: Duration = Duration::from_millis(600);

async fn proxy() -> (PrivateRedis, FaultProxy) {
    let redis = PrivateRedis::start();
    let proxy = FaultProxy::start(&format!("127.0.0.1:{}", redis.port())).await;
    (redis, proxy)
}

async fn connect(proxy: &FaultProxy) -> TcpStream {
    TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .expect("the proxy listens")
}

/// Sends an inline command.
async fn send(stream: &mut TcpStream, command: &str) {
    stream
        .write_all(format!("{command}\r\n").as_bytes())
        .await
        .expect("the proxy takes the command");
}

/// The next reply line, or `None` when nothing came within `wait`.
async fn reply_within(stream: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut line = Vec::new();
    let read = timeout(wait, async {
        let mut byte = [0_u8; 1];
        loop {
            match stream.read(&mut byte).await {
                Ok(1) => {
                    line.push(byte[0]);
                    if line.ends_with(b"\r\n") {
                        return Ok(());
                    }
                }
                Ok(_) => return Err("closed".to_owned()),
                Err(e) => return Err(e.to_string()),
            }
        }
    })
    .await
    .ok()?;
    read.expect("the connection stays open");
    Some(String::from_utf8_lossy(&line).trim_end().to_owned())
}

/// The next reply line is `expected`, within [`QUIET`].
async fn expect_reply(stream: &mut TcpStream, expected: &str) {
    let reply = reply_within(stream, QUIET).await;
    assert_eq!(reply.as_deref(), Some(expected));
}

async fn direct_get(redis: &PrivateRedis, key: &str) -> Option<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port())).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn without_a_fault_it_forwards_both_ways() {
    let (_redis, proxy) = proxy().await;
    let mut stream = connect(&proxy).await;
    send(&mut stream, "PING").await;
    expect_reply(&mut stream, "+PONG").await;
}

#[tokio::test]
async fn a_blackhole_answers_nothing_keeps_the_socket_open_and_delivers_once_healed() {
    let (redis, proxy) = proxy().await;
    let mut stream = connect(&proxy).await;
    proxy.blackhole();
    send(&mut stream, "SET fp-blackhole 1").await;
    assert_eq!(reply_within(&mut stream, QUIET).await, None, "no answer");
    assert_eq!(
        direct_get(&redis, "fp-blackhole").await,
        None,
        "nothing forwarded"
    );
    // A connection made during the blackhole hangs too.
    let mut late = connect(&proxy).await;
    send(&mut late, "PING").await;
    assert_eq!(reply_within(&mut late, QUIET).await, None);

    proxy.heal();
    expect_reply(&mut stream, "+OK").await;
    expect_reply(&mut late, "+PONG").await;
    assert_eq!(
        direct_get(&redis, "fp-blackhole").await.as_deref(),
        Some("1")
    );
}

#[tokio::test]
async fn a_cut_toward_the_client_runs_commands_but_holds_their_replies() {
    let (redis, proxy) = proxy().await;
    let mut stream = connect(&proxy).await;
    proxy.cut(Direction::ToClient);
    send(&mut stream, "SET fp-cut 1").await;
    assert_eq!(reply_within(&mut stream, QUIET).await, None);
    // Redis ran it: only the reply is lost on the way.
    assert_eq!(direct_get(&redis, "fp-cut").await.as_deref(), Some("1"));
    proxy.heal();
    expect_reply(&mut stream, "+OK").await;
}

#[tokio::test]
async fn a_cut_toward_the_server_holds_commands() {
    let (redis, proxy) = proxy().await;
    let mut stream = connect(&proxy).await;
    proxy.cut(Direction::ToServer);
    send(&mut stream, "SET fp-cut-in 1").await;
    assert_eq!(reply_within(&mut stream, QUIET).await, None);
    assert_eq!(direct_get(&redis, "fp-cut-in").await, None);
    proxy.heal();
    expect_reply(&mut stream, "+OK").await;
}

#[tokio::test]
async fn latency_delays_each_way_and_keeps_the_order() {
    let (_redis, proxy) = proxy().await;
    let mut stream = connect(&proxy).await;
    proxy.latency(Duration::from_millis(100), Duration::from_millis(20));
    let sent = Instant::now();
    send(&mut stream, "ECHO a").await;
    send(&mut stream, "ECHO b").await;
    let mut replies = Vec::new();
    while replies.len() < 4 {
        let line = reply_within(&mut stream, Duration::from_secs(2)).await;
        replies.push(line.expect("a reply within 2 s"));
    }
    // Each way pays at least 100 ms, less the jitter's 20.
    assert!(
        sent.elapsed() >= Duration::from_millis(160),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(replies, ["$1", "a", "$1", "b"]);
}

#[tokio::test]
async fn a_bandwidth_limit_paces_the_bytes() {
    let (_redis, proxy) = proxy().await;
    let mut stream = connect(&proxy).await;
    proxy.bandwidth(Some(100_000));
    let value = "x".repeat(50_000);
    let sent = Instant::now();
    send(&mut stream, &format!("ECHO {value}")).await;
    let header = reply_within(&mut stream, Duration::from_secs(5)).await;
    assert_eq!(header.as_deref(), Some("$50000"));
    let body = reply_within(&mut stream, Duration::from_secs(5)).await;
    assert_eq!(body.map(|b| b.len()), Some(50_000));
    // 50 KB each way at 100 KB/s: a second, give or take the chunking.
    assert!(
        sent.elapsed() >= Duration::from_millis(800),
        "{:?}",
        sent.elapsed()
    );
}

#[tokio::test]
async fn a_reset_ends_open_connections_and_new_ones_work() {
    let (_redis, proxy) = proxy().await;
    let mut stream = connect(&proxy).await;
    send(&mut stream, "PING").await;
    expect_reply(&mut stream, "+PONG").await;
    proxy.reset();
    let mut byte = [0_u8; 1];
    let read = timeout(QUIET, stream.read(&mut byte))
        .await
        .expect("the reset arrives at once");
    match read {
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        Ok(n) => panic!("an RST, not a close: read {n} bytes"),
    }
    let mut fresh = connect(&proxy).await;
    send(&mut fresh, "PING").await;
    expect_reply(&mut fresh, "+PONG").await;
}

#[tokio::test]
async fn a_silent_drop_leaves_old_connections_dead_and_open_and_lets_new_ones_through() {
    let (redis, proxy) = proxy().await;
    let mut old = connect(&proxy).await;
    send(&mut old, "PING").await;
    expect_reply(&mut old, "+PONG").await;
    proxy.drop_silently();
    send(&mut old, "SET fp-dropped 1").await;
    // Neither an answer nor a close nor a reset: the socket just hangs.
    assert_eq!(reply_within(&mut old, QUIET).await, None);
    assert_eq!(direct_get(&redis, "fp-dropped").await, None);
    let mut fresh = connect(&proxy).await;
    send(&mut fresh, "PING").await;
    expect_reply(&mut fresh, "+PONG").await;
    assert_eq!(reply_within(&mut old, QUIET).await, None, "still dead");
}
