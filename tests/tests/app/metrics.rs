//! Prometheus metrics: a known set of outcomes, scraped over HTTP, shows the right
//! counts; labels stay bounded; BullMQ's own per-minute metrics are recorded in Redis.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Router;
use queue_core::metrics::Metrics;
use queue_core::{Job, JobError, JobOptions, Processor, QueueApp};
use queue_tests::db::AnyDb;
use queue_tests::http::{get, listener};
use queue_tests::{wait_until, TestRedis, SOON};

async fn outcome(job: Job<String>) -> Result<(), JobError> {
    match job.name() {
        "flaky" => Err(JobError::retry(std::io::Error::other("smtp down"))),
        "slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(())
        }
        _ => Ok(()),
    }
}

/// One scraped series: `name{labels}` to its value.
type Series = BTreeMap<String, f64>;

/// Parses the OpenMetrics text: every line is a comment or `series value`, and the
/// text ends with `# EOF`.
fn parse(text: &str) -> Series {
    assert!(text.trim_end().ends_with("# EOF"), "no EOF marker:\n{text}");
    let mut series = Series::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (key, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not `series value`: {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        series.insert(key.to_owned(), value);
    }
    series
}

fn value(series: &Series, key: &str) -> f64 {
    *series
        .get(key)
        .unwrap_or_else(|| panic!("no `{key}` in {series:#?}"))
}

async fn serve(app: &QueueApp) -> std::net::SocketAddr {
    let router: Router = queue_axum::metrics_route(app).expect("the app records metrics");
    let (listener, addr) = listener().await;
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

#[tokio::test]
async fn a_scrape_shows_the_outcomes_and_depth_with_bounded_labels() {
    let redis = TestRedis::new("metrics");
    let db = AnyDb::sqlite("metrics").await;
    let app = redis
        .app(|b| {
            b.metrics(Metrics::new())
                .outbox(db.outbox().start_relay(false))
                .processor(
                    Processor::new("m")
                        .concurrency(8)
                        .job("ok", outcome)
                        .job("flaky", outcome)
                        .job("slow", outcome)
                        .any_job(outcome),
                )
        })
        .await;
    let q = app.queue::<String>("m").unwrap();
    let workers = app.start_workers().await.unwrap();
    for i in 0..3 {
        q.add(
            "ok",
            format!("ok-{i}"),
            JobOptions::new().job_id(format!("ok-{i}")),
        )
        .await
        .unwrap();
    }
    q.add(
        "flaky",
        "f".into(),
        JobOptions::new().job_id("flaky-1").attempts(2),
    )
    .await
    .unwrap();
    q.add(
        "slow",
        "s".into(),
        JobOptions::new()
            .job_id("slow-1")
            .timeout(Duration::from_millis(50)),
    )
    .await
    .unwrap();
    // Names from another producer, each different: one `*` series between them.
    for i in 0..20 {
        q.add(&format!("imported-{i}"), "x".into(), JobOptions::new())
            .await
            .unwrap();
    }
    // One row waits in the outbox (no relay runs).
    let outboxed = app.queue::<String>("later").unwrap();
    db.add_in(
        &outboxed,
        vec![("ok", "later".to_owned(), JobOptions::new())],
        true,
    )
    .await;
    wait_until(SOON, "every job finished", || {
        let q = q.clone();
        async move {
            let c = q.get_job_counts().await.ok()?;
            (c.completed == 23 && c.failed == 2 && c.active == 0).then_some(())
        }
    })
    .await;

    let addr = serve(&app).await;
    let response = get(addr, "/metrics").await;
    assert_eq!(response.status, 200);
    assert!(
        response
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/openmetrics-text")),
        "{:?}",
        response.headers
    );
    let text = String::from_utf8(response.body).unwrap();
    let s = parse(&text);

    let job = |metric: &str, name: &str| format!("{metric}{{queue=\"m\",name=\"{name}\"}}");
    assert_eq!(value(&s, &job("queue_jobs_completed_total", "ok")), 3.0);
    assert_eq!(value(&s, &job("queue_jobs_completed_total", "*")), 20.0);
    assert_eq!(value(&s, &job("queue_jobs_retried_total", "flaky")), 1.0);
    assert_eq!(value(&s, &job("queue_jobs_failed_total", "flaky")), 1.0);
    assert_eq!(value(&s, &job("queue_jobs_failed_total", "slow")), 1.0);
    assert_eq!(value(&s, &job("queue_jobs_timed_out_total", "slow")), 1.0);
    assert_eq!(
        value(&s, &job("queue_attempt_duration_seconds_count", "ok")),
        3.0
    );
    assert_eq!(
        value(&s, &job("queue_attempt_duration_seconds_count", "flaky")),
        2.0
    );
    // Only first attempts have a due time: the flaky job's retry is not in it.
    assert_eq!(
        value(&s, &job("queue_job_wait_seconds_count", "flaky")),
        1.0
    );
    assert_eq!(value(&s, "queue_worker_active_jobs{queue=\"m\"}"), 0.0);
    assert_eq!(value(&s, "queue_worker_concurrency{queue=\"m\"}"), 8.0);
    for metric in ["queue_jobs", "bullmq_job_count"] {
        let state = |state: &str| format!("{metric}{{queue=\"m\",state=\"{state}\"}}");
        assert_eq!(value(&s, &state("completed")), 23.0);
        assert_eq!(value(&s, &state("failed")), 2.0);
        assert_eq!(value(&s, &state("waiting")), 0.0);
        assert_eq!(value(&s, &state("waiting-children")), 0.0);
    }
    assert_eq!(value(&s, "queue_outbox_rows{state=\"pending\"}"), 1.0);
    assert_eq!(value(&s, "queue_outbox_rows{state=\"set_aside\"}"), 0.0);

    // Bounded: no job id, payload or generated name is ever a label value.
    for leaked in [
        "ok-0",
        "flaky-1",
        "slow-1",
        "imported-3",
        "smtp down",
        "job_id",
    ] {
        assert!(!text.contains(leaked), "`{leaked}` leaked into:\n{text}");
    }
    let names: std::collections::BTreeSet<&str> = s
        .keys()
        .filter_map(|k| k.split("name=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["*", "flaky", "ok", "slow"]
    );
    workers.shutdown(SOON).await;
}

#[tokio::test]
async fn a_route_for_an_app_without_metrics_is_refused_at_start_up() {
    let redis = TestRedis::new("metrics-off");
    let app = redis.app(|b| b).await;
    let refused = queue_axum::metrics_route::<()>(&app).map(drop);
    assert!(
        matches!(
            &refused,
            Err(queue_core::Error::InvalidOption {
                option: "metrics",
                ..
            })
        ),
        "{refused:?}"
    );
}

#[tokio::test]
async fn per_minute_metrics_are_recorded_where_bull_board_reads_them() {
    let redis = TestRedis::new("metrics-bullmq");
    let app = redis
        .app(|b| {
            b.processor(
                Processor::new("pm")
                    .per_minute_metrics(3)
                    .job("ok", outcome)
                    .job("flaky", outcome),
            )
        })
        .await;
    let q = app.queue::<String>("pm").unwrap();
    let workers = app.start_workers().await.unwrap();
    for i in 0..4 {
        q.add("ok", i.to_string(), JobOptions::new()).await.unwrap();
    }
    q.add("flaky", "f".into(), JobOptions::new()).await.unwrap();
    let mut conn = queue_tests::async_connection().await;
    let base = format!("{}:pm:metrics", redis.prefix());
    // BullMQ's keys: `<queue>:metrics:<completed|failed>`, a hash whose `count` Node's
    // `Queue.getMetrics` (and Bull Board) read, and its `:data` list per minute.
    let counts = wait_until(SOON, "the per-minute metrics are written", || {
        let (mut conn, base) = (conn.clone(), base.clone());
        async move {
            let completed: Option<u64> = redis::cmd("HGET")
                .arg(format!("{base}:completed"))
                .arg("count")
                .query_async(&mut conn)
                .await
                .ok()?;
            let failed: Option<u64> = redis::cmd("HGET")
                .arg(format!("{base}:failed"))
                .arg("count")
                .query_async(&mut conn)
                .await
                .ok()?;
            (completed == Some(4) && failed == Some(1)).then_some((completed, failed))
        }
    })
    .await;
    assert_eq!(counts, (Some(4), Some(1)));
    // A data point is pushed per minute boundary crossed, at most `max_data_points`:
    // move the last reading five minutes back, finish one more job, and the list holds
    // the three points the option allows.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let five_minutes_ago = now_ms - 5 * 60_000;
    let _: () = redis::cmd("HSET")
        .arg(format!("{base}:completed"))
        .arg("prevTS")
        .arg(five_minutes_ago)
        .query_async(&mut conn)
        .await
        .unwrap();
    q.add("ok", "one more".into(), JobOptions::new())
        .await
        .unwrap();
    let points = wait_until(SOON, "the data points are pushed", || {
        let (mut conn, base) = (conn.clone(), base.clone());
        async move {
            let points: u64 = redis::cmd("LLEN")
                .arg(format!("{base}:completed:data"))
                .query_async(&mut conn)
                .await
                .ok()?;
            (points > 0).then_some(points)
        }
    })
    .await;
    assert_eq!(
        points, 3,
        "five minutes crossed, three kept (max_data_points)"
    );
    workers.shutdown(SOON).await;
}

/// The macro's spelling of `Processor::per_minute_metrics`.
#[queue_core::processor("pm-macro", per_minute_metrics = 60)]
async fn counted(job: Job<String>) -> Result<(), JobError> {
    let _ = job;
    Ok(())
}

#[tokio::test]
async fn the_processor_macro_turns_on_per_minute_metrics() {
    let redis = TestRedis::new("metrics-macro");
    let app = redis
        .app(|b| {
            b.registrations(queue_core::app::Registrations::Queues(vec![
                "pm-macro".into()
            ]))
        })
        .await;
    let q = app.queue::<String>("pm-macro").unwrap();
    let workers = app.start_workers().await.unwrap();
    for i in 0..3 {
        q.add("count", i.to_string(), JobOptions::new())
            .await
            .unwrap();
    }
    let conn = queue_tests::async_connection().await;
    let key = format!("{}:pm-macro:metrics:completed", redis.prefix());
    let count = wait_until(SOON, "the per-minute metrics are written", || {
        let (mut conn, key) = (conn.clone(), key.clone());
        async move {
            let count: Option<u64> = redis::cmd("HGET")
                .arg(&key)
                .arg("count")
                .query_async(&mut conn)
                .await
                .ok()?;
            (count == Some(3)).then_some(count)
        }
    })
    .await;
    assert_eq!(count, Some(3));
    workers.shutdown(SOON).await;
}

/// The metric names a PromQL expression reads (`queue_*`, `bullmq_*`).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find(|c: char| c.is_ascii_lowercase()) {
        rest = &rest[at..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let word = &rest[..end];
        if word.starts_with("queue_") || word.starts_with("bullmq_") {
            names.push(word.to_owned());
        }
        rest = &rest[end..];
    }
    names
}

#[tokio::test]
async fn every_metric_the_grafana_dashboard_reads_is_in_a_scrape() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/grafana/queue-dashboard.json"
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let exprs: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap())
        .map(|t| t["expr"].as_str().unwrap())
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");

    let redis = TestRedis::new("metrics-grafana");
    let db = AnyDb::sqlite("metrics-grafana").await;
    let metrics = Metrics::new();
    let app = redis
        .app(|b| {
            b.metrics(metrics.clone()).outbox(db.outbox()).processor(
                Processor::new("dash")
                    .job("ok", outcome)
                    .job("flaky", outcome)
                    .job("slow", outcome),
            )
        })
        .await;
    let q = app.queue::<String>("dash").unwrap();
    let workers = app.start_workers().await.unwrap();
    // Every outcome once, so that every family has a sample: completed; retried, then
    // failed; timed out.
    q.add("ok", "1".into(), JobOptions::new()).await.unwrap();
    q.add("flaky", "2".into(), JobOptions::new().attempts(2))
        .await
        .unwrap();
    q.add(
        "slow",
        "3".into(),
        JobOptions::new().timeout(Duration::from_millis(50)),
    )
    .await
    .unwrap();
    wait_until(SOON, "the jobs finish", || async {
        let counts = q.get_job_counts().await.ok()?;
        (counts.completed == 1 && counts.failed == 2).then_some(())
    })
    .await;
    workers.shutdown(SOON).await;
    let scraped = metrics.render(&app).await.unwrap();
    // Every series name a family can have, from its `# TYPE` line: a counter nothing
    // has counted yet has no sample, but its name is right.
    let mut exported = std::collections::BTreeSet::new();
    for line in scraped.lines() {
        let mut words = line.split(' ');
        let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            continue;
        };
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        exported.extend(suffixes.iter().map(|s| format!("{name}{s}")));
    }
    // A stall needs a worker process killed mid-job: `worker/stalled.rs` does that, and reads
    // this very series from its scrape.
    exported.insert("queue_jobs_stalled_total".to_owned());
    for expr in exprs {
        for name in metric_names(expr) {
            assert!(
                exported.contains(&name),
                "the dashboard reads `{name}`, which no scrape has: {expr}\n{scraped}"
            );
        }
    }
}
