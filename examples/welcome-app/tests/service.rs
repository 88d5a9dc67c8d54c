//! The welcome-app end to end over HTTP, on real Redis and SQLite (and once on
//! PostgreSQL): sign-up and exactly one welcome mail, dedup of jobs and of effects,
//! retries with backoff, birthday grants, validation, and restarts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use queue_core::{Dep, Job, JobOptions, JobState, QueueApp, Registrations, WorkerEvent, Workers};
use queue_tests::http::{listener, post_json, request};
use queue_tests::{wait_for_state, TestRedis, SOON};
use welcome_app::config::Config;
use welcome_app::db::Db;
use welcome_app::jobs::coupons::{BirthdayGrant, BirthdayScan, Coupons, ScanZone};
use welcome_app::jobs::email::{send_welcome, WelcomeEmail};
use welcome_app::mailer::{Delivery, FailurePolicy, Mailer};

/// A running service with its own Redis prefix and SQLite file.
struct Running {
    addr: SocketAddr,
    app: QueueApp,
    db: Db,
    workers: Option<Workers>,
    redis: TestRedis,
    dir: ScratchDir,
}

struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(label: &str) -> Self {
        let dir = std::env::temp_dir().join(queue_core::testing::unique_prefix(label));
        std::fs::create_dir_all(&dir).unwrap();
        ScratchDir(dir)
    }

    fn sqlite_url(&self) -> String {
        format!("sqlite://{}", self.0.join("welcome.db").display())
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config(redis: &TestRedis, database_url: &str) -> Config {
    let vars = [
        ("REDIS_URL", queue_tests::redis_url()),
        ("QUEUE_PREFIX", redis.prefix().to_owned()),
        ("DATABASE_URL", database_url.to_owned()),
        ("WELCOME_BACKOFF_MS", "50".to_owned()),
    ];
    Config::from_lookup(|name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    })
    .unwrap()
}

async fn start(label: &str, failures: FailurePolicy) -> Running {
    let redis = TestRedis::new(label);
    let dir = ScratchDir::new(label);
    start_with(redis, dir, failures).await
}

async fn start_with(redis: TestRedis, dir: ScratchDir, failures: FailurePolicy) -> Running {
    let service = welcome_app::build(
        &config(&redis, &dir.sqlite_url()),
        failures,
        Registrations::All,
    )
    .await
    .unwrap();
    let workers = service.app.start_workers().await.unwrap();
    let (listener, addr) = listener().await;
    let router = service.router;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Running {
        addr,
        app: service.app,
        db: service.db,
        workers: Some(workers),
        redis,
        dir,
    }
}

impl Running {
    async fn stop(mut self) -> (TestRedis, ScratchDir) {
        if let Some(workers) = self.workers.take() {
            workers.shutdown(SOON).await;
        }
        (self.redis, self.dir)
    }

    async fn signup(&self, email: &str, birthday: &str) -> queue_tests::http::HttpResponse {
        let body = serde_json::json!({"email": email, "name": "Ada", "birthday": birthday});
        post_json(self.addr, "/users", &[], &body).await
    }
}

#[tokio::test]
async fn signup_answers_202_and_the_welcome_mail_lands_exactly_once() {
    let svc = start("wa-signup", FailurePolicy::Never).await;
    let response = svc.signup("ada@example.com", "1990-05-17").await;
    assert_eq!(response.status, 202);
    let body = response.json();
    assert_eq!(body["jobId"], "welcome-1");
    assert_eq!(body["userId"], 1);
    assert_eq!(response.header("location"), Some("/jobs/email/welcome-1"));

    let email = svc.app.queue::<WelcomeEmail>("email").unwrap();
    wait_for_state(&email, "welcome-1", JobState::Completed, SOON).await;
    assert_eq!(svc.db.outbox_count("welcome:1").await.unwrap(), 1);
    let status = queue_tests::http::get(svc.addr, "/jobs/email/welcome-1")
        .await
        .json();
    assert_eq!(status["state"], "completed");
    assert_eq!(status["returnValue"], "sent");

    // The same job id again adds nothing.
    let again = email
        .add(
            "welcome",
            WelcomeEmail {
                user_id: 1,
                email: "ada@example.com".into(),
                name: "Ada".into(),
            },
            welcome_app::jobs::email::options(1, Duration::from_millis(50)),
        )
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(email.get_job_counts().await.unwrap().completed, 1);
    svc.stop().await;
}

