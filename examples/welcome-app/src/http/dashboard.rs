//! The queue dashboard at `/admin/queues`, for the operator only. A browser cannot send
//! a bearer token on its own, so the page also takes HTTP Basic credentials: any user
//! name, the `ADMIN_TOKEN` as the password. A browser does attach those to every
//! request once given, cross-site ones too; the dashboard refuses actions that do not
//! come from its own pages, which is what makes that safe.

use axum::Router;
use queue_core::QueueApp;
use queue_dashboard::{Access, Dashboard};

/// The dashboard at `path`, for the holder of `admin_token`.
pub(crate) fn router(app: &QueueApp, path: &str, admin_token: String) -> Router {
    let policy = Access::bearer(&admin_token)
        .or(Access::basic_any_user(&admin_token))
        .with_payloads()
        .realm("welcome-app queues");
    Dashboard::new(app, policy).mount(path)
}
