//! A job's texts as a page shows them: its failure reason, each attempt's record
//! (BullMQ's `stacktrace`) and its log lines. A queue that seals them too
//! (`encrypt_failures_and_logs`) stores each as the JSON text of a sealed value's
//! envelope ([`queue_core::encryption`]). As with a sealed payload ([`super::payload`]),
//! one is left closed and shown as sealed with its key's id, unless the reader's access
//! reveals sealed values: then it is opened here, one text at a time (so that one that
//! does not open leaves the others readable), and each opening is audited.
//!
//! Whether a whole text is sealed, queue-core tells
//! ([`sealed_text_key`](queue_core::encryption::sealed_text_key)); whether a text a
//! listing cut could be one is told here.

use queue_axum::access::Access;
use queue_core::encryption::sealed_text_key;
use queue_core::queue::JobLogs;
use queue_core::{JobInfo, Queue};
use serde_json::Value;

use super::payload::Shown;

/// The envelope's `sealed` tag, which a cut text may hold in part.
const TAG: &str = "aes-256-gcm/1";

/// The envelope's keys: exactly these.
const ENVELOPE_KEYS: [&str; 4] = ["sealed", "key", "nonce", "data"];

/// Which of a job's texts is opened: the name the audit gives it.
#[derive(Clone, Copy)]
pub(crate) enum Note {
    /// BullMQ's `failedReason`: the last failure's reason.
    FailedReason,
    /// An entry of BullMQ's `stacktrace`: one failed attempt's record.
    Stacktrace,
    /// A line of the job's log.
    Log,
}

impl Note {
    fn as_str(self) -> &'static str {
        match self {
            Note::FailedReason => "failedReason",
            Note::Stacktrace => "stacktrace",
            Note::Log => "log",
        }
    }
}

/// A job's texts, as the page may show them.
pub(crate) struct Notes {
    /// The last failure's reason, when the page shows it (see [`Notes::take`]).
    pub(crate) failed_reason: Option<Shown<String>>,
    /// Each failed attempt's record, oldest first.
    pub(crate) failures: Vec<Shown<String>>,
    /// The log lines read, oldest first.
    pub(crate) logs: Vec<Shown<String>>,
    /// How many lines the log has in all.
    pub(crate) log_total: usize,
}

impl Notes {
    /// The texts of `info`, job of `queue`, and its log `logs`, taken out of them (the
    /// job's `failed_reason` is left `None` and its `stacktrace` empty, so that nothing
    /// renders the stored form by mistake). The reason is read only when `shows_reason`
    /// (the page shows it): an opening is for a reading. Each sealed text is opened
    /// only when `access` reveals sealed values, and each opening is audited.
    ///
    /// `info`'s payload and return value must have been taken out
    /// ([`Values::take`](super::payload::Values::take)): the job is what each text is
    /// opened with, and only the text may be sealed in it.
    pub(crate) fn take(
        queue: &Queue<Value>,
        access: &Access,
        info: &mut JobInfo,
        mut logs: JobLogs,
        shows_reason: bool,
    ) -> Notes {
        let reason = info.failed_reason.take();
        let records = std::mem::take(&mut info.stacktrace);
        let lines = std::mem::take(&mut logs.lines);
        // What each text is opened in: the job holding that text alone, or a log page
        // of that line alone.
        let mut holder = info.clone();
        holder.data = Value::Null;
        holder.return_value = None;
        let (name, id) = (queue.name(), info.id.as_str());
        let open_reason = |text: String| {
            let mut job = holder.clone();
            job.failed_reason = Some(text);
            queue
                .open(job)
                .map(|job| job.failed_reason.unwrap_or_default())
        };
        let open_record = |text: String| {
            let mut job = holder.clone();
            job.stacktrace = vec![text];
            queue
                .open(job)
                .map(|mut job| job.stacktrace.pop().unwrap_or_default())
        };
        let open_line = |text: String| {
            let mut page = logs.clone();
            page.lines = vec![text];
            queue
                .open_logs(page)
                .map(|mut page| page.lines.pop().unwrap_or_default())
        };
        Notes {
            failed_reason: reason
                .filter(|_| shows_reason)
                .map(|text| show_text(access, name, id, Note::FailedReason, text, open_reason)),
            failures: records
                .into_iter()
                .map(|text| show_text(access, name, id, Note::Stacktrace, text, open_record))
                .collect(),
            logs: lines
                .into_iter()
                .map(|text| show_text(access, name, id, Note::Log, text, open_line))
                .collect(),
            log_total: logs.total,
        }
    }
}

/// `text`, the `note` of job `job_id` of `queue`, as `access` may see it: as stored when
/// it is not sealed; sealed with its key's id, unless `access` reveals sealed values;
/// then opened by `open`, and the opening audited (whether it opened, never the text).
pub(crate) fn show_text(
    access: &Access,
    queue: &str,
    job_id: &str,
    note: Note,
    text: String,
    open: impl FnOnce(String) -> Result<String, queue_core::Error>,
) -> Shown<String> {
    let Some(key) = sealed_text_key(&text) else {
        return Shown::Plain(text);
    };
    if !access.reveals_sealed() {
        return Shown::Sealed { key };
    }
    Shown::after_opening(access, (queue, job_id, note.as_str()), key, open(text))
}

