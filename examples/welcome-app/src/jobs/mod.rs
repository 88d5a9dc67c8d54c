//! The service's jobs: payloads, processors and the dead-letter alert; the monthly
//! report (a flow of stages) and the users export (long, with timeout and cancel).

pub mod alerts;
pub mod coupons;
pub mod email;
pub mod exports;
pub mod reports;

/// The email queue.
pub const EMAIL_QUEUE: &str = "email";
/// The coupon queue.
pub const COUPON_QUEUE: &str = "coupon";
