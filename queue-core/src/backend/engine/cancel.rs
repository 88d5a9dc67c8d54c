//! The engine's cancellation token, as the source of a job's cancel signal.

use bullmq::worker::CancellationToken;
use futures::future::BoxFuture;

use crate::job::CancelSource;

impl CancelSource for CancellationToken {
    fn cancel(&self) {
        CancellationToken::cancel(self);
    }

    fn is_cancelled(&self) -> bool {
        CancellationToken::is_cancelled(self)
    }

    fn cancelled(&self) -> BoxFuture<'_, ()> {
        Box::pin(CancellationToken::cancelled(self))
    }
}
