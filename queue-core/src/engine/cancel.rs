//! The cancellation signal of one running job.

use bullmq::worker::CancellationToken;

/// Raised by `Queue::cancel` (through the worker) or by a test handle; a handler
/// observes it through `Job::cancelled`.
#[derive(Debug, Clone, Default)]
pub(crate) struct CancelSignal(CancellationToken);

impl CancelSignal {
    pub(crate) fn new() -> Self {
        CancelSignal(CancellationToken::new())
    }

    pub(super) fn from_engine(token: CancellationToken) -> Self {
        CancelSignal(token)
    }

    pub(crate) fn cancel(&self) {
        self.0.cancel();
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }

    pub(crate) async fn cancelled(&self) {
        self.0.cancelled().await;
    }
}
