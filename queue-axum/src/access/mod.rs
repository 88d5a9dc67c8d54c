//! Access decisions: the application's [`AccessPolicy`] decides, per request, what it may
//! see and do ([`Access`]); ready-made policies check HTTP Basic and bearer credentials
//! against a [`Secret`] ([`Credentials`]); and [`refusal`] says whether a request gets
//! through, refusing what a browser must not do with a visitor's credentials
//! (another site's actions and reads). The dashboard (`queue-dashboard`) is guarded by
//! it; a route of the application's own can be too.

mod credentials;
mod decision;
mod failures;
mod origin;
mod secret;

pub use credentials::{Credentials, DEFAULT_FAILURE_WINDOW, DEFAULT_MAX_FAILURES};
pub use decision::{refusal, Access, AccessPolicy, Refusal};
pub use secret::{InvalidSecret, Secret};