/// Whether `text`, a listing's text that Redis cut at `cut` bytes, is a sealed value's
/// JSON text, or what one cut there could be; and the key's id, when the text still
/// holds it. A sealed text is ASCII, so a cut one is `cut` bytes long; a text that is
/// shorter was not cut, and is sealed only when it is whole ([`sealed_text_key`]).
pub(crate) fn sealed_in_listing(text: &str, cut: usize) -> Option<Option<String>> {
    if let Some(key) = sealed_text_key(text) {
        return Some(Some(key));
    }
    if text.len() < cut {
        return None;
    }
    cut_envelope(text).map(|key| key.map(str::to_owned))
}

/// Whether `text` is the start of an envelope's JSON text (as serde writes one, and as
/// a Node or Python peer does: members `"name":"value"` in any order, the names the
/// envelope's, the values base64, the key id or the tag), cut anywhere; with the key's
/// id when the text holds it whole.
fn cut_envelope(text: &str) -> Option<Option<&str>> {
    let mut rest = text.strip_prefix('{')?;
    let mut key = None;
    let mut members = 0;
    loop {
        if rest.is_empty() {
            return Some(key);
        }
        rest = rest.strip_prefix('"')?;
        let Some(end) = rest.find('"') else {
            // Cut within a member's name.
            return ENVELOPE_KEYS
                .iter()
                .any(|name| name.starts_with(rest))
                .then_some(key);
        };
        let name = &rest[..end];
        members += 1;
        if !ENVELOPE_KEYS.contains(&name) || members > ENVELOPE_KEYS.len() {
            return None;
        }
        rest = &rest[end + 1..];
        if rest.is_empty() {
            return Some(key);
        }
        rest = rest.strip_prefix(':')?;
        if rest.is_empty() {
            return Some(key);
        }
        rest = rest.strip_prefix('"')?;
        let (value, whole) = match rest.find('"') {
            Some(end) => (&rest[..end], true),
            None => (rest, false),
        };
        if !value.bytes().all(is_value_byte) {
            return None;
        }
        if name == "sealed"
            && !(if whole {
                value == TAG
            } else {
                TAG.starts_with(value)
            })
        {
            return None;
        }
        if !whole {
            return Some(key);
        }
        if name == "key" {
            key = Some(value);
        }
        rest = &rest[value.len() + 1..];
        if rest.is_empty() {
            return Some(key);
        }
        // A `}` here ends a whole object, which `sealed_text_key` would have read.
        rest = rest.strip_prefix(',')?;
    }
}

/// A byte of an envelope's values: base64 (`+/=`), a key id (`._-`) or the tag.
fn is_value_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/' | b'=' | b'.' | b'_' | b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEALED: &str = r#"{"data":"c2VjcmV0IGFuZCB0YWc=","key":"k1","nonce":"AAAAAAAAAAAAAAAA","sealed":"aes-256-gcm/1"}"#;
    const NODE_ORDER: &str =
        r#"{"sealed":"aes-256-gcm/1","key":"k-2","nonce":"AAAAAAAAAAAAAAAA","data":"c2VjcmV0"}"#;

    #[test]
    fn a_whole_envelope_is_sealed_with_its_key() {
        assert_eq!(sealed_text_key(SEALED).as_deref(), Some("k1"));
        assert_eq!(sealed_text_key(NODE_ORDER).as_deref(), Some("k-2"));
        assert_eq!(sealed_in_listing(SEALED, 480), Some(Some("k1".to_owned())));
    }

    #[test]
    fn other_texts_are_not() {
        for text in [
            "the mail server refused ada@example.com",
            r#"{"error":"aes-256-gcm/1"}"#,
            r#"{"sealed":"aes-256-gcm/2","key":"k1","nonce":"AA","data":"AA"}"#,
            r#"{"sealed":"aes-256-gcm/1","key":"k1","nonce":"AA","data":"AA","more":1}"#,
            r#"{"sealed":"aes-256-gcm/1","key":"k1","nonce":"AA","data":1}"#,
            r#" {"sealed":"aes-256-gcm/1","key":"k1","nonce":"AA","data":"AA"}"#,
        ] {
            assert_eq!(sealed_text_key(text), None, "{text}");
            assert_eq!(sealed_in_listing(text, 480), None, "{text}");
        }
    }

    #[test]
    fn a_cut_envelope_is_sealed_in_a_listing_with_its_key_when_it_holds_it() {
        for cut in 1..SEALED.len() {
            let text = &SEALED[..cut];
            let key = r#""key":"k1""#;
            let expected = (cut >= SEALED.find(key).unwrap() + key.len()).then(|| "k1".to_owned());
            assert_eq!(sealed_in_listing(text, cut), Some(expected), "{text}");
            // Not cut there: a text that short is whole, and no envelope.
            assert_eq!(sealed_in_listing(text, cut + 1), None, "{text}");
        }
        for cut in 1..NODE_ORDER.len() {
            assert!(sealed_in_listing(&NODE_ORDER[..cut], cut).is_some());
        }
    }

    #[test]
    fn a_cut_text_that_no_envelope_starts_with_is_plain() {
        for text in [
            r#"{"error":"the mail server refused"#,
            r#"{"data":"not base64 at all, ada@example.com"#,
            r#"{"sealed":"rot13"#,
            r#"{"data":"AAAA"}"#,
            "the mail server refused ada@example.com",
        ] {
            assert_eq!(sealed_in_listing(text, text.len()), None, "{text}");
        }
    }
}
