//! The pages' shared parts, as maud templates: the layout every page has, the error
//! page, and the pieces in [`format`] and [`widgets`]. maud escapes every value it
//! writes; `PreEscaped` (raw markup) appears nowhere in the dashboard but in
//! [`widgets::sparkline`]'s numbers-only SVG, so no string from a job or a request
//! reaches the HTML unescaped by construction.

pub(super) mod format;
pub(super) mod widgets;

use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

use super::Base;

/// The stylesheet, embedded: no CDN, no build step. Light and dark follow the system.
pub(super) const STYLESHEET: &str = include_str!("style.css");

/// A whole page: the header with the way home and who is looking, then `body`.
pub(super) fn page(base: &Base, title: &str, who: &str, body: Markup) -> Html<String> {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width,initial-scale=1";
                link rel="icon" href="data:,";
                title { (format::Clip(title, 80)) " · queues" }
                link rel="stylesheet" href=(base.asset("dashboard.css"));
                script src=(base.asset("live.js")) defer {}
            }
            body {
                header {
                    a.home href=(base.home()) { "Queues" }
                    nav.top {
                        a href=(base.workers()) { "Workers" }
                    }
                    span.who { (format::Clip(who, 60)) }
                }
                main { (body) }
            }
        }
    };
    Html(markup.into_string())
}

/// A page that only says what went wrong, with its status; with the way home when the
/// dashboard's mount point is known.
pub(super) fn error_page(status: StatusCode, message: &str, base: Option<&Base>) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (status.as_u16()) }
            }
            body {
                main {
                    h1 { (status.as_u16()) }
                    p { (format::Clip(message, 2_000)) }
                    @if let Some(base) = base {
                        p { a href=(base.home()) { "All queues" } }
                    }
                }
            }
        }
    };
    let mut response = (status, Html(markup.into_string())).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            header::HeaderValue::from(queue_axum::RETRY_AFTER_SECONDS),
        );
    }
    response
}
