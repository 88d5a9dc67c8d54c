//! The welcome-app end to end over HTTP, on real Redis and SQLite (and once on
//! PostgreSQL): sign-up and exactly one welcome mail (also across a Redis outage),
//! dedup of jobs and of effects, retries with backoff, birthday grants, credentials,
//! validation, and restarts.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use queue_core::encryption::Keyring;
use queue_core::worker::Batch;
use queue_core::{app::Registrations, Dep, Job, JobOptions, JobState, WorkerEvent};
use queue_tests::http::{get, get_with, post_json, request, HttpResponse};
use queue_tests::{wait_for_state, wait_until, PrivateRedis, TestRedis, SOON};
use welcome_app::db::Db;
use welcome_app::jobs::coupons::{grant_job_id, BirthdayGrant, BirthdayScan, Coupons, ScanZone};
use welcome_app::jobs::email::{send_welcome, WelcomeEmail};
use welcome_app::mailer::{Delivery, FailurePolicy, Mailer};

use support::{
    add_user, bearer, config, config_with, serve, start, start_with, Running, ScratchDir, ADMIN,
};

/// What a sign-up answered: the public id and token.
struct SignedUp {
    user_id: String,
    token: String,
    response: HttpResponse,
}

async fn signup_at(addr: SocketAddr, email: &str, birthday: &str) -> SignedUp {
    let body = serde_json::json!({"email": email, "name": "Ada", "birthday": birthday});
    let response = post_json(addr, "/users", &[], &body).await;
    let json = if response.status == 202 {
        response.json()
    } else {
        serde_json::Value::Null
    };
    SignedUp {
        user_id: json["userId"].as_str().unwrap_or_default().to_owned(),
        token: json["accessToken"].as_str().unwrap_or_default().to_owned(),
        response,
    }
}

impl Running {
    async fn signup(&self, email: &str, birthday: &str) -> SignedUp {
        signup_at(self.addr, email, birthday).await
    }

    async fn scan(&self, body: &serde_json::Value) -> HttpResponse {
        post_json(
            self.addr,
            "/birthdays/run",
            &[("authorization", &bearer(ADMIN))],
            body,
        )
        .await
    }

    async fn coupons(&self, user_id: &str, token: &str) -> HttpResponse {
        let auth = bearer(token);
        get_with(
            self.addr,
            &format!("/users/{user_id}/coupons"),
            &[("authorization", &auth)],
        )
        .await
    }
}

/// Today's month and day, in a year long ago: a birthday that is today.
fn born_today(year: i32) -> String {
    format!("{year}-{}", Utc::now().format("%m-%d"))
}

