//! A server in a process of 256 file descriptors, flooded with 300 connections that
//! never send a byte, still answers normal requests whose handlers need a descriptor
//! of their own (a file here; a database connection or a Redis reconnect in an app):
//! the connection cap keeps descriptors for them. Alone in its binary, because it lowers
//! the whole process's limit.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use queue_axum::ServeLimits;
use queue_tests::http::{get as http_get, listener};

/// Reads a file: a descriptor of its own for each request.
async fn page(
    path: axum::extract::State<std::path::PathBuf>,
) -> Result<String, axum::http::StatusCode> {
    tokio::fs::read_to_string(&*path)
        .await
        .map_err(|_| axum::http::StatusCode::INTERNAL_SERVER_ERROR)
}

/// A slowloris attacker in another process (with its own descriptors): it keeps 300
/// connections open that never send a byte, and opens another whenever the server
/// closes one.
const FLOOD: &str = r#"
import selectors, socket, sys, time
port, wanted = int(sys.argv[1]), 300
watch = selectors.DefaultSelector()
def connect():
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    watch.register(s, selectors.EVENT_READ)
for _ in range(wanted):
    connect()
print("ready", flush=True)
end = time.time() + 120
while time.time() < end:
    for key, _ in watch.select(timeout=0.5):
        s = key.fileobj
        try:
            closed = s.recv(1) == b""
        except OSError:
            closed = True
        if closed:
            watch.unregister(s)
            s.close()
            connect()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_connections_leaves_descriptors_for_the_handlers() {
    let file = std::env::temp_dir().join(queue_core::testing::unique_prefix("fd-page"));
    std::fs::write(&file, "hello").unwrap();
    let (listener, addr) = listener().await;
    // Started before this process's limit is lowered: the attacker's sockets are its own.
    let mut flood = Command::new("python3")
        .arg("-c")
        .arg(FLOOD)
        .arg(addr.port().to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut ready = String::new();
    BufReader::new(flood.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    let lowered = Command::new("prlimit")
        .arg(format!("--pid={}", std::process::id()))
        .arg("--nofile=256:256")
        .status()
        .expect("prlimit runs");
    assert!(lowered.success());
    assert_eq!(ServeLimits::default().max_connections_limit(), 128);

    let router = Router::new()
        .route("/page", get(page))
        .with_state(file.clone());
    // Connections that send no header are cut after 2 s.
    let limits = ServeLimits::default().header_read(Duration::from_secs(2));
    tokio::spawn(queue_axum::serve_with_limits(
        listener,
        router,
        None,
        Duration::from_secs(1),
        std::future::pending(),
        limits,
    ));

    let mut answers = Vec::new();
    for _ in 0..7 {
        let answer = tokio::time::timeout(Duration::from_secs(20), http_get(addr, "/page")).await;
        answers.push(answer.map(|r| r.status).unwrap_or(0));
    }
    let _ = flood.kill();
    let _ = flood.wait();
    let _ = std::fs::remove_file(&file);
    assert_eq!(answers, vec![200; 7], "0: no answer within 20 s");
}
