//! The example's HTTP edge against a hostile client: what the public status route
//! reveals, report months, look-alike e-mail addresses, how much of a request an error
//! quotes back, bodies that are not objects, and a retried sign-up with an
//! `Idempotency-Key`.

mod support;

use chrono::Utc;
use queue_core::JobState;
use queue_tests::http::{get, get_with, post_json, request, HttpResponse};
use queue_tests::{wait_for_state, SOON};
use welcome_app::jobs::coupons::{grant_job_id, BirthdayGrant};
use welcome_app::mailer::FailurePolicy;

use support::{bearer, start, ADMIN};

fn user(email: &str, birthday: &str) -> serde_json::Value {
    serde_json::json!({"email": email, "name": "Ada", "birthday": birthday})
}

async fn operator_post(addr: std::net::SocketAddr, path: &str, body: &[u8]) -> HttpResponse {
    request(
        addr,
        "POST",
        path,
        &[
            ("content-type", "application/json"),
            ("authorization", &bearer(ADMIN)),
        ],
        body,
    )
    .await
    .expect("request")
}

#[tokio::test]
async fn the_public_status_route_reveals_no_birthday_and_lists_no_scan() {
    let svc = start("wa-edge-birthday", FailurePolicy::Never).await;
    let today = Utc::now().format("%Y-%m-%d").to_string();
    let born = format!("1990-{}", Utc::now().format("%m-%d"));
    let signed_up = post_json(svc.addr, "/users", &[], &user("bea@example.com", &born)).await;
    let user_id = signed_up.json()["userId"].as_str().unwrap().to_owned();

    let scan = operator_post(svc.addr, "/birthdays/run", b"{}").await;
    assert_eq!(scan.status, 202);
    let scan_id = scan.json()["jobId"].as_str().unwrap().to_owned();
    // Not a counter: one scan's id tells nothing of the others.
    assert!(
        scan_id.len() >= 32 && !scan_id.bytes().all(|b| b.is_ascii_digit()),
        "{scan_id}"
    );
    let coupon = svc.app.queue::<BirthdayGrant>("coupon").unwrap();
    let grant = grant_job_id(&user_id, &today);
    wait_for_state(&coupon, &grant, JobState::Completed, SOON).await;

    // Knowing a user's id, nobody may probe the days of the year for their grant.
    for id in [grant.as_str(), scan_id.as_str()] {
        let public = get(svc.addr, &format!("/jobs/coupon/{id}")).await;
        assert_eq!(
            public.status,
            404,
            "{id}: {}",
            String::from_utf8_lossy(&public.body)
        );
    }
    // The operator still follows both, where the scan's answer points.
    let location = scan.header("location").unwrap().to_owned();
    assert_eq!(location, format!("/admin/jobs/coupon/{scan_id}"));
    let admin = [("authorization", bearer(ADMIN))];
    let admin: Vec<(&str, &str)> = admin.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(get_with(svc.addr, &location, &admin).await.status, 200);
    let path = format!("/admin/jobs/coupon/{grant}");
    assert_eq!(get_with(svc.addr, &path, &admin).await.status, 200);
    // The welcome job stays public: its id is what the sign-up answered.
    let welcome = get(svc.addr, &format!("/jobs/email/welcome-{user_id}")).await;
    assert_eq!(welcome.status, 200);
    svc.stop().await;
}

#[tokio::test]
async fn report_months_are_four_digit_years_and_two_digit_months() {
    let svc = start("wa-edge-months", FailurePolicy::Never).await;
    let admin = bearer(ADMIN);
    for month in [
        "+2026-1", "0000-01", "-999-01", "2026-1", "2026-001", "1899-12", "2026-00",
    ] {
        let body = serde_json::json!({ "month": month });
        let created = post_json(svc.addr, "/reports", &[("authorization", &admin)], &body).await;
        assert_eq!(
            (created.status, created.json()["field"].clone()),
            (422, serde_json::json!("month")),
            "POST {month}"
        );
        let path = format!("/reports/{}", month.replace('+', "%2B"));
        let status = get_with(svc.addr, &path, &[("authorization", &admin)]).await;
        assert_eq!(status.status, 422, "GET {month}");
    }
    let report = svc.app.queue::<serde_json::Value>("report").unwrap();
    assert_eq!(
        report.get_job_counts().await.unwrap().total(),
        0,
        "no report started"
    );
    svc.stop().await;
}

#[tokio::test]
async fn look_alike_addresses_are_one_mailbox_or_refused() {
    let svc = start("wa-edge-email", FailurePolicy::Never).await;
    let first = post_json(
        svc.addr,
        "/users",
        &[],
        &user("ada3@example.com", "1990-01-01"),
    )
    .await;
    assert_eq!(first.status, 202);
    // Full-width letters are the same address once NFKC-normalised: taken.
    for same in [
        "\u{ff41}da3@example.com",
        "ADA3@EXAMPLE.COM",
        "ada3@\u{ff45}xample.com",
    ] {
        let response = post_json(svc.addr, "/users", &[], &user(same, "1990-01-01")).await;
        assert_eq!(
            response.status,
            409,
            "{same}: {}",
            String::from_utf8_lossy(&response.body)
        );
    }
    // Characters that show nothing make look-alikes: refused.
    for invisible in [
        "ada3\u{fe0f}@example.com",
        "\u{3164}@example.com",
        "ada3\u{115f}@example.com",
        "ada3\u{34f}@example.com",
        "ada3\u{1d173}@example.com",
        "ada3\u{e0001}@example.com",
    ] {
        let response = post_json(svc.addr, "/users", &[], &user(invisible, "1990-01-01")).await;
        assert_eq!(
            (response.status, response.json()["field"].clone()),
            (422, serde_json::json!("email")),
            "{invisible:?}"
        );
    }
    assert_eq!(svc.db.users().await.unwrap().len(), 1);
    svc.stop().await;
}

