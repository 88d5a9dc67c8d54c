//! A silent death of the link to Redis (#48): for 20 s nothing gets through and nothing
//! says so (no FIN, no RST), under a producer, a worker at concurrency 10 and the status
//! route; then the link is back, but the connections it carried are gone without a
//! sound, as a load balancer or a NAT that forgot them leaves them. The app must notice
//! by its own timeouts, connect anew, and lose nothing, without a restart. One test in
//! this binary: it records every thread's logs through the global subscriber.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_axum::{job_routes, QueueLayer};
use queue_core::app::Registrations;
use queue_core::prelude::*;
use queue_tests::fault_proxy::FaultProxy;
use queue_tests::http::get;
use queue_tests::logs::{as_text, repeated_lines, Logs};
use queue_tests::{wait_until, PrivateRedis, SOON};

/// How long the link is dead.
const OUTAGE: Duration = Duration::from_secs(20);
/// The app's command timeout: no call may wait longer (and a margin for the machine).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
const MARGIN: Duration = Duration::from_secs(1);
/// How soon after the link's return every job added is done: the route and adds work
/// again about 2.5 s after it (a command's timeout of silence, then a new connection);
/// the worker's last job ran about 8.4 s after it, on this machine (a blocking read
/// begun on a connection the drop killed waits out its watchdog, 5 s and 1 s).
const CATCH_UP: Duration = Duration::from_secs(15);
/// A line that says it repeats at most once in this long (`queue-axum`'s 503 warning).
const SELF_THROTTLED: &str = "repeats within 10 s log at debug";

/// Each payload's runs.
type Runs = Arc<Mutex<HashMap<u64, u32>>>;

