//! A TCP proxy on loopback that puts a network's faults between our processes and Redis
//! (issue #48): a blackhole (sockets stay open, nothing is forwarded, as a load
//! balancer that silently dropped a connection leaves it), added latency with jitter, a
//! bandwidth limit, a reset of every connection, and one direction cut.
//!
//! Written here rather than installed (Shopify's toxiproxy is a Go binary that none of
//! this machine's registries carries): a test starts one in-process, on a free port, in
//! front of any Redis, and changes its faults while the test runs.
//!
//! Bytes held back by a blackhole or a cut are delivered once the fault is lifted, in
//! order, as TCP retransmits them when a partition heals before the connection times
//! out; a connection accepted during a blackhole reaches Redis only then. A reset drops
//! what was held, as the peer's RST does. A silent drop is the other ending: the open
//! connections stay dead, without a sound, and only new ones get through (a dead
//! connection's tasks and what it held stay until the proxy is dropped).
//!
//! A blackhole here still accepts new TCP connections (the kernel completes the
//! handshake) and answers nothing on them, where a real one drops the SYN: a client's
//! connection timeout is not exercised, so recovery measured through it is a best case.
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use fault_proxy::FaultProxy;
//!
//! let proxy = FaultProxy::start("127.0.0.1:6379").await;
//! let url = proxy.url(); // give the app this URL instead of Redis's
//! proxy.blackhole();
//! tokio::time::sleep(Duration::from_secs(20)).await;
//! // The link is back, but the connections it carried are gone without a sound.
//! proxy.drop_silently();
//! proxy.heal();
//! # let _ = url;
//! # }
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Which way bytes go through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the client to Redis (commands).
    ToServer,
    /// From Redis to the client (replies).
    ToClient,
}

/// The faults in force. Changed whole, through [`FaultProxy`]'s methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Faults {
    /// Commands are held back.
    hold_to_server: bool,
    /// Replies are held back.
    hold_to_client: bool,
    /// Added to each chunk's way, each direction.
    latency: Duration,
    /// Up to this much more per chunk, drawn anew for each (order is kept).
    jitter: Duration,
    /// Bytes per second each way, per connection; `None`: no limit.
    bandwidth: Option<u64>,
    /// Bumped by each reset: connections older than it end with an RST.
    resets: u64,
    /// Bumped by each silent drop: connections older than it forward nothing, ever.
    drops: u64,
}

/// The generation a connection was born in: what tells it a later reset or drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Born {
    resets: u64,
    drops: u64,
}

impl Faults {
    fn born(&self) -> Born {
        Born {
            resets: self.resets,
            drops: self.drops,
        }
    }

    /// Whether a connection born in `born` has been reset since.
    fn reset_since(&self, born: Born) -> bool {
        self.resets != born.resets
    }

    /// Whether a connection born in `born` forwards nothing `direction` now.
    fn holds(&self, direction: Direction, born: Born) -> bool {
        let held = match direction {
            Direction::ToServer => self.hold_to_server,
            Direction::ToClient => self.hold_to_client,
        };
        held || self.drops != born.drops
    }
}

