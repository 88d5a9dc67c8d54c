//! The pages' HTML: escaping, the layout every page shares, and its stylesheet. Every
//! value that comes from a job or a request goes through [`esc`].

use std::fmt::Write as _;

use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};

/// The stylesheet, embedded: no CDN, no build step. Light and dark follow the system.
pub(super) const STYLESHEET: &str = r#":root{color-scheme:light dark;--bg:#fff;--fg:#1d2330;--muted:#667085;--line:#e4e7ec;--accent:#2f6fed;--bad:#c4320a;--good:#067647;--chip:#f2f4f7}
@media (prefers-color-scheme:dark){:root{--bg:#101318;--fg:#e6e8ec;--muted:#98a2b3;--line:#2b303b;--accent:#7aa2ff;--bad:#ff8a65;--good:#6ce9a6;--chip:#1c212b}}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;background:var(--bg);color:var(--fg)}
header{display:flex;gap:1rem;align-items:baseline;padding:.75rem 1.5rem;border-bottom:1px solid var(--line)}
header a.home{font-weight:600;color:var(--fg);text-decoration:none}header .who{margin-left:auto;color:var(--muted)}
main{padding:1rem 1.5rem;max-width:80rem}h1{font-size:1.25rem;margin:.5rem 0 1rem}h2{font-size:1rem;margin:1.5rem 0 .5rem}
a{color:var(--accent)}table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted)}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.tabs{display:flex;gap:.25rem;flex-wrap:wrap;margin-bottom:.75rem}.tabs a{padding:.2rem .6rem;border-radius:1rem;background:var(--chip);text-decoration:none;color:var(--fg)}
.tabs a.on{background:var(--accent);color:var(--bg)}.chip{padding:.05rem .5rem;border-radius:1rem;background:var(--chip)}
.bad{color:var(--bad)}.good{color:var(--good)}.muted{color:var(--muted)}
pre{background:var(--chip);padding:.6rem;border-radius:.4rem;overflow:auto;max-height:24rem}
form.inline{display:inline}button{font:inherit;padding:.25rem .75rem;border:1px solid var(--line);border-radius:.4rem;background:var(--chip);color:var(--fg);cursor:pointer}
button.danger{color:var(--bad)}.actions{display:flex;gap:.5rem;flex-wrap:wrap;margin:.75rem 0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{color:var(--muted)}dd{margin:0}
.notice{padding:.6rem .8rem;border-left:3px solid var(--bad);background:var(--chip);margin:1rem 0}
svg.spark{vertical-align:middle}svg.spark.good{fill:var(--good)}svg.spark.bad{fill:var(--bad)}
input,select{font:inherit;padding:.2rem .4rem;border:1px solid var(--line);border-radius:.3rem;background:var(--bg);color:var(--fg)}
nav.sub{margin:.25rem 0 1rem}nav.sub a{margin-right:1rem}
textarea{font:13px/1.4 ui-monospace,monospace;width:100%;max-width:48rem;padding:.4rem;border:1px solid var(--line);border-radius:.3rem;background:var(--bg);color:var(--fg)}
.field-error{margin:.25rem 0}main>form,main>div>form{margin:.5rem 0}.actions a{align-self:center}
ul.tree{list-style:none;padding-left:0}ul.tree ul{list-style:none;padding-left:1.25rem;border-left:1px solid var(--line);margin:.25rem 0}ul.tree li{margin:.2rem 0}
"#;

/// `text` with `& < > " '` escaped, for element content and quoted attributes.
pub(super) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `segment` for a URL path: unreserved characters kept, the rest percent-encoded.
pub(super) fn url_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A whole page: the header with the way home and who is looking, then `body`.
pub(super) fn page(base: &str, title: &str, who: &str, body: &str) -> Html<String> {
    // The mount point itself: axum's `nest` routes `/admin/queues`, not `/admin/queues/`.
    let home = if base.is_empty() {
        "/".to_owned()
    } else {
        esc(base)
    };
    let base = esc(base);
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <link rel=\"icon\" href=\"data:,\">\
         <title>{title} · queues</title><link rel=\"stylesheet\" href=\"{base}/assets/dashboard.css\">\
         <script src=\"{base}/assets/live.js\" defer></script></head>\
         <body><header><a class=\"home\" href=\"{home}\">Queues</a><span class=\"who\">{who}</span></header>\
         <main>{body}</main></body></html>",
        title = esc(title),
        who = esc(who),
    ))
}

/// A page that only says what went wrong, with its status.
pub(super) fn error_page(status: StatusCode, message: &str) -> Response {
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{code}</title></head>\
         <body><main><h1>{code}</h1><p>{message}</p></main></body></html>",
        code = status.as_u16(),
        message = esc(message),
    );
    let mut response = (status, Html(body)).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            header::HeaderValue::from(crate::RETRY_AFTER_SECONDS),
        );
    }
    response
}

/// A POST button: one form per action, so each works without JavaScript.
pub(super) fn action_button(action: &str, label: &str, danger: bool) -> String {
    format!(
        "<form class=\"inline\" method=\"post\" action=\"{}\"><button{}>{}</button></form>",
        esc(action),
        if danger { " class=\"danger\"" } else { "" },
        esc(label)
    )
}

/// A tiny bar chart of per-minute counts (oldest left), as inline SVG: no script, no
/// image request. `points` come newest first, as BullMQ stores them.
pub(super) fn sparkline(points: &[u64], class: &str) -> String {
    const WIDTH: usize = 120;
    const HEIGHT: u64 = 24;
    let max = points.iter().copied().max().unwrap_or(0).max(1);
    let bar = (WIDTH / points.len().max(1)).max(1);
    let mut bars = String::new();
    for (i, n) in points.iter().rev().enumerate() {
        let h = (n * HEIGHT).div_ceil(max);
        let _ = write!(
            bars,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{h}\"/>",
            i * bar,
            HEIGHT - h,
            bar.saturating_sub(1).max(1)
        );
    }
    format!(
        "<svg class=\"spark {class}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" \
         aria-label=\"{} in the last {} minutes\">{bars}</svg>",
        points.iter().sum::<u64>(),
        points.len()
    )
}

/// Milliseconds since the epoch as an ISO-8601 UTC time, to the second.
pub(super) fn time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 as a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(
            esc(r#"<script>alert("x")</script>&'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"
        );
        assert_eq!(url_segment("welcome-42"), "welcome-42");
        assert_eq!(url_segment("a/b c?"), "a%2Fb%20c%3F");
    }

    #[test]
    fn times_are_utc_dates() {
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(time(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(time(1_798_761_599_000), "2026-12-31 23:59:59 UTC");
    }
}
