//! Every template of the dashboard, as maud markup from data already read: a file per
//! page, the layout every page has, the error page (and [`Problem`] as one), and the
//! pieces in [`format`] and [`widgets`]; the embedded stylesheet and script. maud
//! escapes every value it writes; `PreEscaped` (raw markup) appears nowhere in the
//! dashboard but in [`widgets::sparkline`]'s numbers-only SVG, so no string from a job
//! or a request reaches the HTML unescaped by construction.

pub(crate) mod add_job;
pub(crate) mod attempts;
pub(crate) mod confirm;
pub(crate) mod flow;
pub(crate) mod format;
pub(crate) mod groups;
pub(crate) mod job;
pub(crate) mod listing;
pub(crate) mod overview;
pub(crate) mod queue;
pub(crate) mod schedulers;
pub(crate) mod sealed;
pub(crate) mod widgets;
pub(crate) mod workers;

use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

use crate::base::Base;
use crate::problem::Problem;

/// The stylesheet, embedded: no CDN, no build step. Light and dark follow the system.
pub(crate) const STYLESHEET: &str = include_str!("style.css");

/// The live pages' script: counts in place; on a list, each listed job that moved
/// marked with its new state, and a note that the list changed; on a job's page, its
/// state chip and a note. Served from our own origin, as the CSP requires.
pub(crate) const SCRIPT: &str = include_str!("live.js");

/// A whole page: the header with the way home and who is looking, then `body`.
pub(crate) fn page(base: &Base, title: &str, who: &str, body: Markup) -> Html<String> {
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
pub(crate) fn error_page(status: StatusCode, message: &str, base: Option<&Base>) -> Response {
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

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        match self {
            Problem::NotFound(message) => error_page(StatusCode::NOT_FOUND, &message, None),
            Problem::BadRequest(message) => error_page(StatusCode::BAD_REQUEST, &message, None),
            Problem::TooMany {
                message,
                retry_after_s,
            } => {
                let mut response = error_page(StatusCode::TOO_MANY_REQUESTS, &message, None);
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    header::HeaderValue::from(retry_after_s),
                );
                response
            }
            Problem::Queue(error) => {
                let error = queue_axum::QueueError::from(*error);
                let status = error.status();
                if status == StatusCode::INTERNAL_SERVER_ERROR {
                    tracing::error!(error = %error, "dashboard: queue error");
                }
                error_page(status, &error.body_text(), None)
            }
        }
    }
}
