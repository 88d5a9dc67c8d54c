//! A server in a process of 256 file descriptors, flooded by one client with 400
//! connections that never send a byte, still answers other clients' requests at once,
//! and requests whose handlers need a descriptor of their own (a file here; a database
//! connection or a Redis reconnect in an app): the connection cap keeps descriptors for
//! them, the per-client cap keeps slots for others, and a connection over a cap (the
//! client's, then, with a second flood, the server's) is answered at once instead of
//! waiting in the backlog. Alone in its binary, because it lowers the whole process's
//! limit.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use queue_axum::ServeLimits;
use queue_tests::http::{get as http_get, listener};
use queue_tests::{wait_until, SOON};

/// Reads a file: a descriptor of its own for each request.
async fn page(
    path: axum::extract::State<std::path::PathBuf>,
) -> Result<String, axum::http::StatusCode> {
    tokio::fs::read_to_string(&*path)
        .await
        .map_err(|_| axum::http::StatusCode::INTERNAL_SERVER_ERROR)
}

/// A slowloris attacker in another process (with its own descriptors), from a loopback
/// address of its own: once it reads a line, it keeps 400 connections open that never
/// send a byte, and opens another whenever the server closes one.
const FLOOD: &str = r#"
import selectors, socket, sys, time
port, source, wanted = int(sys.argv[1]), sys.argv[2], 400
sys.stdin.readline()
watch = selectors.DefaultSelector()
def connect():
    s = socket.socket()
    s.bind((source, 0))
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

/// A flood from `source` against `port`, waiting for [`unleash`]. Started before this
/// process's limit of descriptors is lowered, which a child would inherit.
fn flood_from(source: &str, port: u16) -> Child {
    Command::new("python3")
        .arg("-c")
        .arg(FLOOD)
        .arg(port.to_string())
        .arg(source)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs")
}

/// Lets `flood` go; back once its connections are opened.
fn unleash(flood: &mut Child) {
    use std::io::Write;
    let go = flood.stdin.as_mut().expect("the flood's stdin");
    go.write_all(b"go\n").unwrap();
    go.flush().unwrap();
    let mut ready = String::new();
    BufReader::new(flood.stdout.as_mut().expect("the flood's stdout"))
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_connections_leaves_descriptors_for_the_handlers() {
    let file = std::env::temp_dir().join(queue_core::testing::unique_prefix("fd-page"));
    std::fs::write(&file, "hello").unwrap();
    let (listener, addr) = listener().await;
    // Started before this process's limit is lowered: the attackers' sockets are their own.
    let mut floods = vec![
        flood_from("127.0.0.2", addr.port()),
        flood_from("127.0.0.3", addr.port()),
    ];
    unleash(&mut floods[0]);
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
    // The default limits: connections that send no header are cut after 10 s.
    tokio::spawn(queue_axum::serve_with_limits(
        listener,
        router,
        None,
        Duration::from_secs(1),
        std::future::pending(),
        ServeLimits::default(),
    ));

    // The flooding address holds its share (64 of 128) and is refused at once past it:
    // 429, not a wait. Or closed unanswered: the flood's own connections past its share
    // keep up to 64 refusals being written (each lingers half a second), and past those
    // the server closes a refused connection without an answer rather than spend a
    // descriptor on it (`admission.rs`, whose tests check the 429 itself); a try that
    // waits a second is neither.
    let own = wait_until(SOON, "the flooding address to be refused", || async {
        let head = tokio::time::timeout(Duration::from_secs(1), get_from([127, 0, 0, 2], addr))
            .await
            .ok()?;
        (head.is_empty() || head.starts_with("HTTP/1.1 429 ")).then_some(head)
    })
    .await;
    assert!(
        own.is_empty() || own.to_ascii_lowercase().contains("retry-after: 1"),
        "{own}"
    );
    // Another client is answered at once, not after the flood's connections time out,
    // by handlers that still have descriptors to open files with.
    let mut answers = Vec::new();
    for _ in 0..7 {
        let answer = tokio::time::timeout(Duration::from_secs(1), http_get(addr, "/page")).await;
        answers.push(answer.map(|r| r.status).unwrap_or(0));
    }

    // A second flooding address takes the other half: at the cap, a new client is
    // answered 503 at once, rather than left in the backlog.
    unleash(&mut floods[1]);
    let full = wait_until(SOON, "the cap to be reached", || async {
        let head = tokio::time::timeout(Duration::from_secs(1), get_from([127, 0, 0, 1], addr))
            .await
            .unwrap_or_default();
        head.starts_with("HTTP/1.1 503 ").then_some(head)
    })
    .await;
    for flood in &mut floods {
        let _ = flood.kill();
        let _ = flood.wait();
    }
    let _ = std::fs::remove_file(&file);
    assert_eq!(answers, vec![200; 7], "0: no answer within a second");
    assert!(
        full.to_ascii_lowercase().contains("retry-after: 1"),
        "{full}"
    );
}

/// `GET /page` from a source address of the test's choosing; the answer's head.
async fn get_from(source: [u8; 4], addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from((source, 0)))
        .unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let request = format!("GET /page HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}