#[tokio::test]
async fn a_welcome_job_that_runs_twice_sends_once() {
    let svc = start("wa-twice", FailurePolicy::Never).await;
    assert_eq!(
        svc.signup("bob@example.com", "1991-01-02").await.status,
        202
    );
    let email = svc.app.queue::<WelcomeEmail>("email").unwrap();
    wait_for_state(&email, "welcome-1", JobState::Completed, SOON).await;

    // At-least-once delivery: the same message delivered again under another job id
    // (a redelivery after a crash looks the same to the handler).
    let payload = WelcomeEmail {
        user_id: 1,
        email: "bob@example.com".into(),
        name: "Bob".into(),
    };
    email
        .add(
            "welcome",
            payload,
            JobOptions::new().job_id("welcome-1-redelivered"),
        )
        .await
        .unwrap();
    wait_for_state(&email, "welcome-1-redelivered", JobState::Completed, SOON).await;
    let second = email
        .get_job("welcome-1-redelivered")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.return_value, Some(serde_json::json!("already-sent")));
    assert_eq!(
        svc.db.outbox_count("welcome:1").await.unwrap(),
        1,
        "sent once"
    );
    svc.stop().await;
}

#[tokio::test]
async fn a_failing_mailer_is_retried_with_backoff_and_the_mail_lands_once() {
    let svc = start("wa-retry", FailurePolicy::FirstAttempts(3)).await;
    let mut events = svc.app.worker_events();
    assert_eq!(svc.signup("cy@example.com", "1992-03-04").await.status, 202);
    let email = svc.app.queue::<WelcomeEmail>("email").unwrap();
    wait_for_state(&email, "welcome-1", JobState::Completed, SOON).await;

    let info = email.get_job("welcome-1").await.unwrap().unwrap();
    assert_eq!(info.attempts_made, 4);
    // Backoff from 50 ms: 50 + 100 + 200 ms at least between the add and the last run.
    assert!(info.processed_on_ms.unwrap() - info.timestamp_ms >= 350);
    assert_eq!(svc.db.outbox_count("welcome:1").await.unwrap(), 1);
    let mut failures = Vec::new();
    while failures.len() < 3 {
        if let Some(WorkerEvent::Failed {
            attempt,
            is_final,
            reason,
            ..
        }) = events.recv().await
        {
            assert!(reason.contains("smtp temporarily unavailable"), "{reason}");
            failures.push((attempt, is_final));
        }
    }
    assert_eq!(failures, [(1, false), (2, false), (3, false)]);
    svc.stop().await;
}

#[tokio::test]
async fn a_mail_that_never_goes_out_is_dead_lettered_after_five_attempts() {
    let svc = start("wa-dead", FailurePolicy::Rate(1.0)).await;
    let mut events = svc.app.worker_events();
    assert_eq!(
        svc.signup("dee@example.com", "1993-06-07").await.status,
        202
    );
    let email = svc.app.queue::<WelcomeEmail>("email").unwrap();
    wait_for_state(&email, "welcome-1", JobState::Failed, SOON).await;
    assert_eq!(
        email
            .get_job("welcome-1")
            .await
            .unwrap()
            .unwrap()
            .attempts_made,
        5
    );
    let last = tokio::time::timeout(SOON, async {
        loop {
            if let Some(WorkerEvent::Failed {
                attempt: 5,
                is_final,
                ..
            }) = events.recv().await
            {
                return is_final;
            }
        }
    })
    .await
    .expect("the final failure event");
    assert!(
        last,
        "the fifth failure is the final one (the alert fires on it)"
    );
    assert_eq!(svc.db.outbox_count("welcome:1").await.unwrap(), 0);
    svc.stop().await;
}

