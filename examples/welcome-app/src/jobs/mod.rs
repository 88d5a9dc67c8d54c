//! The service's jobs: payloads, processors and the dead-letter alert.

pub mod alerts;
pub mod coupons;
pub mod email;

/// The email queue.
pub const EMAIL_QUEUE: &str = "email";
/// The coupon queue.
pub const COUPON_QUEUE: &str = "coupon";
