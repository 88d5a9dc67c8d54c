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