#[tokio::test]
async fn two_scans_of_one_day_and_two_grant_jobs_give_one_grant() {
    let svc = start("wa-birthday", FailurePolicy::Never).await;
    svc.signup("eve@example.com", "1990-07-15").await;
    svc.signup("fay@example.com", "1985-07-15").await;
    svc.signup("gus@example.com", "1985-07-16").await;
    let day = serde_json::json!({"date": "2026-07-15"});
    for _ in 0..2 {
        assert_eq!(
            post_json(svc.addr, "/birthdays/run", &[], &day)
                .await
                .status,
            202
        );
    }
    let coupon = svc.app.queue::<BirthdayGrant>("coupon").unwrap();
    wait_for_state(&coupon, "birthday-1-2026-07-15", JobState::Completed, SOON).await;
    wait_for_state(&coupon, "birthday-2-2026-07-15", JobState::Completed, SOON).await;

    // A second grant job for the same user and day, under another id.
    let grant = BirthdayGrant {
        user_id: 1,
        date: "2026-07-15".into(),
    };
    coupon
        .add(
            "birthday-grant",
            grant,
            JobOptions::new().job_id("grant-again-1"),
        )
        .await
        .unwrap();
    wait_for_state(&coupon, "grant-again-1", JobState::Completed, SOON).await;
    let again = coupon.get_job("grant-again-1").await.unwrap().unwrap();
    assert_eq!(
        again.return_value,
        Some(serde_json::json!("already granted"))
    );

    let grants = |id: i64| {
        let addr = svc.addr;
        async move {
            queue_tests::http::get(addr, &format!("/users/{id}/coupons"))
                .await
                .json()
        }
    };
    assert_eq!(
        grants(1).await["grants"],
        serde_json::json!([{"campaignId": "birthday", "date": "2026-07-15"}])
    );
    assert_eq!(grants(2).await["grants"].as_array().unwrap().len(), 1);
    assert_eq!(
        grants(3).await["grants"],
        serde_json::json!([]),
        "not gus's birthday"
    );
    assert_eq!(
        queue_tests::http::get(svc.addr, "/users/99/coupons")
            .await
            .status,
        404
    );
    svc.stop().await;
}

#[tokio::test]
async fn bad_requests_get_clear_errors_that_name_the_field() {
    let svc = start("wa-validate", FailurePolicy::Never).await;
    let post = |body: &'static [u8]| {
        request(
            svc.addr,
            "POST",
            "/users",
            &[("content-type", "application/json")],
            body,
        )
    };

    let malformed = post(b"{\"email\": ").await.unwrap();
    assert_eq!(malformed.status, 400);
    let not_utf8 = post(b"{\"email\": \"\xff\xfe\"}").await.unwrap();
    assert_eq!(not_utf8.status, 400);
    let huge = vec![b' '; 3 * 1024 * 1024];
    let too_big = request(
        svc.addr,
        "POST",
        "/users",
        &[("content-type", "application/json")],
        &huge,
    )
    .await
    .unwrap();
    assert_eq!(too_big.status, 413);

    let cases = [
        (
            serde_json::json!({"name": "A", "birthday": "1990-01-01"}),
            "email",
        ),
        (
            serde_json::json!({"email": "not-an-email", "name": "A", "birthday": "1990-01-01"}),
            "email",
        ),
        (
            serde_json::json!({"email": "a@b.io", "birthday": "1990-01-01"}),
            "name",
        ),
        (
            serde_json::json!({"email": "a@b.io", "name": "A", "birthday": "1990-13-01"}),
            "birthday",
        ),
        (
            serde_json::json!({"email": "a@b.io", "name": "A", "birthday": "2999-01-01"}),
            "birthday",
        ),
        (
            serde_json::json!({"email": "a@b.io", "name": "A", "birthday": 19900101}),
            "birthday",
        ),
    ];
    for (body, field) in cases {
        let response = post_json(svc.addr, "/users", &[], &body).await;
        assert_eq!(response.status, 422, "{body}");
        assert_eq!(response.json()["field"], field, "{body}");
    }
    assert_eq!(
        svc.signup("hal@example.com", "1990-01-01").await.status,
        202
    );
    let taken = svc.signup("HAL@example.com", "1990-01-01").await;
    assert_eq!(taken.status, 409);
    assert!(taken.json()["message"]
        .as_str()
        .unwrap()
        .contains("already registered"));
    let bad_day = post_json(
        svc.addr,
        "/birthdays/run",
        &[],
        &serde_json::json!({"date": "tomorrow"}),
    )
    .await;
    assert_eq!(
        (bad_day.status, bad_day.json()["field"].clone()),
        (422, serde_json::json!("date"))
    );
    svc.stop().await;
}

