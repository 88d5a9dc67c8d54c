//! The words `queue-core` and `queue-macros` must agree on, defined once: the event
//! kinds a listener can name, the duration strings an attribute can hold, and the
//! ranges the worker's durations must fall in. The macro crate cannot depend on
//! `queue-core` (which depends on it), so both depend on this.
//!
//! An implementation detail: applications depend on `queue-core`, whose crate page
//! starts from the quick start, and never on this crate.
//!
//! ```
//! assert!(queue_vocab::WORKER_EVENT_KINDS.contains(&"lock-lost"));
//! assert_eq!(queue_vocab::attribute_spelling("lock-lost"), "lock_lost");
//! assert_eq!(queue_vocab::parse_duration_millis("30s"), Ok(30_000));
//! ```

/// The kinds of `WorkerEvent`, as `WorkerEvent::kind` names them.
pub const WORKER_EVENT_KINDS: &[&str] = &[
    "active",
    "completed",
    "failed",
    "progress",
    "stalled",
    "blocked",
    "lock-lost",
    "drained",
    "error",
];

/// The kinds of `QueueEvent` a listener can name, as `QueueEvent::kind` names them
/// (BullMQ's event names).
pub const QUEUE_EVENT_KINDS: &[&str] = &[
    "added",
    "waiting",
    "delayed",
    "active",
    "progress",
    "completed",
    "failed",
    "stalled",
    "removed",
    "duplicated",
    "deduplicated",
    "retries-exhausted",
    "drained",
    "paused",
    "resumed",
];

/// How an attribute writes a kind: an identifier, so `lock_lost` for `lock-lost`.
pub fn attribute_spelling(kind: &str) -> String {
    kind.replace('-', "_")
}

/// The ranges (milliseconds, inclusive) of the worker's durations: zero breaks the
/// engine (a zero lock duration panics its renewal interval), and a value past the
/// maximum is a typo. `(setting, min_ms, max_ms)`.
pub const DURATION_RANGES: &[(&str, u64, u64)] = &[
    ("timeout", 1, 24 * 3_600_000),
    ("lock_duration", 100, 3_600_000),
    ("stalled_interval", 100, 24 * 3_600_000),
    ("cancel_grace", 0, 3_600_000),
];

/// The range of `setting`, if it has one.
pub fn duration_range(setting: &str) -> Option<(u64, u64)> {
    DURATION_RANGES
        .iter()
        .find(|(name, _, _)| *name == setting)
        .map(|(_, min, max)| (*min, *max))
}

/// A duration written as a string (`"500ms"`, `"30s"`, `"5m"`, `"1h"`) in
/// milliseconds, or a message saying what is accepted.
pub fn parse_duration_millis(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| {
        format!("`{text}` is not a duration; write a whole number and a unit, e.g. \"30s\" or \"500ms\"")
    })?;
    let factor = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => {
            return Err(format!(
                "`{text}` has no known unit; use ms, s, m or h, e.g. \"30s\""
            ))
        }
    };
    let millis = number
        .checked_mul(factor)
        .ok_or_else(|| format!("`{text}` is too long"))?;
    if millis == 0 {
        return Err("a duration must be longer than zero".to_owned());
    }
    Ok(millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_mistakes() {
        assert_eq!(parse_duration_millis("250ms"), Ok(250));
        assert_eq!(parse_duration_millis("2m"), Ok(120_000));
        assert_eq!(parse_duration_millis("1h"), Ok(3_600_000));
        assert!(parse_duration_millis("30")
            .unwrap_err()
            .contains("no known unit"));
        assert!(parse_duration_millis("s")
            .unwrap_err()
            .contains("not a duration"));
        assert!(parse_duration_millis("0s")
            .unwrap_err()
            .contains("longer than zero"));
        assert_eq!(duration_range("lock_duration"), Some((100, 3_600_000)));
    }
}
