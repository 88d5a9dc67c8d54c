//! What the dashboard's tests share: a dashboard served, a page's text, and a POST as its
//! own forms send it.

use std::net::SocketAddr;

use axum::Router;
use queue_dashboard::Dashboard;
use queue_tests::http::{listener, request, HttpResponse};

/// A page's body as text.
pub(crate) fn text(response: &HttpResponse) -> String {
    String::from_utf8_lossy(&response.body).into_owned()
}

/// A POST with a form body, as the dashboard's own pages send it, with `headers` too
/// (who the test's policy says the person is, say).
pub(crate) async fn post_form(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    form: &str,
) -> HttpResponse {
    let mut all = vec![
        ("sec-fetch-site", "same-origin"),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    all.extend_from_slice(headers);
    request(addr, "POST", path, &all, form.as_bytes())
        .await
        .expect("request")
}

/// `dashboard` at `/admin/queues`, served with each request's peer address (as the
/// search bound and the trusted proxies read it).
pub(crate) async fn serve_dashboard(dashboard: Dashboard) -> SocketAddr {
    let (listener, addr) = listener().await;
    let router: Router = Router::new().merge(dashboard.mount("/admin/queues"));
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    addr
}
