//! Extractors: the app, one typed queue, any `FromApp` service, and the
//! `Idempotency-Key` header.

use std::marker::PhantomData;
use std::ops::Deref;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use queue_core::{app::FromApp, Queue, QueueApp};

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

/// Any [`FromApp`] type (such as an `#[inject_queue]` struct) as an extractor. In a crate
/// that depends on `queue-axum`, an `#[inject_queue]` struct extracts directly, without
/// this wrapper.
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

/// Builds a [`FromApp`] type from the request's app (used by `#[inject_queue]`'s
/// extractor).
pub fn from_app<T: FromApp>(parts: &Parts) -> Result<T, QueueRejection> {
    let app = app_of(parts)?;
    T::from_app(&app).map_err(|e| InvalidQueue(e).into())
}

/// The request's `Idempotency-Key` header, for making a job id from it: a client
/// retrying a request gets the same job instead of a second one. (To answer a retry
/// with the first answer whatever the route does, wrap the route in
/// [`IdempotencyLayer`](crate::IdempotencyLayer).)
///
/// The key is 1 to 255 visible ASCII characters, sent bare or as the IETF draft writes
/// it, a quoted string (`"8e03978e-..."`: the same key); anything else, or the header
/// twice, is refused with [`InvalidIdempotencyKey`], 400.
///
/// A key is the client's word, and two clients may pick the same one: the job id is
/// always made within a scope the application supplies (the user or tenant the request
/// is authenticated as, and the route), so that one tenant's key never lands on another
/// tenant's job.
///
/// ```
/// use queue_axum::IdempotencyKey;
/// use queue_core::JobOptions;
///
/// fn options(key: &IdempotencyKey, tenant: &str) -> JobOptions {
///     let mut opts = JobOptions::new().attempts(3);
///     if let Some(id) = key.job_id(&format!("{tenant}/exports"), "export") {
///         opts = opts.job_id(id); // "export-<hash of scope and key>"
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

    /// A BullMQ-safe job id for this key within `scope`: `prefix-<uuid v5 of scope and
    /// key>`. The same scope and key always give the same id; another scope (another
    /// tenant, another route) never does.
    pub fn job_id(&self, scope: &str, prefix: &str) -> Option<String> {
        let key = self.0.as_deref()?;
        // The scope's length first, so that ("ab", "c") and ("a", "bc") differ.
        let name = format!("{}:{scope}:{key}", scope.len());
        Some(format!(
            "{prefix}-{}",
            uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes()).simple()
        ))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = InvalidIdempotencyKey;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // As `IdempotencyLayer` reads it: bare or a quoted string, once.
        crate::idempotency::key_from_headers(&parts.headers).map(IdempotencyKey)
    }
}

#[cfg(test)]
mod tests {
    use super::IdempotencyKey;

    #[test]
    fn keys_become_valid_stable_job_ids_within_their_scope() {
        let key = IdempotencyKey(Some("a:b/c".into()));
        let id = key.job_id("tenant-1", "signup").unwrap();
        assert!(id.starts_with("signup-") && !id.contains(':') && id.len() == "signup-".len() + 32);
        assert_eq!(
            key.job_id("tenant-1", "signup"),
            Some(id.clone()),
            "the same key, the same id"
        );
        assert_ne!(
            key.job_id("tenant-2", "signup"),
            Some(id),
            "another tenant, another job"
        );
        let split = |scope: &str, k: &str| IdempotencyKey(Some(k.into())).job_id(scope, "x");
        assert_ne!(split("ab", "c"), split("a", "bc"));
        assert_eq!(IdempotencyKey(None).job_id("t", "x"), None);
    }
}
