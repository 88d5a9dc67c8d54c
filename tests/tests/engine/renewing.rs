//! The renewing connection's deadline (engine change 30): a command fails once the
//! connection it went out on has been silent for the allowed silence, whatever its
//! replacement hears meanwhile.

use std::time::{Duration, Instant};

use bullmq::options::RedisConnectionOptions;
use bullmq::redis_connection::RedisConnection;
use queue_tests::fault_proxy::FaultProxy;
use queue_tests::PrivateRedis;

const SILENCE: Duration = Duration::from_millis(800);
/// The deadline fires 50 ms after the silence; the rest is the machine's.
const MARGIN: Duration = Duration::from_millis(400);

async fn ping(conn: &RedisConnection) -> Result<String, bullmq::Error> {
    conn.cmd(&mut redis::cmd("PING")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_on_a_dead_socket_is_not_kept_waiting_by_replies_on_its_replacement() {
    let redis = PrivateRedis::start();
    let proxy = FaultProxy::start(&format!("127.0.0.1:{}", redis.port())).await;
    let options = RedisConnectionOptions::new()
        .url(proxy.url())
        .renew_after(SILENCE);
    // The shared connection alone, as queue-core opens it (no second, plain socket).
    let conn = RedisConnection::new_managed_only(&options)
        .await
        .expect("a connection");
    assert_eq!(ping(&conn).await.expect("a reply"), "PONG");

    // The socket dies without a sound, with two commands on it, sent 400 ms apart.
    proxy.drop_silently();
    let stuck = |conn: RedisConnection| {
        tokio::spawn(async move {
            let sent = Instant::now();
            let result = ping(&conn).await;
            (result, sent.elapsed())
        })
    };
    let first = stuck(conn.clone());
    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = stuck(conn.clone());
    // Once the first has waited the silence, the next command goes out on a new
    // connection, whose replies keep coming while the second still waits on the dead
    // socket: they say nothing of it.
    tokio::time::sleep(SILENCE - Duration::from_millis(300)).await;
    let heard_meanwhile = Instant::now();
    while heard_meanwhile.elapsed() < SILENCE * 3 {
        assert_eq!(
            ping(&conn).await.expect("the new connection answers"),
            "PONG"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = first.await.expect("the first stuck command's task");
    let stuck = second;
    let (result, waited) = stuck.await.expect("the stuck command's task");
    assert!(
        matches!(&result, Err(bullmq::Error::Redis(e)) if e.is_timeout()),
        "{result:?}"
    );
    assert!(
        waited <= SILENCE + MARGIN,
        "the command on the dead socket waited {waited:?}"
    );
}
