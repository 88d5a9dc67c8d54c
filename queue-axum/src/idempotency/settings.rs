//! What an [`IdempotencyLayer`](super::IdempotencyLayer) was configured with.

use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use queue_core::claims::Claims;

/// What [`IdempotencyLayer::scope_by`](super::IdempotencyLayer::scope_by) takes.
pub(super) type ScopeFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;

/// What a layer was configured with, shared by its services.
#[derive(Clone)]
pub(super) struct Settings {
    pub(super) claims: Result<Claims, String>,
    pub(super) ttl: Duration,
    pub(super) hold: Duration,
    pub(super) require_key: bool,
    pub(super) max_body_bytes: usize,
    pub(super) max_answer_bytes: usize,
    pub(super) scope: Option<Arc<ScopeFn>>,
    /// How many new keys one caller may claim per window: `(keys, window)`.
    pub(super) new_keys: Option<(u64, Duration)>,
}
