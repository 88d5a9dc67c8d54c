//! A request body that must arrive whole within the body limit.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

/// The error a body that took too long ends with.
#[derive(Debug)]
pub(super) struct BodyTimedOut(Duration);

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the request body did not arrive within {:?}", self.0)
    }
}

impl std::error::Error for BodyTimedOut {}

/// Wraps a body; the clock starts at its first poll (when a handler reads it).
pub(super) struct TimedBody<B> {
    inner: B,
    limit: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<B> TimedBody<B> {
    pub(super) fn new(inner: B, limit: Duration) -> Self {
        TimedBody {
            inner,
            limit,
            deadline: None,
        }
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let limit = this.limit;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut(limit)))));
        }
        Pin::new(&mut this.inner)
            .poll_frame(cx)
            .map(|frame| frame.map(|f| f.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
