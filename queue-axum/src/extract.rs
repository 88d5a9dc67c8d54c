//! Extractors: the app, one typed queue, any `FromApp` service, and the
//! `Idempotency-Key` header.

use std::marker::PhantomData;
use std::ops::Deref;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use queue_core::{FromApp, Queue, QueueApp};
use serde::Serialize;

use crate::rejection::{InvalidIdempotencyKey, InvalidQueue, MissingQueueLayer, QueueRejection};

/// The app put there by [`QueueLayer`](crate::QueueLayer).
pub(crate) fn app_of(parts: &Parts) -> Result<QueueApp, MissingQueueLayer> {
    parts
        .extensions
        .get::<QueueApp>()
        .cloned()
        .ok_or(MissingQueueLayer)
}

/// The whole app, for handlers that pick queues at run time.
///
/// ```
/// use queue_axum::Queues;
///
/// async fn counts(Queues(app): Queues) -> String {
///     app.processor_queues().join(",")
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Queues(pub QueueApp);

impl<S: Send + Sync> FromRequestParts<S> for Queues {
    type Rejection = MissingQueueLayer;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        app_of(parts).map(Queues)
    }
}

/// A queue's name as a type, for [`QueueHandle`]. Declare one with [`queue_name!`](crate::queue_name).
pub trait QueueName: Send + Sync + 'static {
    /// The queue name.
    const NAME: &'static str;
}

/// Declares a marker type naming a queue: `queue_name!(pub EmailQueue = "email");`.
#[macro_export]
macro_rules! queue_name {
    ($vis:vis $marker:ident = $name:literal) => {
        #[doc = concat!("The `", $name, "` queue.")]
        #[derive(Debug, Clone, Copy)]
        $vis struct $marker;
        impl $crate::QueueName for $marker {
            const NAME: &'static str = $name;
        }
    };
}

/// One typed queue, named by a marker type.
///
/// ```
/// use queue_axum::{queue_name, QueueHandle};
/// use queue_core::JobOptions;
///
/// queue_name!(EmailQueue = "email");
///
/// async fn enqueue(email: QueueHandle<String, EmailQueue>) -> Result<queue_axum::Accepted, queue_axum::QueueError> {
///     let job = email.add("welcome", "ada@example.com".into(), JobOptions::new()).await?;
///     Ok(job.into())
/// }
/// ```
pub struct QueueHandle<T, Q> {
    queue: Queue<T>,
    _name: PhantomData<fn() -> Q>,
}

impl<T, Q> QueueHandle<T, Q> {
    /// The queue handle.
    pub fn into_inner(self) -> Queue<T> {
        self.queue
    }
}

impl<T, Q> Deref for QueueHandle<T, Q> {
    type Target = Queue<T>;
    fn deref(&self) -> &Queue<T> {
        &self.queue
    }
}

impl<T, Q> std::fmt::Debug for QueueHandle<T, Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.queue.fmt(f)
    }
}

impl<S, T, Q> FromRequestParts<S> for QueueHandle<T, Q>
where
    S: Send + Sync,
    T: Serialize,
    Q: QueueName,
{
    type Rejection = QueueRejection;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let app = app_of(parts)?;
        let queue = app.queue::<T>(Q::NAME).map_err(InvalidQueue)?;
        Ok(QueueHandle {
            queue,
            _name: PhantomData,
        })
    }
}

/// Any [`FromApp`] type (such as an `#[inject_queue]` struct) as an extractor. With
/// `#[inject_queue(axum)]` the struct extracts directly, without this wrapper.
#[derive(Debug, Clone)]
pub struct Inject<T>(pub T);

impl<S, T> FromRequestParts<S> for Inject<T>
where
    S: Send + Sync,
    T: FromApp + Send,
{
    type Rejection = QueueRejection;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        from_app(parts).map(Inject)
    }
}

/// Builds a [`FromApp`] type from the request's app (used by `#[inject_queue(axum)]`).
pub fn from_app<T: FromApp>(parts: &Parts) -> Result<T, QueueRejection> {
    let app = app_of(parts)?;
    T::from_app(&app).map_err(|e| InvalidQueue(e).into())
}

/// The `Idempotency-Key` request header, opt-in: use it as (part of) a job id so that a
/// client retrying a request gets the same job instead of a second one.
///
/// ```
/// use queue_axum::IdempotencyKey;
/// use queue_core::JobOptions;
///
/// fn options(key: &IdempotencyKey) -> JobOptions {
///     let mut opts = JobOptions::new().attempts(3);
///     if let Some(id) = key.job_id("export") {
///         opts = opts.job_id(id); // "export-<key>"
///     }
///     opts
/// }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdempotencyKey(Option<String>);

/// The header [`IdempotencyKey`] reads.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

impl IdempotencyKey {
    /// The header's value, if the request had one.
    pub fn key(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// A BullMQ-safe job id made from `prefix` and the key: `prefix-<key>` for short keys
    /// of letters, digits, `-`, `_` and `.`; otherwise `prefix-<uuid v5 of the key>`, so
    /// that any key maps to one valid id.
    pub fn job_id(&self, prefix: &str) -> Option<String> {
        let key = self.0.as_deref()?;
        let plain = key.len() <= 64
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        Some(if plain {
            format!("{prefix}-{key}")
        } else {
            format!(
                "{prefix}-{}",
                uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, key.as_bytes()).simple()
            )
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = InvalidIdempotencyKey;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        match parts.headers.get(IDEMPOTENCY_KEY_HEADER) {
            None => Ok(IdempotencyKey(None)),
            Some(value) => match value.to_str() {
                Ok(key)
                    if !key.trim().is_empty()
                        && key.bytes().all(|b| b.is_ascii_graphic() || b == b' ') =>
                {
                    Ok(IdempotencyKey(Some(key.trim().to_owned())))
                }
                _ => Err(InvalidIdempotencyKey),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IdempotencyKey;

    #[test]
    fn keys_become_valid_stable_job_ids() {
        let plain = IdempotencyKey(Some("abc-123".into()));
        assert_eq!(plain.job_id("signup").as_deref(), Some("signup-abc-123"));
        let odd = IdempotencyKey(Some("a:b/c".into()));
        let id = odd.job_id("signup").unwrap();
        assert!(id.starts_with("signup-") && !id.contains(':') && id.len() == "signup-".len() + 32);
        assert_eq!(
            odd.job_id("signup"),
            Some(id),
            "the same key gives the same id"
        );
        let numeric = IdempotencyKey(Some("42".into()));
        assert_eq!(
            numeric.job_id("x").as_deref(),
            Some("x-42"),
            "never a bare integer"
        );
        assert_eq!(IdempotencyKey(None).job_id("x"), None);
    }
}
