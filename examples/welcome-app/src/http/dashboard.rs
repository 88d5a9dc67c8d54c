//! The queue dashboard at `/admin/queues`, for the operator only. A browser cannot send
//! a bearer token on its own, so the page also takes HTTP Basic credentials: any user
//! name, the `ADMIN_TOKEN` as the password. A browser does attach those to every
//! request once given, cross-site ones too; the dashboard refuses actions that do not
//! come from its own pages, which is what makes that safe.
//!
//! The mail and coupon queues are sealed in Redis; the operator sees their payloads
//! opened (`with_reveal`), and the dashboard logs each opening with who asked.

use axum::Router;
use queue_core::QueueApp;
use queue_dashboard::{Access, Credentials, Dashboard};

/// The dashboard at `path`, for the holder of `admin_token`: `operator` (the bearer
/// token, whose count of wrong tokens the API's operator routes share) or Basic.
pub(crate) fn router(
    app: &QueueApp,
    path: &str,
    admin_token: &str,
    operator: Credentials,
) -> Router {
    let policy = operator
        .or(Access::basic_any_user(admin_token))
        .with_reveal()
        .realm("welcome-app queues");
    Dashboard::new(app, policy).mount(path)
}
