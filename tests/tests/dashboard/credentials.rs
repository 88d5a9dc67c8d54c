//! The dashboard's ready-made policies: HTTP Basic and bearer credentials, checked
//! against a token or its SHA-256 without leaking by timing, with the challenge a
//! browser needs to ask for a login. The example's policy in one line.

use std::net::SocketAddr;

use axum::Router;
use queue_core::QueueApp;
use queue_dashboard::{Access, Dashboard, Secret};
use queue_tests::http::{listener, request, HttpResponse};
use queue_tests::TestRedis;

const TOKEN: &str = "s3cret-operator-token-0123456789";
/// SHA-256 of "viewer-token-abcdefghijklmnop", as a configuration would hold it.
const VIEWER_TOKEN_SHA256: &str =
    "edf59f5d908b58b34490b97c51e9787768143260dd78c89b9301488898cba8ee";

/// `Basic base64("ops:" + TOKEN)`, and variations.
const OPS: &str = "Basic b3BzOnMzY3JldC1vcGVyYXRvci10b2tlbi0wMTIzNDU2Nzg5";
const OPS_WRONG_PASSWORD: &str = "Basic b3BzOndyb25n";
const EVE_RIGHT_PASSWORD: &str = "Basic ZXZlOnMzY3JldC1vcGVyYXRvci10b2tlbi0wMTIzNDU2Nzg5";
const OPS_CAPITALISED: &str = "Basic T3BzOnMzY3JldC1vcGVyYXRvci10b2tlbi0wMTIzNDU2Nzg5";

async fn serve(app: &QueueApp) -> SocketAddr {
    let viewer = Secret::sha256_hex(VIEWER_TOKEN_SHA256).unwrap();
    // The operator: Basic `ops` or the bearer token; a viewer by its own token.
    let policy = Access::basic("ops", TOKEN)
        .or(Access::bearer(TOKEN))
        .with_payloads()
        .or(Access::bearer(viewer).read_only())
        .realm("test queues");
    let (tcp, addr) = listener().await;
    let router = Router::new().nest("/admin/queues", Dashboard::new(app, policy).router());
    tokio::spawn(async move { axum::serve(tcp, router).await });
    addr
}

async fn get(addr: SocketAddr, authorization: Option<&str>) -> HttpResponse {
    let headers: Vec<(&str, &str)> = authorization
        .map(|a| vec![("authorization", a)])
        .unwrap_or_default();
    request(addr, "GET", "/admin/queues", &headers, b"")
        .await
        .expect("request")
}

#[tokio::test]
async fn basic_and_bearer_credentials_log_in_and_everything_else_is_asked_to() {
    let redis = TestRedis::new("dash-credentials");
    let app = redis.app(|b| b).await;
    let addr = serve(&app).await;

    // No credentials, or wrong ones: 401 with the challenge that makes a browser ask.
    for wrong in [
        None,
        Some(OPS_WRONG_PASSWORD),
        Some(EVE_RIGHT_PASSWORD),
        Some(OPS_CAPITALISED),
        Some("Bearer not-the-token"),
        Some("Basic !!not base64!!"),
        Some("Digest username=\"ops\""),
    ] {
        let answer = get(addr, wrong).await;
        assert_eq!(answer.status, 401, "{wrong:?}");
        assert_eq!(
            answer.header("www-authenticate"),
            Some("Basic realm=\"test queues\", charset=\"UTF-8\""),
            "{wrong:?}"
        );
    }

    // The right ones, in either scheme (the scheme's name in any case, as HTTP says).
    for right in [OPS, &format!("Bearer {TOKEN}"), &format!("bearer {TOKEN}")] {
        let answer = get(addr, Some(right)).await;
        assert_eq!(answer.status, 200, "{right}");
    }

    // The viewer's token, checked against its SHA-256: it may look, not act.
    let viewer = "Bearer viewer-token-abcdefghijklmnop";
    assert_eq!(get(addr, Some(viewer)).await.status, 200);
    let action = request(
        addr,
        "POST",
        "/admin/queues/q/pause",
        &[("authorization", viewer), ("sec-fetch-site", "same-origin")],
        b"",
    )
    .await
    .unwrap();
    assert_eq!(action.status, 403);
}

#[test]
fn a_malformed_hash_is_refused_with_a_reason() {
    let error = Secret::sha256_hex("not-hex").unwrap_err();
    assert!(error.to_string().contains("64 hex digits"), "{error}");
}

/// `GET /admin/queues` with `authorization`, from the loopback address `source`: the
/// answer's status and head.
async fn get_from(source: [u8; 4], addr: SocketAddr, authorization: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((source, 0))).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let request = format!(
        "GET /admin/queues HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {authorization}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, answer)
}

#[tokio::test]
async fn a_client_that_keeps_guessing_is_refused_for_a_while_and_others_are_not() {
    let redis = TestRedis::new("dash-guessing");
    let app = redis.app(|b| b).await;
    let policy = Access::bearer(TOKEN).max_failures(3, std::time::Duration::from_secs(60));
    let router = Router::new().nest("/admin/queues", Dashboard::new(&app, policy).router());
    // queue_axum's server tells each request its client's address.
    let addr = queue_tests::http::serve(router).await;
    let right = format!("Bearer {TOKEN}");
    for _ in 0..3 {
        let (status, _) = get_from([127, 0, 0, 3], addr, "Bearer a-guess").await;
        assert_eq!(status, 401);
    }
    // The guesser is refused now, even with the right token: a lucky guess tells nothing.
    let (status, answer) = get_from([127, 0, 0, 3], addr, &right).await;
    assert_eq!(status, 429, "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(lower.contains("retry-after: "), "{answer}");
    assert!(answer.contains("Too many wrong credentials"), "{answer}");
    // Another address logs in as ever.
    let (status, answer) = get_from([127, 0, 0, 4], addr, &right).await;
    assert_eq!(status, 200, "{answer}");
}
