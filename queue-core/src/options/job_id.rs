//! Job id validation: BullMQ's rules, with messages that say how to fix the id.

use crate::error::Error;

/// Key suffixes that BullMQ uses under `<prefix>:<queue>:`. A job whose id equals one of
/// them would have its hash written over the queue's own bookkeeping key.
const RESERVED_IDS: &[&str] = &[
    "wait",
    "paused",
    "meta",
    "id",
    "active",
    "delayed",
    "prioritized",
    "completed",
    "failed",
    "stalled",
    "stalled-check",
    "limiter",
    "events",
    "marker",
    "pc",
    "repeat",
    "waiting-children",
    "de",
    "metrics",
];

/// Whether `id` could name a job: an id BullMQ gave (its integers, and the
/// `repeat:<scheduler>:<run time>` of a scheduler's jobs) or one a producer could choose.
///
/// Anything else names no job, and every lookup and action by id answers "no such job"
/// without asking Redis: a reserved name (`meta`, `id`, `events`, ...) is one of the
/// queue's own keys, any other `:` reaches other keys (`repeat:<scheduler>` is a
/// scheduler's definition), and ids with control characters or over
/// [`MAX_JOB_ID_BYTES`] are refused at `add`. Check an id from a client with it before
/// you act on it; the status route and the dashboard do.
///
/// ```
/// use queue_core::options::could_be_job_id;
///
/// assert!(could_be_job_id("welcome-42"));
/// assert!(could_be_job_id("17"));
/// assert!(could_be_job_id("repeat:hourly:1796142568645"));
/// assert!(!could_be_job_id("meta"));
/// assert!(!could_be_job_id("repeat:hourly"));
/// assert!(!could_be_job_id("a\u{7}b"));
/// ```
pub fn could_be_job_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_JOB_ID_BYTES
        && (!id.contains(':') || is_scheduler_job_id(id))
        && !id.chars().any(char::is_control)
        && !RESERVED_IDS.contains(&id)
}

/// `repeat:<scheduler id>:<run time in ms>`: how BullMQ names a scheduler's jobs.
fn is_scheduler_job_id(id: &str) -> bool {
    let mut parts = id.split(':');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some("repeat"), Some(scheduler), Some(at), None)
            if !scheduler.is_empty()
                && !RESERVED_IDS.contains(&scheduler)
                && !at.is_empty()
                && at.bytes().all(|b| b.is_ascii_digit())
    )
}

/// The longest job id, in bytes: `add` refuses a longer one, and lookups answer "no such
/// job" for it without asking Redis.
pub const MAX_JOB_ID_BYTES: usize = 512;

/// Checks a custom job id against the rules Node BullMQ enforces, plus the reserved
/// key suffixes it does not check but that would corrupt the queue, and what every
/// lookup needs: no control characters, at most [`MAX_JOB_ID_BYTES`]. An id `add` takes
/// is one [`could_be_job_id`] accepts, so a job added is a job that can be found.
pub(crate) fn validate_job_id(id: &str) -> Result<(), Error> {
    if id.is_empty() {
        return Err(Error::invalid(
            "job_id",
            "a job id cannot be empty; leave it unset to get an automatic id",
        ));
    }
    if id.contains(':') {
        return Err(Error::invalid(
            "job_id",
            format!(
                "`{id}` contains ':', which BullMQ uses to separate key parts; \
                 use '-' instead, e.g. `{}`",
                id.replace(':', "-")
            ),
        ));
    }
    if id.len() > MAX_JOB_ID_BYTES {
        return Err(Error::invalid(
            "job_id",
            format!(
                "the id is {} bytes long; job ids are at most {MAX_JOB_ID_BYTES} bytes",
                id.len()
            ),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::invalid(
            "job_id",
            "the id contains a control character (a tab, a line break, ...); \
             job ids are printable text",
        ));
    }
    if looks_like_integer(id) {
        return Err(Error::invalid(
            "job_id",
            format!(
                "`{id}` is an integer; BullMQ gives integer ids to jobs without a custom id, \
                 so a custom one could collide; add a prefix, e.g. `job-{id}`"
            ),
        ));
    }
    if RESERVED_IDS.contains(&id) {
        return Err(Error::invalid(
            "job_id",
            format!(
                "`{id}` is the name of one of the queue's own Redis keys; \
                 add a prefix, e.g. `job-{id}`"
            ),
        ));
    }
    Ok(())
}

/// Node BullMQ refuses ids for which `` `${parseInt(id, 10)}` === id ``: plain decimal
/// integers, with an optional leading `-`, and no leading zeros.
fn looks_like_integer(id: &str) -> bool {
    let digits = id.strip_prefix('-').unwrap_or(id);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && id != "-0"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(id: &str) -> String {
        match validate_job_id(id) {
            Err(Error::InvalidOption { option, reason }) => {
                assert_eq!(option, "job_id");
                reason
            }
            other => panic!("expected a refusal for {id:?}, got {other:?}"),
        }
    }

    #[test]
    fn colon_is_refused_with_a_dash_suggestion() {
        assert!(reason("welcome:42").contains("`welcome-42`"));
    }

    #[test]
    fn integers_are_refused_but_padded_numbers_are_not() {
        assert!(reason("42").contains("integer"));
        assert!(reason("-7").contains("integer"));
        assert!(reason("0").contains("integer"));
        assert!(validate_job_id("007").is_ok());
        assert!(validate_job_id("4.2").is_ok());
        assert!(validate_job_id("-0").is_ok());
    }

    #[test]
    fn ids_no_lookup_could_find_are_refused_at_add() {
        assert!(reason("a\u{7}b").contains("control character"));
        assert!(reason("a\nb").contains("control character"));
        assert!(reason(&"x".repeat(MAX_JOB_ID_BYTES + 1)).contains("at most 512 bytes"));
        let longest = "x".repeat(MAX_JOB_ID_BYTES);
        assert!(validate_job_id(&longest).is_ok() && could_be_job_id(&longest));
        // Every id `add` takes, a lookup can find.
        for id in ["welcome-42", "ünïcode", "007", "a b", "a\u{200b}b"] {
            assert!(validate_job_id(id).is_ok() && could_be_job_id(id), "{id:?}");
        }
    }

    #[test]
    fn empty_and_reserved_ids_are_refused() {
        assert!(reason("").contains("empty"));
        assert!(reason("meta").contains("own Redis keys"));
        assert!(reason("wait").contains("job-wait"));
    }

    #[test]
    fn a_schedulers_job_ids_can_be_looked_up_and_no_other_colon() {
        assert!(could_be_job_id("repeat:hourly:1796142568645"));
        for id in [
            "welcome:42",
            "repeat:hourly",
            "repeat:hourly:soon",
            "repeat::1",
            "x:lock",
            "repeat:a:1:lock",
            "repeat:meta:1",
        ] {
            assert!(!could_be_job_id(id), "{id}");
        }
    }

    #[test]
    fn ordinary_ids_pass() {
        for id in ["welcome-42", "birthday-7-2026-11-29", "a_b.c", "ünïcode"] {
            assert!(validate_job_id(id).is_ok(), "{id}");
        }
    }
}
