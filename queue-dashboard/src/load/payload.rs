//! A job's payload and return value as a page shows them. Reads answer what Redis holds,
//! so a sealed value ([`queue_core::encryption`]) arrives as its envelope: it is left
//! closed, and shown as sealed with its key's id, unless the reader's access reveals
//! sealed values; then it is opened here, and each opening is audited.

use queue_axum::access::Access;
use queue_core::{JobInfo, Queue};
use serde_json::Value;

use crate::audit;

/// One of a job's values (or, as `Shown<String>`, one of its texts: a failure reason,
/// an attempt's record, a log line, [`super::notes`]), as the page may show it.
#[derive(Clone)]
pub(crate) enum Shown<T = Value> {
    /// Not sealed: as stored.
    Plain(T),
    /// Sealed and left closed (the reader may not reveal it): the key's id.
    Sealed { key: String },
    /// Sealed, and opened for a reader who may reveal it.
    Opened { key: String, value: T },
    /// Sealed, and it did not open (its key is not in the keyring, or it was altered):
    /// why, in the typed error's words (which never hold the value).
    Unopened { key: String, error: String },
}

impl<T> Shown<T> {
    /// What an opening of a sealed `field` of job `job_id` gave, audited with who asked
    /// (whether it opened, never the value).
    pub(crate) fn after_opening(
        access: &Access,
        (queue, job_id, field): (&str, &str, &str),
        key: String,
        opened: Result<T, queue_core::Error>,
    ) -> Shown<T> {
        audit::revealed(
            access,
            queue,
            job_id,
            field,
            &key,
            opened.as_ref().map(|_| ()),
        );
        match opened {
            Ok(value) => Shown::Opened { key, value },
            Err(error) => Shown::Unopened {
                key,
                error: error.to_string(),
            },
        }
    }
}

/// A job's payload and, once it has one, its return value.
pub(crate) struct Values {
    pub(crate) data: Shown,
    pub(crate) return_value: Option<Shown>,
}

/// Which of a job's values is being opened: each is sealed for its own field, so each
/// opens (or fails) on its own, and is audited on its own.
#[derive(Clone, Copy)]
enum Field {
    Data,
    ReturnValue,
}

impl Field {
    /// The field's name, as the job's hash and the audit name it.
    fn as_str(self) -> &'static str {
        match self {
            Field::Data => "data",
            Field::ReturnValue => "returnvalue",
        }
    }
}

impl Values {
    /// The values of `info`, job of `queue`, taken out of it (its `data` is left `null`
    /// and its `return_value` `None`, so that nothing renders the stored form by
    /// mistake). Opened only when `access` reveals sealed values, each opening audited.
    pub(crate) fn take(queue: &Queue<Value>, access: &Access, info: &mut JobInfo) -> Values {
        let data = std::mem::take(&mut info.data);
        let return_value = info.return_value.take();
        Values {
            data: show(queue, access, info, Field::Data, data),
            return_value: return_value
                .map(|value| show(queue, access, info, Field::ReturnValue, value)),
        }
    }
}

/// `value`, the `field` of job `info` of `queue` (whose values were taken out, and are
/// again when this returns), as `access` may see it.
fn show(
    queue: &Queue<Value>,
    access: &Access,
    info: &mut JobInfo,
    field: Field,
    value: Value,
) -> Shown {
    // Whether a value is sealed, and opening it, are asked of the job: holding this
    // value alone, so that the answer is about this field (the two may be sealed with
    // different keys, or only one of them).
    put(info, field, value);
    let Some(key) = info.sealed_with().map(str::to_owned) else {
        return Shown::Plain(take(info, field));
    };
    if !access.reveals_sealed() {
        take(info, field);
        return Shown::Sealed { key };
    }
    // `open` takes a job: a copy, so the page keeps the job's other fields; without
    // its failure texts, which are opened (and audited) on their own, or not at all.
    let mut copy = info.clone();
    copy.failed_reason = None;
    copy.stacktrace.clear();
    let opened = queue.open(copy).map(|mut job| take(&mut job, field));
    take(info, field);
    Shown::after_opening(
        access,
        (queue.name(), &info.id, field.as_str()),
        key,
        opened,
    )
}

/// `value` as the `field` of `job`.
fn put(job: &mut JobInfo, field: Field, value: Value) {
    match field {
        Field::Data => job.data = value,
        Field::ReturnValue => job.return_value = Some(value),
    }
}

/// The `field` of `job`, taken out (`null` left in its place, or `None`).
fn take(job: &mut JobInfo, field: Field) -> Value {
    match field {
        Field::Data => std::mem::take(&mut job.data),
        Field::ReturnValue => job.return_value.take().unwrap_or_default(),
    }
}
