//! [`IdempotencyLayer`]: a retried request with the same `Idempotency-Key` gets the first
//! answer instead of doing the work again, as the IETF draft "The Idempotency-Key HTTP
//! Header Field" describes; and the [`IdempotencyKey`] extractor, for a route that makes
//! job ids from the key itself.

mod bound;
mod hold;
mod key;
mod layer;
mod record;
mod seal;
mod service;
mod settings;

pub use key::{IdempotencyKey, IDEMPOTENCY_KEY_HEADER};
pub use layer::{IdempotencyLayer, DEFAULT_IDEMPOTENCY_TTL, DEFAULT_MAX_NEW_KEYS_PER_MINUTE};
pub use service::{IdempotencyService, REPLAYED_HEADER};