#[tokio::test]
async fn restarts_keep_one_birthday_scheduler() {
    let first = start("wa-restart", FailurePolicy::Never).await;
    let (redis, dir) = first.stop().await;
    // A restart, and a second replica on the same Redis and database.
    let second = start_with(redis, dir, FailurePolicy::Never).await;
    let replica = welcome_app::build(
        &config(&second.redis, &second.dir.sqlite_url()),
        FailurePolicy::Never,
        Registrations::All,
    )
    .await
    .unwrap();
    let coupon = replica.app.queue::<BirthdayGrant>("coupon").unwrap();
    assert_eq!(coupon.scheduler_count().await.unwrap(), 1);
    assert_eq!(
        coupon.get_job_counts().await.unwrap().delayed,
        1,
        "one next scan"
    );
    second.stop().await;
}

#[tokio::test]
async fn postgres_works_too() {
    let admin_url = std::env::var("POSTGRES_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let name = format!("welcome_test_{}", uuid::Uuid::new_v4().simple());
    let admin = sqlx::PgPool::connect(&admin_url)
        .await
        .expect("PostgreSQL answers (POSTGRES_ADMIN_URL)");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&admin)
        .await
        .unwrap();
    let url = admin_url
        .rsplit_once('/')
        .map(|(base, _)| format!("{base}/{name}"))
        .unwrap();

    let redis = TestRedis::new("wa-pg");
    let service = welcome_app::build(
        &config(&redis, &url),
        FailurePolicy::Never,
        Registrations::All,
    )
    .await
    .unwrap();
    let workers = service.app.start_workers().await.unwrap();
    let (listener, addr) = listener().await;
    tokio::spawn(async move { axum::serve(listener, service.router).await });
    let body =
        serde_json::json!({"email": "pg@example.com", "name": "Pg", "birthday": "1990-02-03"});
    assert_eq!(post_json(addr, "/users", &[], &body).await.status, 202);
    let email = service.app.queue::<WelcomeEmail>("email").unwrap();
    wait_for_state(&email, "welcome-1", JobState::Completed, SOON).await;
    assert_eq!(service.db.outbox_count("welcome:1").await.unwrap(), 1);
    assert_eq!(post_json(addr, "/users", &[], &body).await.status, 409);
    workers.shutdown(SOON).await;

    drop(service.db);
    sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .execute(&admin)
        .await
        .unwrap();
}

#[tokio::test]
async fn processors_are_plain_functions_for_unit_tests() {
    let dir = ScratchDir::new("wa-unit");
    let db = Db::connect(&dir.sqlite_url()).await.unwrap();
    let mailer = Dep::from(Mailer::new(db.clone(), FailurePolicy::Never));
    let welcome = WelcomeEmail {
        user_id: 9,
        email: "ivy@example.com".into(),
        name: "Ivy".into(),
    };
    assert_eq!(
        send_welcome(Job::for_test(welcome.clone()), mailer.clone())
            .await
            .unwrap(),
        Delivery::Sent
    );
    assert_eq!(
        send_welcome(Job::for_test(welcome), mailer).await.unwrap(),
        Delivery::AlreadySent
    );

    db.insert_user("ivy@example.com", "Ivy", "1990-01-01")
        .await
        .unwrap();
    let grant = || {
        Job::for_test(BirthdayGrant {
            user_id: 1,
            date: "2026-01-01".into(),
        })
    };
    let coupons = Coupons;
    assert_eq!(
        coupons.grant(grant(), Dep::from(db.clone())).await.unwrap(),
        "granted"
    );
    assert_eq!(
        coupons.grant(grant(), Dep::from(db.clone())).await.unwrap(),
        "already granted"
    );

    // The scan adds follow-up jobs, so it needs a real queue app.
    let redis = TestRedis::new("wa-unit-scan");
    let app = redis.app(|b| b.registrations(Registrations::None)).await;
    let scan = Job::for_test(BirthdayScan {
        date: Some("2026-01-01".into()),
    });
    let zone = Dep::from(ScanZone(chrono_tz::UTC));
    let found = coupons
        .scan(scan, Dep::from(db.clone()), zone, Dep::from(app.clone()))
        .await
        .unwrap();
    assert_eq!(found, 1);
    let coupon = app.queue::<BirthdayGrant>("coupon").unwrap();
    let added = coupon
        .get_job("birthday-1-2026-01-01")
        .await
        .unwrap()
        .expect("a grant job");
    assert_eq!(added.data_as::<BirthdayGrant>().unwrap().user_id, 1);
}
