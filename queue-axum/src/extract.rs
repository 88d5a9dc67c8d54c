//! Extractors: the app, any `FromApp` service (an `#[inject_queue]` struct), and the
//! deprecated queue named by a marker type.

use std::marker::PhantomData;
use std::ops::Deref;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use queue_core::{app::FromApp, Queue, QueueApp};

use serde::Serialize;

use crate::rejection::{InvalidQueue, MissingQueueLayer, QueueRejection};

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
#[deprecated(
    since = "0.2.0",
    note = "a name in a string is not checked at start-up: declare the queue with \
            `#[job_queue]` and take it as a field of an `#[inject_queue]` struct"
)]
pub trait QueueName: Send + Sync + 'static {
    /// The queue name.
    const NAME: &'static str;
}

/// Declares a marker type naming a queue: `queue_name!(pub EmailQueue = "email");`.
#[deprecated(
    since = "0.2.0",
    note = "a name in a string is not checked at start-up: declare the queue with \
            `#[job_queue]` and take it as a field of an `#[inject_queue]` struct"
)]
#[macro_export]
macro_rules! queue_name {
    ($vis:vis $marker:ident = $name:literal) => {
        #[doc = concat!("The `", $name, "` queue.")]
        #[derive(Debug, Clone, Copy)]
        $vis struct $marker;
        #[allow(deprecated)]
        impl $crate::QueueName for $marker {
            const NAME: &'static str = $name;
        }
    };
}

/// One typed queue, named by a marker type.
///
/// Deprecated: the queue's name is a string nobody checks, and the queue is no producer
/// of the app, so a misspelled name compiles and starts. Declare the queue with
/// `#[job_queue]` and take it as a field of an `#[inject_queue]` struct, which is an
/// extractor: its queues are checked when the app is built.
///
/// ```
/// # #![allow(deprecated)]
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
#[deprecated(
    since = "0.2.0",
    note = "a name in a string is not checked at start-up: declare the queue with \
            `#[job_queue]` and take it as a field of an `#[inject_queue]` struct"
)]
pub struct QueueHandle<T, Q> {
    queue: Queue<T>,
    _name: PhantomData<fn() -> Q>,
}

#[allow(deprecated)]
impl<T, Q> QueueHandle<T, Q> {
    /// The queue handle.
    pub fn into_inner(self) -> Queue<T> {
        self.queue
    }
}

#[allow(deprecated)]
impl<T, Q> Deref for QueueHandle<T, Q> {
    type Target = Queue<T>;
    fn deref(&self) -> &Queue<T> {
        &self.queue
    }
}

#[allow(deprecated)]
impl<T, Q> std::fmt::Debug for QueueHandle<T, Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.queue.fmt(f)
    }
}

#[allow(deprecated)]
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

/// Builds a [`FromApp`] type from the request's app: what an `#[inject_queue]` struct's
/// extractor and [`Inject`] do.
pub fn from_app<T: FromApp>(parts: &Parts) -> Result<T, QueueRejection> {
    let app = app_of(parts)?;
    T::from_app(&app).map_err(|e| InvalidQueue(e).into())
}
