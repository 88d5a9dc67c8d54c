//! What an `#[inject_queue]` struct implements: being built from an app.

use super::QueueApp;
use crate::error::Result;

/// Builds an `#[inject_queue]` struct (or anything else that knows its queues) from an app.
///
/// ```
/// use queue_core::{app::FromApp, Queue, QueueApp, Result};
///
/// /// The queues a mail service sends with, made once from the app.
/// struct Mailer {
///     email: Queue<String>,
/// }
///
/// impl FromApp for Mailer {
///     fn from_app(app: &QueueApp) -> Result<Self> {
///         Ok(Mailer { email: app.queue("email")? })
///     }
/// }
/// # fn use_it(app: &QueueApp) -> Result<()> { let _mailer = Mailer::from_app(app)?; Ok(()) }
/// ```
pub trait FromApp: Sized {
    /// Builds it, or fails when a queue name is invalid.
    fn from_app(app: &QueueApp) -> Result<Self>;
}
