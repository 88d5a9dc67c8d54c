//! What a browser's request says of where it comes from (`Sec-Fetch-Site`, `Origin`):
//! an action from another site's page is refused (CSRF), and so is a read another site's
//! script, frame or image asks for (the resource isolation policy).

use axum::http::HeaderMap;

/// Whether a state-changing request comes from a page of this origin: the browser's
/// `Sec-Fetch-Site` when it sends one, else `Origin` against `Host`. A request with
/// neither is refused: every browser sends one of them on a POST.
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = value("sec-fetch-site") {
        return site == "same-origin";
    }
    match (value("origin"), value("host")) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host)),
        _ => false,
    }
}

/// Whether a read may be answered (the resource isolation policy): a request from the
/// origin's own pages, a person typing the address or opening a bookmark
/// (`Sec-Fetch-Site: none`), a browser that sends no fetch metadata, or a person
/// following a link from elsewhere (a top-level navigation to a document: the link in
/// the alert that names a job). Refused: another site's `fetch`, `<img>`, `<script>`,
/// `<iframe>`, `EventSource`, which would read or probe the pages with the operator's
/// credentials.
pub(crate) fn may_read(headers: &HeaderMap) -> bool {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match value("sec-fetch-site") {
        None | Some("same-origin" | "none") => true,
        Some(_) => {
            value("sec-fetch-mode") == Some("navigate")
                && matches!(value("sec-fetch-dest"), None | Some("document"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::headers;

    #[test]
    fn only_same_origin_posts_pass() {
        assert!(same_origin(&headers(&[("sec-fetch-site", "same-origin")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "same-site")])));
        // Sec-Fetch-Site wins over a matching Origin.
        assert!(!same_origin(&headers(&[
            ("sec-fetch-site", "cross-site"),
            ("origin", "http://app.example"),
            ("host", "app.example"),
        ])));
        assert!(same_origin(&headers(&[
            ("origin", "https://app.example:8443"),
            ("host", "app.example:8443"),
        ])));
        assert!(!same_origin(&headers(&[
            ("origin", "https://evil.example"),
            ("host", "app.example"),
        ])));
        assert!(!same_origin(&headers(&[
            ("origin", "null"),
            ("host", "app.example")
        ])));
        assert!(!same_origin(&HeaderMap::new()));
    }

    #[test]
    fn other_sites_may_link_to_a_page_but_not_load_it() {
        assert!(may_read(&HeaderMap::new()));
        assert!(may_read(&headers(&[("sec-fetch-site", "same-origin")])));
        assert!(may_read(&headers(&[("sec-fetch-site", "none")])));
        assert!(may_read(&headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "document"),
        ])));
        for (mode, dest) in [
            ("cors", "empty"),
            ("no-cors", "image"),
            ("no-cors", "script"),
            ("navigate", "iframe"),
        ] {
            assert!(!may_read(&headers(&[
                ("sec-fetch-site", "cross-site"),
                ("sec-fetch-mode", mode),
                ("sec-fetch-dest", dest),
            ])));
        }
        assert!(!may_read(&headers(&[("sec-fetch-site", "same-site")])));
    }
}