#[tokio::test]
async fn signup_answers_202_and_the_welcome_mail_lands_exactly_once() {
    let svc = start("wa-signup", FailurePolicy::Never).await;
    let ada = svc.signup("ada@example.com", "1990-05-17").await;
    assert_eq!(ada.response.status, 202);
    let body = ada.response.json();
    let user_id = ada.user_id.clone();
    assert_eq!(user_id.len(), 32, "a random public id: {body}");
    assert_eq!(ada.token.len(), 64);
    let job_id = format!("welcome-{user_id}");
    assert_eq!(body["jobId"], job_id);
    assert_eq!(
        body["state"], "pending",
        "written to the outbox with the user"
    );
    assert_eq!(
        ada.response.header("location"),
        Some(format!("/jobs/email/{job_id}").as_str())
    );
    assert_eq!(ada.response.header("cache-control"), Some("no-store"));

    let email = svc.app.queue::<WelcomeEmail>("email").unwrap();
    wait_for_state(&email, &job_id, JobState::Completed, SOON).await;
    assert_eq!(
        svc.db
            .sent_count(&format!("welcome:{user_id}"))
            .await
            .unwrap(),
        1
    );
    // The public status answers the state, never the result or a failure's text.
    let status = get(svc.addr, &format!("/jobs/email/{job_id}")).await.json();
    assert_eq!(status["state"], "completed");
    assert!(
        status.get("returnValue").is_none() && status.get("failedReason").is_none(),
        "{status}"
    );
    // The operator's view has them.
    let admin_path = format!("/admin/jobs/email/{job_id}");
    assert_eq!(get(svc.addr, &admin_path).await.status, 401);
    let detailed = get_with(svc.addr, &admin_path, &[("authorization", &bearer(ADMIN))])
        .await
        .json();
    assert_eq!(detailed["returnValue"], "sent");
    // So are the metrics: the welcome mail counted, the queues' depth read on scrape.
    assert_eq!(get(svc.addr, "/admin/metrics").await.status, 401);
    let metrics = get_with(
        svc.addr,
        "/admin/metrics",
        &[("authorization", &bearer(ADMIN))],
    )
    .await;
    assert_eq!(metrics.status, 200);
    let text = String::from_utf8(metrics.body).unwrap();
    assert!(
        text.contains("queue_jobs_completed_total{queue=\"email\",name=\"welcome\"} 1")
            && text.contains("bullmq_job_count{queue=\"email\",state=\"completed\"} 1"),
        "{text}"
    );

    // The operator's dashboard: a browser logs in with Basic (the token as password).
    let login = get(svc.addr, "/admin/queues").await;
    assert_eq!(login.status, 401);
    assert!(login
        .header("www-authenticate")
        .is_some_and(|v| v.starts_with("Basic ")));
    let basic = |password: &str| {
        use base64::Engine as _;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("ops:{password}"))
        )
    };
    let wrong = get_with(
        svc.addr,
        "/admin/queues",
        &[("authorization", &basic("guess"))],
    )
    .await;
    assert_eq!(wrong.status, 401);
    let page = get_with(
        svc.addr,
        "/admin/queues",
        &[("authorization", &basic(ADMIN))],
    )
    .await;
    assert_eq!(page.status, 200);
    let html = String::from_utf8_lossy(&page.body).into_owned();
    assert!(
        html.contains(r#"href="/admin/queues/email""#)
            && html.contains(r#"href="/admin/queues/coupon""#),
        "{html}"
    );
    // The example records BullMQ's per-minute metrics: the overview draws the mail sent.
    assert!(html.contains(r#"<svg class="spark good""#), "{html}");
    // With a trailing slash, the dashboard, not the API's JSON 404.
    let slash = get_with(
        svc.addr,
        "/admin/queues/",
        &[("authorization", &basic(ADMIN))],
    )
    .await;
    assert_eq!(slash.status, 308);
    assert_eq!(slash.header("location"), Some("/admin/queues"));
    let job_page = get_with(
        svc.addr,
        &format!("/admin/queues/email/jobs/welcome-{user_id}"),
        &[("authorization", &basic(ADMIN))],
    )
    .await;
    assert_eq!(job_page.status, 200, "an HTML page, not turned into JSON");
    assert!(String::from_utf8_lossy(&job_page.body).contains("ada@example.com"));

    // The same job id again adds nothing.
    let again = email
        .add(
            "welcome",
            WelcomeEmail {
                user_id: user_id.clone(),
                email: "ada@example.com".into(),
                name: "Ada".into(),
            },
            welcome_app::jobs::email::options(&user_id, Duration::from_millis(50)),
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
    let bob = svc.signup("bob@example.com", "1991-01-02").await;
    assert_eq!(bob.response.status, 202);
    let email = svc.app.queue::<WelcomeEmail>("email").unwrap();
    wait_for_state(
        &email,
        &format!("welcome-{}", bob.user_id),
        JobState::Completed,
        SOON,
    )
    .await;

    // At-least-once delivery: the same message delivered again under another job id
    // (a redelivery after a crash looks the same to the handler).
    let payload = WelcomeEmail {
        user_id: bob.user_id.clone(),
        email: "bob@example.com".into(),
        name: "Bob".into(),
    };
    email
        .add(
            "welcome",
            payload,
            JobOptions::new().job_id("welcome-redelivered"),
        )
        .await
        .unwrap();
    wait_for_state(&email, "welcome-redelivered", JobState::Completed, SOON).await;
    let second = email.get_job("welcome-redelivered").await.unwrap().unwrap();
    // Stored sealed (the queue is encrypted); the application opens it.
    let second = email.open(second).unwrap();
    assert_eq!(second.return_value, Some(serde_json::json!("already-sent")));
    let key = format!("welcome:{}", bob.user_id);
    assert_eq!(svc.db.sent_count(&key).await.unwrap(), 1, "sent once");
    svc.stop().await;
}

#[tokio::test]
async fn a_failing_mailer_is_retried_with_backoff_and_the_mail_lands_once() {
    let svc = start("wa-retry", FailurePolicy::FirstAttempts(3)).await;
    let mut events = svc.app.worker_events();
    let cy = svc.signup("cy@example.com", "1992-03-04").await;
    assert_eq!(cy.response.status, 202);
    let email = svc.app.queue::<WelcomeEmail>("email").unwrap();
    let job_id = format!("welcome-{}", cy.user_id);
    wait_for_state(&email, &job_id, JobState::Completed, SOON).await;

    let info = email.get_job(&job_id).await.unwrap().unwrap();
    assert_eq!(info.attempts_made, 4);
    // Backoff from 50 ms: 50 + 100 + 200 ms at least between the add and the last run.
    assert!(info.processed_on_ms.unwrap() - info.timestamp_ms >= 350);
    let key = format!("welcome:{}", cy.user_id);
    assert_eq!(svc.db.sent_count(&key).await.unwrap(), 1);
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
    let dee = svc.signup("dee@example.com", "1993-06-07").await;
    assert_eq!(dee.response.status, 202);
    let email = svc.app.queue::<WelcomeEmail>("email").unwrap();
    let job_id = format!("welcome-{}", dee.user_id);
    wait_for_state(&email, &job_id, JobState::Failed, SOON).await;
    assert_eq!(
        email.get_job(&job_id).await.unwrap().unwrap().attempts_made,
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
    let key = format!("welcome:{}", dee.user_id);
    assert_eq!(svc.db.sent_count(&key).await.unwrap(), 0);
    svc.stop().await;
}

#[tokio::test]
async fn two_scans_of_one_day_and_two_grant_jobs_give_one_grant() {
    let svc = start("wa-birthday", FailurePolicy::Never).await;
    let today = Utc::now().format("%Y-%m-%d").to_string();
    let eve = svc.signup("eve@example.com", &born_today(1990)).await;
    let fay = svc.signup("fay@example.com", &born_today(1985)).await;
    let gus = svc.signup("gus@example.com", "1985-01-01").await;
    let gus_is_today = today.ends_with("-01-01");
    for _ in 0..2 {
        assert_eq!(svc.scan(&serde_json::json!({})).await.status, 202);
    }
    let coupon = svc.app.queue::<BirthdayGrant>("coupon").unwrap();
    let eve_grant = grant_job_id(&eve.user_id, &today);
    wait_for_state(&coupon, &eve_grant, JobState::Completed, SOON).await;
    wait_for_state(
        &coupon,
        &grant_job_id(&fay.user_id, &today),
        JobState::Completed,
        SOON,
    )
    .await;

    // A second grant job for the same user and day, under another id.
    let grant = BirthdayGrant {
        user_id: eve.user_id.clone(),
        date: today.clone(),
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
    let again = coupon.open(again).unwrap();
    assert_eq!(
        again.return_value,
        Some(serde_json::json!("already granted"))
    );

    let grants = |r: HttpResponse| r.json()["grants"].clone();
    assert_eq!(
        grants(svc.coupons(&eve.user_id, &eve.token).await),
        serde_json::json!([{"campaignId": "birthday", "date": today}])
    );
    assert_eq!(
        grants(svc.coupons(&fay.user_id, &fay.token).await)
            .as_array()
            .unwrap()
            .len(),
        1
    );
    if !gus_is_today {
        assert_eq!(
            grants(svc.coupons(&gus.user_id, &gus.token).await),
            serde_json::json!([])
        );
    }
    // The operator reads anyone's.
    assert_eq!(svc.coupons(&fay.user_id, ADMIN).await.status, 200);
    svc.stop().await;
}

#[tokio::test]
async fn a_scan_after_days_no_worker_ran_grants_each_missed_day_once() {
    use chrono::{Days, NaiveDate};
    use welcome_app::jobs::coupons::CAMPAIGN;
    let svc = start("wa-catch-up", FailurePolicy::Never).await;
    let today = Utc::now().date_naive();
    let day = |back: u64| today - Days::new(back);
    // Born in a leap year, so that any month-day signs up.
    let born = |d: NaiveDate| format!("2000-{}", d.format("%m-%d"));
    // The last scan covered three days ago; no worker ran at 00:05 since.
    svc.db.scan_through(CAMPAIGN, day(3)).await.unwrap();
    let covered = svc.signup("covered@example.com", &born(day(3))).await;
    let mut missed: Vec<(SignedUp, String)> = Vec::new();
    for back in [2, 1, 0] {
        let email = format!("missed-{back}@example.com");
        let user = svc.signup(&email, &born(day(back))).await;
        missed.push((user, day(back).format("%Y-%m-%d").to_string()));
    }
    let coupon = svc.app.queue::<BirthdayScan>("coupon").unwrap();
    // The scheduler's scan it owed, made up once, and another (a second scheduled run
    // on the same day): the second grants nothing new.
    for n in 0..2 {
        let scan_id = format!("scheduled-scan-{n}");
        let scheduled = BirthdayScan::default();
        let options = JobOptions::new().job_id(&scan_id);
        coupon
            .add("birthday-scan", scheduled, options)
            .await
            .unwrap();
        wait_for_state(&coupon, &scan_id, JobState::Completed, SOON).await;
        for (user, date) in &missed {
            let grant = grant_job_id(&user.user_id, date);
            wait_for_state(&coupon, &grant, JobState::Completed, SOON).await;
        }
    }
    for (user, date) in &missed {
        let grants = svc.coupons(&user.user_id, &user.token).await.json()["grants"].clone();
        assert_eq!(
            grants,
            serde_json::json!([{"campaignId": "birthday", "date": date}]),
            "one grant for the day the scan missed"
        );
    }
    let grants = svc.coupons(&covered.user_id, &covered.token).await.json()["grants"].clone();
    assert_eq!(
        grants,
        serde_json::json!([]),
        "a covered day is not scanned again"
    );
    assert_eq!(svc.db.scanned_through(CAMPAIGN).await.unwrap(), Some(today));
    svc.stop().await;
}

#[tokio::test]
async fn leap_day_birthdays_are_granted_on_28_february_in_common_years() {
    let svc = start("wa-leap", FailurePolicy::Never).await;
    let leap = svc.signup("leap@example.com", "2000-02-29").await;
    let coupon = svc.app.queue::<BirthdayScan>("coupon").unwrap();
    // The scan job itself (the HTTP endpoint only takes days near today).
    for date in ["2026-02-28", "2028-02-28"] {
        let scan = BirthdayScan {
            date: Some(date.into()),
        };
        let id = format!("scan-{date}");
        coupon
            .add("birthday-scan", scan, JobOptions::new().job_id(&id))
            .await
            .unwrap();
        wait_for_state(&coupon, &id, JobState::Completed, SOON).await;
    }
    // A scan adds its grant jobs and completes before they run.
    wait_until(SOON, "the grant jobs the scans added", || async {
        let counts = coupon.get_job_counts().await.unwrap();
        (counts.active + counts.waiting == 0).then_some(())
    })
    .await;
    let grants = svc.coupons(&leap.user_id, &leap.token).await.json()["grants"].clone();
    assert_eq!(
        grants,
        serde_json::json!([{"campaignId": "birthday", "date": "2026-02-28"}]),
        "2028 has a 29th: no grant on its 28th"
    );
    svc.stop().await;
}

#[tokio::test]
async fn coupons_and_operator_actions_need_the_right_credential() {
    let svc = start("wa-hostile", FailurePolicy::Never).await;
    let ann = svc.signup("ann@example.com", &born_today(1990)).await;
    let ben = svc.signup("ben@example.com", "1990-01-02").await;
    let path = format!("/users/{}/coupons", ann.user_id);
    // No credential: 401, whether or not the user exists.
    assert_eq!(get(svc.addr, &path).await.status, 401);
    assert_eq!(
        get(svc.addr, "/users/00000000000000000000000000000000/coupons")
            .await
            .status,
        401
    );
    // Another user's token, and an unknown user, answer the same 404.
    let wrong = svc.coupons(&ann.user_id, &ben.token).await;
    let unknown = svc
        .coupons("00000000000000000000000000000000", &ben.token)
        .await;
    assert_eq!((wrong.status, unknown.status), (404, 404));
    assert_eq!(wrong.body, unknown.body);
    assert_eq!(svc.coupons(&ann.user_id, &ann.token).await.status, 200);

    // The scan is the operator's.
    let day = serde_json::json!({"date": Utc::now().format("%Y-%m-%d").to_string()});
    assert_eq!(
        post_json(svc.addr, "/birthdays/run", &[], &day)
            .await
            .status,
        401
    );
    assert_eq!(
        post_json(
            svc.addr,
            "/birthdays/run",
            &[("authorization", &bearer(&ann.token))],
            &day
        )
        .await
        .status,
        401
    );
    // Only days near today: no coupons dated 1000 or 9999.
    for far in [
        "1000-07-04",
        "9999-07-04",
        "+10000-07-04",
        "-0999-07-04",
        "2026-13-01",
    ] {
        let refused = svc.scan(&serde_json::json!({ "date": far })).await;
        assert_eq!(
            (refused.status, refused.json()["field"].clone()),
            (422, serde_json::json!("date")),
            "{far}"
        );
    }
    // A form post from another site's page carries no bearer token, and a body that is
    // not JSON is refused as such even with one.
    let form = request(
        svc.addr,
        "POST",
        "/birthdays/run",
        &[
            ("content-type", "text/plain"),
            ("authorization", &bearer(ADMIN)),
        ],
        br#"{"date":"2026-07-04"}"#,
    )
    .await
    .unwrap();
    assert_eq!(form.status, 415);
    assert_eq!(svc.scan(&day).await.status, 202);
    svc.stop().await;
}

#[tokio::test]
async fn hostile_paths_and_headers_get_json_answers_and_no_foothold() {
    let svc = start("wa-edge", FailurePolicy::Never).await;
    for (method, path, status) in [
        ("GET", "/nowhere", 404),
        ("DELETE", "/users", 405),
        ("GET", "/jobs/email/meta", 404),
        ("GET", "/jobs/email/events", 404),
        ("GET", "/jobs/email/repeat%3Abirthday-daily", 404),
        ("GET", "/jobs/coupon/id", 404),
        ("GET", "/jobs/not-a-queue/x", 404),
    ] {
        let response = request(svc.addr, method, path, &[], b"").await.unwrap();
        assert_eq!(response.status, status, "{method} {path}");
        assert!(
            response.json()["error"].is_string(),
            "{method} {path}: JSON"
        );
    }
    // A malformed traceparent or an unsafe x-request-id is not adopted: the request
    // gets a fresh id.
    let zeros = format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32));
    for (name, value) in [
        ("traceparent", zeros.as_str()),
        (
            "traceparent",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
        (
            "traceparent",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        ),
        ("x-request-id", "deadbeef}:fake"),
    ] {
        let response = get_with(svc.addr, "/nowhere", &[(name, value)]).await;
        let echoed = response
            .header("x-request-id")
            .unwrap_or_default()
            .to_owned();
        assert_eq!(echoed.len(), 32, "{name}: {value} -> {echoed}");
        assert!(!value.contains(&echoed) && echoed.bytes().all(|b| b.is_ascii_hexdigit()));
    }
    let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let response = get_with(svc.addr, "/nowhere", &[("traceparent", valid)]).await;
    assert_eq!(
        response.header("x-request-id"),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    svc.stop().await;
}

#[tokio::test]
async fn without_admin_token_operator_actions_are_disabled() {
    let redis = TestRedis::new("wa-noadmin");
    let dir = ScratchDir::new("wa-noadmin");
    let config = config_with(&[
        ("REDIS_URL", queue_tests::redis_url()),
        ("QUEUE_PREFIX", redis.prefix().to_owned()),
        ("DATABASE_URL", dir.sqlite_url()),
        ("QUEUE_KEYS_FILE", dir.keys_file()),
    ]);
    let service = welcome_app::build(&config, FailurePolicy::Never, Registrations::All)
        .await
        .unwrap();
    let addr = serve(service.router).await;
    let scan = post_json(
        addr,
        "/birthdays/run",
        &[("authorization", "Bearer anything-at-all-long")],
        &serde_json::json!({}),
    )
    .await;
    assert_eq!(scan.status, 403);
    assert!(scan.json()["message"]
        .as_str()
        .unwrap()
        .contains("ADMIN_TOKEN"));
    assert_eq!(get(addr, "/admin/jobs/email/welcome-x").await.status, 403);
    assert_eq!(get(addr, "/admin/metrics").await.status, 403);
    // The dashboard is not there at all.
    assert_eq!(get(addr, "/admin/queues").await.status, 404);
}

#[tokio::test]
async fn a_fresh_database_on_a_used_prefix_still_welcomes_its_first_user() {
    let first = start("wa-fresh", FailurePolicy::Never).await;
    let old = first.signup("old@example.com", "1990-01-01").await;
    let email = first.app.queue::<WelcomeEmail>("email").unwrap();
    wait_for_state(
        &email,
        &format!("welcome-{}", old.user_id),
        JobState::Completed,
        SOON,
    )
    .await;
    let (redis, _old_dir) = first.stop().await;

    // A new (or restored) database, the same Redis prefix: ids do not repeat.
    let second = start_with(redis, ScratchDir::new("wa-fresh-2"), FailurePolicy::Never).await;
    let new = second.signup("new@example.com", "1990-01-01").await;
    let body = new.response.json();
    assert_eq!(body["duplicate"], false, "{body}");
    assert_ne!(new.user_id, old.user_id);
    let email = second.app.queue::<WelcomeEmail>("email").unwrap();
    wait_for_state(
        &email,
        &format!("welcome-{}", new.user_id),
        JobState::Completed,
        SOON,
    )
    .await;
    let key = format!("welcome:{}", new.user_id);
    assert_eq!(second.db.sent_count(&key).await.unwrap(), 1);
    second.stop().await;
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

    let user = |email: &str, name: &str, birthday: serde_json::Value| serde_json::json!({"email": email, "name": name, "birthday": birthday});
    let cases = [
        (
            serde_json::json!({"name": "A", "birthday": "1990-01-01"}),
            "email",
        ),
        (user("not-an-email", "A", "1990-01-01".into()), "email"),
        (user("a\u{0}b@x.io", "A", "1990-01-01".into()), "email"),
        (user("a\u{1b}@x.io", "A", "1990-01-01".into()), "email"),
        (user("a\u{200b}@x.io", "A", "1990-01-01".into()), "email"),
        (user("a,b@x.io", "A", "1990-01-01".into()), "email"),
        (user("a>b@x.io", "A", "1990-01-01".into()), "email"),
        (
            serde_json::json!({"email": "a@b.io", "birthday": "1990-01-01"}),
            "name",
        ),
        (user("a@b.io", "A\u{7}", "1990-01-01".into()), "name"),
        (user("a@b.io", "A", "1990-13-01".into()), "birthday"),
        (user("a@b.io", "A", "2999-01-01".into()), "birthday"),
        (user("a@b.io", "A", "0000-07-04".into()), "birthday"),
        (user("a@b.io", "A", "-0999-07-04".into()), "birthday"),
        (user("a@b.io", "A", "1899-12-31".into()), "birthday"),
        (user("a@b.io", "A", 19900101.into()), "birthday"),
    ];
    for (body, field) in cases {
        let response = post_json(svc.addr, "/users", &[], &body).await;
        assert_eq!(response.status, 422, "{body}");
        assert_eq!(response.json()["field"], field, "{body}");
    }
    assert_eq!(
        svc.signup("hal@example.com", "1990-01-01")
            .await
            .response
            .status,
        202
    );
    let taken = svc.signup("HAL@Example.com", "1990-01-01").await.response;
    assert_eq!(taken.status, 409);
    assert!(taken.json()["message"]
        .as_str()
        .unwrap()
        .contains("already registered"));
    // The NFD form of an NFC address is the same account.
    assert_eq!(
        svc.signup("jos\u{e9}@example.com", "1990-01-01")
            .await
            .response
            .status,
        202
    );
    assert_eq!(
        svc.signup("jose\u{301}@example.com", "1990-01-01")
            .await
            .response
            .status,
        409
    );
    // A name is trimmed before its length is checked.
    let padded = format!("   {}   ", "n".repeat(200));
    let body =
        serde_json::json!({"email": "pad@example.com", "name": padded, "birthday": "1990-01-01"});
    assert_eq!(post_json(svc.addr, "/users", &[], &body).await.status, 202);
    svc.stop().await;
}

/// The mail and coupon queues are sealed: after a sign-up's welcome mail and a birthday
/// grant, neither the address nor the birthday is anywhere in Redis in clear, nor in
/// its append-only file (what backups and replicas copy).
#[tokio::test]
async fn no_address_or_birthday_is_in_redis_or_its_append_only_file_in_clear() {
    let redis = PrivateRedis::start_persistent();
    let dir = ScratchDir::new("wa-sealed");
    let config = config_with(&[
        ("REDIS_URL", format!("redis://127.0.0.1:{}", redis.port())),
        ("DATABASE_URL", dir.sqlite_url()),
        ("QUEUE_KEYS_FILE", dir.keys_file()),
        ("ADMIN_TOKEN", ADMIN.to_owned()),
    ]);
    let service = welcome_app::build(&config, FailurePolicy::Never, Registrations::All)
        .await
        .unwrap();
    let workers = service.app.start_workers().await.unwrap();
    let addr = serve(service.router).await;
    let address = format!("ivy-{}@example.com", uuid::Uuid::new_v4().simple());
    let ivy = signup_at(addr, &address, &born_today(1990)).await;
    assert_eq!(ivy.response.status, 202);
    let db = service.db.clone();
    let mail_key = format!("welcome:{}", ivy.user_id);
    wait_until(SOON, "the welcome mail", || async {
        (db.sent_count(&mail_key).await.unwrap() == 1).then_some(())
    })
    .await;
    let today = serde_json::json!({"date": Utc::now().format("%Y-%m-%d").to_string()});
    let scan = post_json(
        addr,
        "/birthdays/run",
        &[("authorization", &bearer(ADMIN))],
        &today,
    )
    .await;
    assert_eq!(scan.status, 202);
    let coupon = service.app.queue::<BirthdayScan>("coupon").unwrap();
    wait_until(SOON, "ivy's birthday grant", || async {
        let counts = coupon.get_job_counts().await.unwrap();
        // The daily scheduler's next scan waits delayed.
        (counts.completed >= 2 && counts.active + counts.waiting == 0).then_some(())
    })
    .await;
    workers.shutdown(SOON).await;

    // Redis, read as a client reads it, and its append-only files, byte by byte.
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port()))
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(
        keys.iter().any(|k| k.contains(":email:")),
        "the queues are in this Redis: {keys:?}"
    );
    let holds =
        |bytes: &[u8], secret: &str| bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
    for key in &keys {
        let kind: String = redis::cmd("TYPE").arg(key).query(&mut conn).unwrap();
        let value: redis::Value = match kind.as_str() {
            "string" => redis::cmd("GET").arg(key).query(&mut conn).unwrap(),
            "hash" => redis::cmd("HGETALL").arg(key).query(&mut conn).unwrap(),
            "list" => redis::cmd("LRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .query(&mut conn)
                .unwrap(),
            "stream" => redis::cmd("XRANGE")
                .arg(key)
                .arg("-")
                .arg("+")
                .query(&mut conn)
                .unwrap(),
            _ => redis::Value::Nil,
        };
        let read = format!("{key} {value:?}");
        assert!(
            !holds(read.as_bytes(), &address),
            "{key} holds the address in clear"
        );
        // Who has a birthday today: a grant names the user only inside its sealed
        // payload, and its job id is a digest.
        if key.contains(":coupon:") {
            assert!(
                !holds(read.as_bytes(), &ivy.user_id),
                "{key} names the user in clear: {read}"
            );
        }
    }
    let mut aof = Vec::new();
    for entry in walk(redis.dir()) {
        if entry.to_string_lossy().contains("appendonly") {
            aof.extend(std::fs::read(&entry).unwrap());
        }
    }
    assert!(
        holds(&aof, ":coupon:"),
        "the append-only file recorded the queues"
    );
    assert!(
        !holds(&aof, &address),
        "the append-only file holds the address in clear"
    );
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// The scenario of issue 11: Redis stops and starts again while clients sign up and
/// retry whatever failed. Every stored user gets exactly one welcome mail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_under_signups_loses_no_welcome_mail() {
    let mut redis = PrivateRedis::start();
    let dir = ScratchDir::new("wa-outage");
    let config = config_with(&[
        ("REDIS_URL", format!("redis://127.0.0.1:{}", redis.port())),
        ("DATABASE_URL", dir.sqlite_url()),
        ("QUEUE_KEYS_FILE", dir.keys_file()),
        ("WELCOME_BACKOFF_MS", "50".to_owned()),
    ]);
    let service = welcome_app::build(&config, FailurePolicy::Never, Registrations::All)
        .await
        .unwrap();
    let workers = service.app.start_workers().await.unwrap();
    let addr = serve(service.router).await;

    const CLIENTS: usize = 40;
    let answered = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let answered = answered.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(40 * n as u64)).await;
                let email = format!("client{n}@example.com");
                // A client retries whatever failed; 409 means an earlier try got through.
                for _ in 0..100 {
                    let status = signup_at(addr, &email, "1990-01-01").await.response.status;
                    if status == 202 || status == 409 {
                        answered.fetch_add(1, Ordering::SeqCst);
                        return status;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                panic!("{email} never got an answer");
            })
        })
        .collect();
    wait_until(SOON, "a quarter of the sign-ups", || async {
        (answered.load(Ordering::SeqCst) >= CLIENTS / 4).then_some(())
    })
    .await;
    redis.kill();
    wait_until(
        Duration::from_secs(30),
        "three quarters of the sign-ups",
        || async { (answered.load(Ordering::SeqCst) >= 3 * CLIENTS / 4).then_some(()) },
    )
    .await;
    redis.restart();
    for client in clients {
        assert_eq!(
            client.await.unwrap(),
            202,
            "no sign-up failed, so none was retried into a 409"
        );
    }

    let users = service.db.users().await.unwrap();
    assert_eq!(users.len(), CLIENTS);
    let db = service.db.clone();
    wait_until(Duration::from_secs(30), "one welcome mail per user", || {
        let (db, users) = (db.clone(), users.clone());
        async move {
            for user in &users {
                if db
                    .sent_count(&format!("welcome:{}", user.public_id))
                    .await
                    .ok()?
                    != 1
                {
                    return None;
                }
            }
            Some(())
        }
    })
    .await;
    workers.shutdown(SOON).await;
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
    let pg = queue_tests::db::TestPostgres::new("welcome").await;
    let redis = TestRedis::new("wa-pg");
    let service = welcome_app::build(
        &config(&redis, pg.url()),
        FailurePolicy::Never,
        Registrations::All,
    )
    .await
    .unwrap();
    let workers = service.app.start_workers().await.unwrap();
    let addr = serve(service.router).await;
    let pgu = signup_at(addr, "pg@example.com", "1990-02-03").await;
    assert_eq!(pgu.response.status, 202);
    let email = service.app.queue::<WelcomeEmail>("email").unwrap();
    wait_for_state(
        &email,
        &format!("welcome-{}", pgu.user_id),
        JobState::Completed,
        SOON,
    )
    .await;
    let key = format!("welcome:{}", pgu.user_id);
    assert_eq!(service.db.sent_count(&key).await.unwrap(), 1);
    assert_eq!(
        signup_at(addr, "pg@example.com", "1990-02-03")
            .await
            .response
            .status,
        409
    );
    workers.shutdown(SOON).await;
    service.app.stop_relay().await;
    drop(service.db);
}

#[tokio::test]
async fn processors_are_plain_functions_for_unit_tests() {
    let dir = ScratchDir::new("wa-unit");
    let db = Db::connect(&dir.sqlite_url()).await.unwrap();
    let mailer = Dep::from(Mailer::new(db.clone(), FailurePolicy::Never));
    let welcome = WelcomeEmail {
        user_id: "u9".into(),
        email: "ivy@example.com".into(),
        name: "Ivy".into(),
    };
    // A batch handler: a batch of test jobs, each with its own id.
    let batch = || {
        Batch::for_test(vec![
            Job::for_test(welcome.clone()).with_test_meta("welcome-u9", "welcome", 0),
            Job::for_test(WelcomeEmail {
                user_id: "u10".into(),
                email: "max@example.com".into(),
                name: "Max".into(),
            })
            .with_test_meta("welcome-u10", "welcome", 0),
        ])
    };
    let first = batch();
    let result = send_welcome(batch(), mailer.clone()).await.unwrap();
    for job in &first {
        assert_eq!(
            result.return_value(job),
            Some(&serde_json::json!(Delivery::Sent))
        );
    }
    let again = send_welcome(batch(), mailer).await.unwrap();
    assert_eq!(
        again.return_value(&first.jobs()[0]),
        Some(&serde_json::json!(Delivery::AlreadySent))
    );

    add_user(&db, "ivy1", "ivy@example.com", "1990-01-01").await;
    let grant = || {
        Job::for_test(BirthdayGrant {
            user_id: "ivy1".into(),
            date: "2026-01-01".into(),
        })
    };
    let coupons = Coupons;
    let mailer = || Dep::from(Mailer::new(db.clone(), FailurePolicy::Never));
    assert_eq!(
        coupons
            .grant(grant(), Dep::from(db.clone()), mailer())
            .await
            .unwrap(),
        "granted"
    );
    assert_eq!(
        coupons
            .grant(grant(), Dep::from(db.clone()), mailer())
            .await
            .unwrap(),
        "already granted"
    );
    // Two stages, each done once: one grant, one coupon mail.
    let key = "grant-ivy1-birthday-2026-01-01";
    assert_eq!(db.sent_count(key).await.unwrap(), 1);

    // A run that died after its grant and before its mail: the re-run sends the mail
    // and does not grant again.
    add_user(&db, "ivy2", "ivy2@example.com", "1990-06-01").await;
    let stages = welcome_app::jobs::coupons::GRANT_STAGES;
    let key2 = "grant-ivy2-birthday-2026-01-01";
    db.step(stages, key2, "granted", || async {
        Ok::<_, std::io::Error>(true)
    })
    .await
    .unwrap();
    let second = Job::for_test(BirthdayGrant {
        user_id: "ivy2".into(),
        date: "2026-01-01".into(),
    });
    let outcome = coupons
        .grant(second, Dep::from(db.clone()), mailer())
        .await
        .unwrap();
    assert_eq!(
        outcome, "already granted",
        "the grant stage was done already"
    );
    assert_eq!(
        db.sent_count(key2).await.unwrap(),
        1,
        "the mail of the second stage went out"
    );

    // The scan adds follow-up jobs, so it needs a real queue app.
    let redis = TestRedis::new("wa-unit-scan");
    let app = redis
        .app(|b| {
            b.registrations(Registrations::None)
                .keyring(Keyring::parse(support::TEST_KEYS).unwrap())
        })
        .await;
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
        .get_job(&grant_job_id("ivy1", "2026-01-01"))
        .await
        .unwrap()
        .expect("a grant job");
    let added = coupon.open(added).unwrap();
    assert_eq!(added.data_as::<BirthdayGrant>().unwrap().user_id, "ivy1");
}
