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
    value("origin").is_some_and(|origin| origin_is_ours(headers, origin))
}

/// Whether `origin` (`scheme://host[:port]`) names this server: its host is the
/// request's `Host`, and its scheme is HTTP's. A page of another scheme (`foo://`) is
/// another origin, and so is a plain `http://` page where the proxy in front says it
/// served HTTPS (`X-Forwarded-Proto: https`): anyone on the path can write such a page.
/// An `https://` page passes whatever the proxy says (a load balancer behind a CDN may
/// say `http` of a site its visitors reach over HTTPS), and without a forwarded scheme
/// both of HTTP's pass: a server that terminates TLS itself cannot be told from one
/// that does not.
fn origin_is_ours(headers: &HeaderMap, origin: &str) -> bool {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let scheme = scheme.to_ascii_lowercase();
    let served = value("x-forwarded-proto")
        .and_then(|v| v.split(',').next())
        .map(|v| v.trim().to_ascii_lowercase());
    let downgraded = scheme == "http" && served.as_deref() == Some("https");
    let scheme_ok = (scheme == "http" || scheme == "https") && !downgraded;
    scheme_ok && value("host").is_some_and(|host| authority.eq_ignore_ascii_case(host))
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
        // A browser without fetch metadata still names the page of a cross-origin
        // `fetch` in `Origin`: another site's script is refused there too. (A browser
        // leaves `Origin` off a plain navigation or a same-origin `GET`.)
        None => value("origin").is_none_or(|origin| origin_is_ours(headers, origin)),
        Some("same-origin" | "none") => true,
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
    fn an_origin_of_another_scheme_is_another_origin() {
        let from = |origin, proto: Option<&'static str>| {
            let mut list = vec![("origin", origin), ("host", "app.example")];
            list.extend(proto.map(|p| ("x-forwarded-proto", p)));
            same_origin(&headers(&list))
        };
        assert!(!from("foo://app.example", None));
        assert!(!from("javascript://app.example", None));
        assert!(from("http://app.example", None));
        assert!(from("https://app.example", None));
        // Behind a proxy that says it served HTTPS, a plain-HTTP page is not ours.
        assert!(from("https://app.example", Some("https")));
        assert!(!from("http://app.example", Some("https")));
        // An HTTPS page is ours even where a load balancer behind a CDN says `http`.
        assert!(from("https://app.example", Some("http")));
    }

    #[test]
    fn a_foreign_origin_reads_nothing_from_a_browser_without_fetch_metadata() {
        assert!(!may_read(&headers(&[
            ("origin", "https://evil.example"),
            ("host", "app.example"),
        ])));
        assert!(may_read(&headers(&[
            ("origin", "https://app.example"),
            ("host", "app.example"),
        ])));
        assert!(!may_read(&headers(&[
            ("origin", "null"),
            ("host", "app.example")
        ])));
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
