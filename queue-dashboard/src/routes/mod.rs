//! The dashboard's addresses: which handler answers each, behind the guard. A page's
//! handler checks what the request asks for, reads it (`load`) and renders it (`view`);
//! an action's handlers are in `action`, each beside its confirmation.

mod assets;
mod live;
mod pages;

use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::action;
use crate::base::Base;
use crate::guard::guard;
use crate::state::Dashboard;
use crate::view;

impl Dashboard {
    /// The router, nested at `path` (`/admin/queues`), with `path/` redirected to it:
    /// merge it into the app's router.
    pub fn mount(self, path: &str) -> Router {
        let path = path.trim_end_matches('/');
        let home = if path.is_empty() { "/" } else { path }.to_owned();
        let router = self.router();
        if path.is_empty() {
            return router;
        }
        Router::new().nest(path, router).route(
            &format!("{path}/"),
            get(move |uri: Uri| async move { Redirect::permanent(&with_query(&home, &uri)) }),
        )
    }

    /// The router, to `nest` under the path of your choice ([`Dashboard::mount`] also
    /// redirects the path with a trailing slash, which `nest` leaves to the app).
    pub fn router(self) -> Router {
        let shared = self.shared;
        let guard = axum::middleware::from_fn_with_state(shared.clone(), guard);
        Router::new()
            .route("/", get(pages::overview))
            .route("/-/assets/dashboard.css", get(assets::stylesheet))
            .route("/-/assets/live.js", get(assets::script))
            .route("/-/workers", get(pages::workers))
            .route("/{queue}", get(pages::queue))
            .route("/{queue}/live", get(live::stream))
            .route("/{queue}/bulk", post(action::bulk::act))
            .route("/{queue}/jobs/{id}", get(pages::job))
            .route(
                "/{queue}/jobs/{id}/{action}",
                get(action::job::confirm).post(action::job::act),
            )
            .route("/{queue}/schedulers", get(pages::schedulers))
            .route(
                "/{queue}/schedulers/{id}/{action}",
                post(action::scheduler::act),
            )
            .route("/{queue}/groups", get(pages::groups))
            .route("/{queue}/groups/{action}", post(action::group::act))
            .route("/{queue}/workers", get(pages::workers_of_queue))
            .route(
                "/{queue}/add",
                get(action::add_job::form).post(action::add_job::submit),
            )
            .route(
                "/{queue}/actions/clean",
                get(action::clean::confirm).post(action::clean::act),
            )
            .route(
                "/{queue}/actions/{action}",
                get(action::queue::confirm).post(action::queue::act),
            )
            .fallback(not_found)
            .layer(guard)
            .with_state(shared)
    }
}

/// `to` with the query of `uri`, if it has one.
fn with_query(to: &str, uri: &Uri) -> String {
    match uri.query() {
        Some(query) => format!("{to}?{query}"),
        None => to.to_owned(),
    }
}

/// No route: a path with a trailing slash goes to the path without it; anything else is
/// the dashboard's own 404 page.
async fn not_found(base: Base, uri: Uri) -> Response {
    let path = uri.path();
    let rest = path.trim_matches('/');
    // Only a plain path is sent back as a `Location`: `/\evil.example/` would read as
    // another host to a browser.
    let plain = rest
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~%/".contains(&b));
    if path.len() > 1 && path.ends_with('/') && plain && !rest.starts_with('/') {
        let to = format!("{}/{rest}", base.as_str());
        return Redirect::permanent(&with_query(&to, &uri)).into_response();
    }
    view::error_page(StatusCode::NOT_FOUND, "No such page.", Some(&base))
}
