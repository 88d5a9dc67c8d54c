//! What a relay adds for, as it sees the app.

use crate::error::Error;
use crate::queue::Queue;

/// What a relay adds for: the app's queues by name, and its memory guard.
pub(crate) trait RelayTarget: Send + Sync {
    /// The producer of queue `name`.
    fn queue(&self, name: &str) -> Result<Queue<serde_json::Value>, Error>;
    /// Whether Redis's memory is above the guard's high-water mark: adds are refused,
    /// and the rows stay in the outbox.
    fn memory_high(&self) -> bool;
}