/// What the producer saw of one add.
struct Add {
    n: u64,
    ok: bool,
    /// A failure that was not the typed timeout an HTTP client gets 503 for.
    other_failure: Option<String>,
    took: Duration,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_silent_seconds_lose_nothing_run_nothing_twice_and_need_no_restart() {
    let logs = Logs::default();
    tracing::subscriber::set_global_default(logs.subscriber()).expect("the only subscriber");
    let redis = PrivateRedis::start_with(&["--appendonly", "no", "--save", ""]);
    let proxy = FaultProxy::start(&format!("127.0.0.1:{}", redis.port())).await;
    let runs: Runs = Arc::default();
    let counted = runs.clone();
    // When a handler last ran: how soon the worker caught up.
    let last_run: Arc<Mutex<Option<Instant>>> = Arc::default();
    let stamped = last_run.clone();
    let app = QueueApp::builder()
        .redis(proxy.url())
        .command_timeout(COMMAND_TIMEOUT)
        .registrations(Registrations::None)
        .processor(
            Processor::new("mail")
                .concurrency(10)
                .any_job(move |job: Job<u64>| {
                    let counted = counted.clone();
                    let stamped = stamped.clone();
                    async move {
                        *counted.lock().expect("runs").entry(job.data).or_insert(0) += 1;
                        *stamped.lock().expect("last run") = Some(Instant::now());
                        Ok::<(), JobError>(())
                    }
                }),
        )
        .build()
        .await
        .expect("the app starts through the proxy");
    let workers = app.start_workers().await.expect("workers start");
    let mail = app.queue::<u64>("mail").expect("the queue");
    let first = mail
        .add("mail", 0, JobOptions::new())
        .await
        .expect("an add");
    let addr = queue_tests::http::serve(job_routes().layer(QueueLayer::new(&app))).await;
    let status_path = format!("/jobs/mail/{}", first.id);
    assert_eq!(get(addr, &status_path).await.status, 200);
    let recheck_path = status_path.clone();

    // The producer adds all along, one at a time; the status route is asked twice a
    // second.
    let stop = Flag::default();
    let producer = tokio::spawn({
        let mail = mail.clone();
        let stop = stop.clone();
        async move {
            let mut adds = Vec::new();
            let mut n = 1;
            while !stop.is_set() {
                let started = Instant::now();
                let added = mail.add("mail", n, JobOptions::new()).await;
                let other_failure = match &added {
                    Ok(_) | Err(queue_core::Error::Timeout { what: "add", .. }) => None,
                    Err(e) => Some(format!("{e:?}")),
                };
                adds.push(Add {
                    n,
                    ok: added.is_ok(),
                    other_failure,
                    took: started.elapsed(),
                });
                n += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            adds
        }
    });
    let prober = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut answers = Vec::new();
            while !stop.is_set() {
                let started = Instant::now();
                let status = get(addr, &status_path).await.status;
                answers.push((status, started.elapsed()));
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            answers
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;

    let before = logs.all().len();
    proxy.blackhole();
    tokio::time::sleep(OUTAGE).await;
    proxy.drop_silently();
    proxy.heal();
    let back = Instant::now();
    // Back within moments: the route knows again (and the producer's adds go through,
    // checked below).
    wait_until(CATCH_UP, "the route to work again", || async {
        (get(addr, &recheck_path).await.status == 200).then_some(())
    })
    .await;
    eprintln!(
        "the route works again {:?} after the return",
        back.elapsed()
    );
    // The producer and the prober see it too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.set();
    let adds = producer.await.expect("the producer");
    let answers = prober.await.expect("the prober");

    // No call waited past its timeout, and an add that failed said why as a timeout
    // (an add is one command, which the connection ends: no timer of the add's own).
    let slowest_add = adds.iter().map(|a| a.took).max().unwrap_or_default();
    eprintln!("the slowest add took {slowest_add:?}");
    let other_failures: Vec<&String> = adds
        .iter()
        .filter_map(|a| a.other_failure.as_ref())
        .collect();
    assert!(other_failures.is_empty(), "{other_failures:?}");
    assert!(
        slowest_add <= COMMAND_TIMEOUT + MARGIN,
        "an add took {slowest_add:?}"
    );
    let slowest_answer = answers.iter().map(|a| a.1).max().unwrap_or_default();
    assert!(
        slowest_answer <= COMMAND_TIMEOUT + MARGIN,
        "a status answer took {slowest_answer:?}"
    );
    // The route said "unavailable" while it could not know, and knew again after.
    let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    assert!(statuses.contains(&503), "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
    assert_eq!(statuses.last(), Some(&200), "{statuses:?}");
    // Adds failed during the outage and worked after it.
    assert!(
        adds.iter().any(|a| !a.ok),
        "no add failed in 20 s of outage"
    );
    let added: Vec<u64> = adds.iter().filter(|a| a.ok).map(|a| a.n).collect();
    assert!(
        adds.iter().rev().take(5).all(|a| a.ok),
        "the last adds, after the link's return, failed"
    );

    // Every job added ran, once, within moments of the link's return.
    wait_until(CATCH_UP, "every added job to run", || async {
        let runs = runs.lock().expect("runs");
        added.iter().all(|n| runs.contains_key(n)).then_some(())
    })
    .await;
    let caught_up = last_run
        .lock()
        .expect("last run")
        .map(|at| at.saturating_duration_since(back))
        .unwrap_or_default();
    eprintln!("the last job ran {caught_up:?} after the return");
    assert!(
        caught_up <= CATCH_UP,
        "caught up {caught_up:?} after the return"
    );
    workers.shutdown(SOON).await;
    let runs = runs.lock().expect("runs").clone();
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "ran more than once: {twice:?}");

    // Quiet: each component says once that it lost Redis and once that it is back.
    let during: Vec<_> = logs.all()[before..]
        .iter()
        .filter(|e| e.level <= tracing::Level::INFO)
        .cloned()
        .collect();
    let text = as_text(&during);
    eprintln!("{} lines at info or above:\n{text}", during.len());
    // A line that throttles itself may come once per its period.
    let (throttled, budgeted): (Vec<_>, Vec<_>) = during
        .into_iter()
        .partition(|e| e.fields.contains(SELF_THROTTLED));
    let periods = usize::try_from(OUTAGE.as_secs() / 10).unwrap_or(usize::MAX) + 1;
    assert!(throttled.len() <= periods, "{text}");
    let repeated = repeated_lines(&budgeted);
    assert!(
        repeated.is_empty(),
        "repeated lines {repeated:?} in:\n{text}"
    );
    // The worker says it lost Redis and has it back, once each.
    assert!(
        budgeted
            .iter()
            .any(|e| e.fields.contains("worker has Redis back")),
        "{text}"
    );
}

/// A flag set once, read by many tasks.
#[derive(Clone, Default)]
struct Flag(Arc<std::sync::atomic::AtomicBool>);

impl Flag {
    fn set(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn is_set(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}