#[tokio::test]
async fn errors_quote_a_bounded_piece_of_the_request() {
    let svc = start("wa-edge-echo", FailurePolicy::Never).await;
    let huge = "9".repeat(1_000_000);
    let body = serde_json::json!({ "date": huge }).to_string();
    let refused = operator_post(svc.addr, "/birthdays/run", body.as_bytes()).await;
    assert_eq!(refused.status, 422);
    assert!(
        refused.body.len() < 1024,
        "{} bytes: {:.200}",
        refused.body.len(),
        String::from_utf8_lossy(&refused.body)
    );
    assert_eq!(refused.json()["field"], "date");
    let long_id = "e".repeat(5_000);
    let admin = bearer(ADMIN);
    let export = get_with(
        svc.addr,
        &format!("/exports/{long_id}"),
        &[("authorization", &admin)],
    )
    .await;
    assert_eq!(export.status, 404);
    assert!(export.body.len() < 1024, "{} bytes", export.body.len());
    svc.stop().await;
}

#[tokio::test]
async fn a_scan_body_that_is_not_an_object_is_refused() {
    let svc = start("wa-edge-scan", FailurePolicy::Never).await;
    for body in [
        &b"[]"[..],
        b"\"2026-01-01\"",
        b"42",
        b"true",
        b"null",
        b"[{\"date\":\"2026-01-01\"}]",
    ] {
        let refused = operator_post(svc.addr, "/birthdays/run", body).await;
        assert_eq!(
            refused.status,
            422,
            "{}: {}",
            String::from_utf8_lossy(body),
            String::from_utf8_lossy(&refused.body)
        );
    }
    let coupon = svc.app.queue::<serde_json::Value>("coupon").unwrap();
    let counts = coupon.get_job_counts().await.unwrap();
    // Only the scheduler's next run: no scan was added.
    assert_eq!(counts.total() - counts.delayed, 0, "{counts:?}");
    svc.stop().await;
}

#[tokio::test]
async fn a_retried_signup_with_the_same_idempotency_key_gets_the_first_answer() {
    let svc = start("wa-edge-idem", FailurePolicy::Never).await;
    let key = [("idempotency-key", "3f1d2c7e-sign-up-1")];
    let body = user("kim@example.com", "1990-01-01");
    let first = post_json(svc.addr, "/users", &key, &body).await;
    assert_eq!(first.status, 202);
    let again = post_json(svc.addr, "/users", &key, &body).await;
    assert_eq!(
        again.status,
        202,
        "{}",
        String::from_utf8_lossy(&again.body)
    );
    assert_eq!(again.json(), first.json(), "the same user and token");
    assert_eq!(again.header("location"), first.header("location"));
    assert_eq!(again.header("cache-control"), Some("no-store"));
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(svc.db.users().await.unwrap().len(), 1);
    // The kept answer holds Kim's token, sealed: Redis holds it nowhere in clear.
    let token = first.json()["accessToken"].as_str().unwrap().to_owned();
    assert_eq!(svc.redis.keys_holding(&token), Vec::<String>::new());
    // The same key with another sign-up: refused, not answered with Kim's token.
    let other = post_json(
        svc.addr,
        "/users",
        &key,
        &user("lee@example.com", "1990-01-01"),
    )
    .await;
    assert_eq!(other.status, 422);
    assert!(other.json().get("accessToken").is_none());
    // Without a key, a retry is a second sign-up of a taken address.
    let unkeyed = post_json(svc.addr, "/users", &[], &body).await;
    assert_eq!(unkeyed.status, 409);
    svc.stop().await;
}

#[tokio::test]
async fn guessing_the_operator_token_on_the_api_is_throttled_as_on_the_dashboard() {
    let svc = start("wa-edge-guess", FailurePolicy::Never).await;
    let operator = format!("Bearer {ADMIN}");
    // Ten wrong tokens from one address, on the operator's API routes.
    for _ in 0..10 {
        let wrong = get_with(
            svc.addr,
            "/admin/jobs/email/welcome-x",
            &[("authorization", "Bearer guess-0123456789abcdef")],
        )
        .await;
        assert_eq!(wrong.status, 401);
    }
    // Then that address is refused for a while, the right token too, everywhere the
    // operator's token is checked: the API, the probes' details, the dashboard.
    let refused = get_with(
        svc.addr,
        "/admin/jobs/email/welcome-x",
        &[("authorization", &operator)],
    )
    .await;
    assert_eq!(
        refused.status,
        429,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    assert!(refused.header("retry-after").is_some());
    let dashboard = get_with(svc.addr, "/admin/queues", &[("authorization", &operator)]).await;
    assert_eq!(dashboard.status, 429);
    svc.stop().await;
}