/// A running proxy: stops, and drops its connections, when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    port: u16,
    faults: watch::Sender<Faults>,
    accept: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on a free loopback port in front of `upstream` (`host:port`), forwarding
    /// faithfully until told otherwise. Panics when it cannot listen (a test's setup).
    pub async fn start(upstream: &str) -> FaultProxy {
        let upstream: SocketAddr = upstream.parse().expect("upstream is host:port");
        assert!(
            upstream.ip().is_loopback(),
            "the fault proxy is for loopback only"
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let port = listener.local_addr().expect("a bound listener").port();
        let (faults, watching) = watch::channel(Faults::default());
        let accept = tokio::spawn(accept_loop(listener, upstream, watching));
        FaultProxy {
            port,
            faults,
            accept,
        }
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`: Redis, through the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Forwards nothing either way; connections stay open and new ones are accepted,
    /// silently (no FIN, no RST, no answer).
    pub fn blackhole(&self) {
        self.faults.send_modify(|f| {
            f.hold_to_server = true;
            f.hold_to_client = true;
        });
    }

    /// Forwards nothing in `direction` (the other way works).
    pub fn cut(&self, direction: Direction) {
        self.faults.send_modify(|f| match direction {
            Direction::ToServer => f.hold_to_server = true,
            Direction::ToClient => f.hold_to_client = true,
        });
    }

    /// Ends a blackhole or a cut: what was held is delivered, in order.
    pub fn heal(&self) {
        self.faults.send_modify(|f| {
            f.hold_to_server = false;
            f.hold_to_client = false;
        });
    }

    /// Adds `latency`, and up to `jitter` more, to every chunk each way (a round trip
    /// pays it twice).
    pub fn latency(&self, latency: Duration, jitter: Duration) {
        self.faults.send_modify(|f| {
            f.latency = latency;
            f.jitter = jitter;
        });
    }

    /// Limits each connection to `bytes_per_second` each way; `None` lifts the limit.
    pub fn bandwidth(&self, bytes_per_second: Option<u64>) {
        self.faults
            .send_modify(|f| f.bandwidth = bytes_per_second.map(|b| b.max(1)));
    }

    /// Ends every open connection with an RST, both sides; new ones are forwarded.
    pub fn reset(&self) {
        self.faults.send_modify(|f| f.resets += 1);
    }

    /// Every open connection goes dead without a sound: it stays open and forwards
    /// nothing, ever, as a load balancer or NAT that forgot it leaves it (what it held
    /// is lost). New connections are forwarded (unless a blackhole holds them).
    pub fn drop_silently(&self) {
        self.faults.send_modify(|f| f.drops += 1);
    }

    /// No fault at all: no hold, latency or limit.
    pub fn clear(&self) {
        self.faults.send_modify(|f| {
            *f = Faults {
                resets: f.resets,
                drops: f.drops,
                ..Faults::default()
            }
        });
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Every connection's tasks see the reset and end.
        self.faults.send_modify(|f| f.resets += 1);
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, faults: watch::Receiver<Faults>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of file descriptors, say: not a reason to spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        tokio::spawn(connection(client, upstream, faults.clone()));
    }
}

/// One client connection: connected upstream once nothing holds commands back (a
/// blackhole's new connection hangs), then pumped both ways until either side closes
/// or a reset.
async fn connection(client: TcpStream, upstream: SocketAddr, mut faults: watch::Receiver<Faults>) {
    let born = faults.borrow().born();
    let connect = faults
        .wait_for(|f| f.reset_since(born) || !f.holds(Direction::ToServer, born))
        .await
        .is_ok_and(|f| !f.reset_since(born));
    if !connect {
        abort(&client);
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        abort(&client);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // A close is passed on as a close (the writer's shutdown), so each way ends when
    // its side closes; a reset ends both, each pump aborting the socket it reads.
    tokio::join!(
        pump(
            client_read,
            server_write,
            Direction::ToServer,
            faults.clone(),
            born
        ),
        pump(server_read, client_write, Direction::ToClient, faults, born),
    );
}

/// Ends `stream` with an RST rather than a FIN.
fn abort(stream: &TcpStream) {
    let _ = stream.set_zero_linger();
}

/// A chunk on its way, and when it may be written.
struct Chunk {
    bytes: Vec<u8>,
    due: Instant,
}

/// Moves bytes one way: read, held while the direction is held, delayed and paced as
/// the faults say, written in order. Returns when its side closes, or on a reset, which
/// aborts the socket it reads (the other pump aborts the other).
async fn pump(
    mut from: OwnedReadHalf,
    to: OwnedWriteHalf,
    direction: Direction,
    faults: watch::Receiver<Faults>,
    born: Born,
) {
    // The reader stamps chunks and the writer waits for each one's time, so that a
    // latency delays every chunk without spacing them out by it.
    let (chunks, queued) = mpsc::unbounded_channel::<Chunk>();
    let writer = tokio::spawn(write_chunks(to, queued, direction, faults.clone(), born));
    let mut buf = vec![0_u8; 16 * 1024];
    let mut watching = faults.clone();
    let mut last_due = Instant::now();
    loop {
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            _ = watching.wait_for(|f| f.reset_since(born)) => break,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let f = *faults.borrow();
        let delay = f.latency + jitter(f.jitter);
        // Order is kept: a chunk is never due before the one ahead of it.
        let due = (Instant::now() + delay).max(last_due);
        last_due = due;
        if chunks
            .send(Chunk {
                bytes: buf[..n].to_vec(),
                due,
            })
            .is_err()
        {
            break;
        }
    }
    let reset = faults.borrow().reset_since(born) || faults.has_changed().is_err();
    if reset {
        // The socket closes with an RST once the other pump's writer lets go of its
        // write half; this pump's writer sees the reset and lets go of its own.
        let _ = from.as_ref().set_zero_linger();
    } else {
        drop(chunks);
    }
    let _ = writer.await;
}

/// Writes `queued` chunks to `to`: each when due, while `direction` is not held, at the
/// bandwidth allowed. On a reset it lets go of `to` without the FIN that dropping a
/// write half sends, so that the socket's close is the reset's RST.
async fn write_chunks(
    mut to: OwnedWriteHalf,
    mut queued: mpsc::UnboundedReceiver<Chunk>,
    direction: Direction,
    mut faults: watch::Receiver<Faults>,
    born: Born,
) {
    let mut watching = faults.clone();
    loop {
        let next = tokio::select! {
            biased;
            _ = watching.wait_for(|f| f.reset_since(born)) => return to.forget(),
            next = queued.recv() => next,
        };
        let Some(chunk) = next else { break };
        tokio::select! {
            biased;
            _ = watching.wait_for(|f| f.reset_since(born)) => return to.forget(),
            () = wait_until(chunk.due) => {}
        }
        // Held while the direction is; a dropped proxy counts as a reset.
        let f = match faults
            .wait_for(|f| f.reset_since(born) || !f.holds(direction, born))
            .await
        {
            Ok(f) if !f.reset_since(born) => *f,
            _ => return to.forget(),
        };
        let paced = async {
            if let Some(rate) = f.bandwidth {
                let secs = chunk.bytes.len() as f64 / rate as f64;
                tokio::time::sleep(Duration::from_secs_f64(secs)).await;
            }
            to.write_all(&chunk.bytes).await
        };
        // A peer that stopped reading must not keep a reset from happening.
        tokio::select! {
            biased;
            _ = watching.wait_for(|f| f.reset_since(born)) => return to.forget(),
            written = paced => {
                if written.is_err() {
                    return;
                }
            }
        }
    }
    let _ = to.shutdown().await;
}

/// Waits until `due`, to tens of microseconds: tokio's timer ticks by the millisecond,
/// which would add up to a millisecond to every chunk's delay (a 0.5 ms delay each way
/// made a 3.2 ms round trip). So it waits by the timer until the last two milliseconds,
/// and the rest on this thread (a blocking sleep of at most that long).
async fn wait_until(due: Instant) {
    let coarse = due.checked_sub(Duration::from_millis(2));
    if let Some(coarse) = coarse.filter(|c| *c > Instant::now()) {
        tokio::time::sleep_until(coarse).await;
    }
    let rest = due.saturating_duration_since(Instant::now());
    if !rest.is_zero() {
        std::thread::sleep(rest);
    }
}

/// A uniform draw in `[0, jitter)`: what a chunk's latency grows by.
fn jitter(jitter: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    if jitter.is_zero() {
        return Duration::ZERO;
    }
    let nanos = u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX);
    // Uniform enough for a test's jitter, without a random-number crate: std's hasher
    // keys are random, and each `RandomState` takes new ones.
    let draw = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        % nanos.max(1);
    Duration::from_nanos(draw)
}
