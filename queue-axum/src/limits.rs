//! The sizes this crate accepts from a client, shared by the extractors that enforce
//! them and the rejections that name them.

/// The longest `Idempotency-Key` taken.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;
