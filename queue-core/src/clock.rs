//! The wall clock as BullMQ keeps time: milliseconds since the Unix epoch. A module
//! of its own because jobs, the engine and the store all stamp times with it, and
//! none of them should import another just for the clock.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// How far this process's clock is set ahead of the real one (negative: behind), for
/// tests that play a host whose clock is wrong (`testing::skew_host_clock`, feature
/// `__private`). Zero otherwise.
static SKEW_MS: AtomicI64 = AtomicI64::new(0);

/// Now, in milliseconds since the Unix epoch (0 for a clock set before it).
pub(crate) fn now_ms() -> u64 {
    let real = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let skew = SKEW_MS.load(Ordering::Relaxed);
    if skew >= 0 {
        real.saturating_add(skew.unsigned_abs())
    } else {
        real.saturating_sub(skew.unsigned_abs())
    }
}

/// Sets this process's clock `ms` ahead of the real one (behind when negative).
#[cfg(feature = "__private")]
pub(crate) fn set_skew_ms(ms: i64) {
    SKEW_MS.store(ms, Ordering::Relaxed);
}
