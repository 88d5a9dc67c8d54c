//! The wall clock as BullMQ keeps time: milliseconds since the Unix epoch. A module
//! of its own because jobs, the engine and the store all stamp times with it, and
//! none of them should import another just for the clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the Unix epoch (0 for a clock set before it).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
