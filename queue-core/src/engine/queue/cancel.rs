//! Publishing cancellations: every worker of the queue, in any process, listens on the
//! queue's cancel channel (`super::super::worker`).

use super::EngineQueue;
use crate::engine::connection::Connection;
use crate::error::Error;

impl EngineQueue {
    /// Tells every worker of this queue, in any process, to cancel `id`; returns how
    /// many worker processes were listening.
    pub(crate) async fn publish_cancel(&self, id: &str) -> Result<u64, Error> {
        self.conn
            .query(
                redis::cmd("PUBLISH")
                    .arg(cancel_channel(&self.conn, self.name()))
                    .arg(id),
            )
            .await
    }
}

/// The pub/sub channel cancellations of a queue travel on.
pub(in crate::engine) fn cancel_channel(conn: &Connection, queue: &str) -> String {
    format!("{}:cancel", conn.queue_base(queue))
}
