//! What the dashboard's tests share: a page's text, and a POST as its own forms send it.

use std::net::SocketAddr;

use queue_tests::http::{request, HttpResponse};

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
