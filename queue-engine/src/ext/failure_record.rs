//! What a failed attempt writes on its job, as Node.js BullMQ does: `failedReason` (the
//! latest reason) and `stacktrace`, a JSON array with one entry per failed attempt,
//! oldest first, cut to the job's `stackTraceLimit`. Written on every failure, the
//! retried ones too, through the `fieldsToUpdate` argument of `retryJob`,
//! `moveToDelayed` and `moveToFinished`: a job waiting for its next attempt says why its
//! last one failed.

use rmp::encode::{write_array_len, write_str};

use crate::error::Error;

impl Error {
    /// This failure, with `stacktrace` recorded for the attempt in the job's
    /// `stacktrace` field instead of the failure's message alone.
    ///
    /// ```
    /// use bullmq::error::Error;
    ///
    /// let failure = Error::ProcessingError("upstream refused".into())
    ///     .with_stacktrace("upstream refused\ncaused by: 503 Service Unavailable");
    /// assert_eq!(failure.to_string(), "upstream refused");
    /// ```
    pub fn with_stacktrace(self, stacktrace: impl Into<String>) -> Self {
        Error::WithStacktrace {
            error: Box::new(self.without_stacktrace().0),
            stacktrace: stacktrace.into(),
        }
    }

    /// The failure without its stack text, and that text if it had one.
    pub(crate) fn without_stacktrace(self) -> (Error, Option<String>) {
        match self {
            Error::WithStacktrace { error, stacktrace } => {
                (error.without_stacktrace().0, Some(stacktrace))
            }
            other => (other, None),
        }
    }
}

/// How many attempts' entries a job keeps when its options set no `stackTraceLimit`.
/// Node.js keeps every one then; the bound keeps a job retried for days by hand from
/// growing without end.
pub(crate) const DEFAULT_STACK_TRACE_LIMIT: usize = 10;

/// The msgpacked `[field, value, ...]` array the scripts' `updateJobFields` writes with
/// `HMSET`: the attempt's reason, and `previous` (the job's `stacktrace` field as it was
/// fetched) with this attempt's entry added.
pub(crate) fn failure_fields(
    reason: &str,
    stacktrace: Option<&str>,
    previous: &str,
    limit: Option<u32>,
) -> Vec<u8> {
    let entry = stacktrace.unwrap_or(reason);
    let traces = serde_json::to_string(&with_entry(previous, entry, limit))
        .unwrap_or_else(|_| "[]".to_string());
    let mut buf = Vec::with_capacity(reason.len() + traces.len() + 32);
    // Writing into a Vec cannot fail.
    let _ = write_array_len(&mut buf, 4);
    for text in ["failedReason", reason, "stacktrace", &traces] {
        let _ = write_str(&mut buf, text);
    }
    buf
}

/// `previous` (a JSON array of strings; anything else reads as none) with `entry` added
/// last, keeping the last `limit` entries (0 keeps none, as in Node.js).
fn with_entry(previous: &str, entry: &str, limit: Option<u32>) -> Vec<String> {
    let mut traces: Vec<String> = serde_json::from_str::<Option<Vec<String>>>(previous)
        .ok()
        .flatten()
        .unwrap_or_default();
    traces.push(entry.to_string());
    let keep = limit.map_or(DEFAULT_STACK_TRACE_LIMIT, |l| l as usize);
    let cut = traces.len().saturating_sub(keep);
    traces.drain(..cut);
    traces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unpacked(fields: &[u8]) -> Vec<String> {
        let mut cursor = fields;
        let len = rmp::decode::read_array_len(&mut cursor).expect("an array");
        (0..len)
            .map(|_| {
                let mut out = vec![0u8; 1 << 16];
                rmp::decode::read_str(&mut cursor, &mut out)
                    .expect("a string")
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn each_attempt_adds_its_entry_after_the_earlier_ones() {
        let first = unpacked(&failure_fields("boom", None, "", None));
        assert_eq!(first, ["failedReason", "boom", "stacktrace", r#"["boom"]"#]);
        let second = unpacked(&failure_fields(
            "bang",
            Some("bang\ncaused by: io"),
            &first[3],
            None,
        ));
        assert_eq!(second[1], "bang");
        assert_eq!(second[3], r#"["boom","bang\ncaused by: io"]"#);
    }

    #[test]
    fn the_job_s_limit_keeps_the_newest_entries_and_zero_keeps_none() {
        let previous = r#"["a","b","c"]"#;
        assert_eq!(with_entry(previous, "d", Some(2)), ["c", "d"]);
        assert!(with_entry(previous, "d", Some(0)).is_empty());
        let many = serde_json::to_string(&vec!["x"; 40]).unwrap();
        assert_eq!(
            with_entry(&many, "y", None).len(),
            DEFAULT_STACK_TRACE_LIMIT
        );
    }

    #[test]
    fn a_field_that_is_no_array_of_strings_reads_as_no_earlier_entry() {
        for previous in ["", "null", "{}", "not json", "[1,2]"] {
            assert_eq!(with_entry(previous, "e", None), ["e"], "{previous}");
        }
    }
}
