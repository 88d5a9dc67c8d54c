//! Cancelling: publishing cancellations (every worker of the queue, in any process,
//! listens on the queue's cancel channel, `super::super::worker`), and marking a job
//! that is not running to fail, without running, when a worker next takes it.

use super::EngineQueue;
use crate::backend::engine::connection::Connection;
use crate::error::Error;

/// Sets BullMQ's deferred failure (`defa`) on a job that exists and has not finished.
/// A worker that takes a job carrying one fails it at once with that reason, without
/// running its handler and without retries: BullMQ's own workers, Node's and the
/// engine's, do so (it is how `failParentOnFailure` fails a parent). Checked and set
/// in one script, so a job removed or finished meanwhile is left alone.
const DEFER_FAILURE: &str = r#"
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
if redis.call("ZSCORE", KEYS[2], ARGV[1]) or redis.call("ZSCORE", KEYS[3], ARGV[1]) then
  return 0
end
redis.call("HSET", KEYS[1], "defa", ARGV[2])
return 1
"#;

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

    /// Makes job `id` fail with `reason`, without running, when a worker next takes
    /// it; `false` when it does not exist or has finished. A job running now is not
    /// stopped by this (signal it with [`publish_cancel`](Self::publish_cancel)).
    pub(crate) async fn fail_when_taken(&self, id: &str, reason: &str) -> Result<bool, Error> {
        let base = self.conn.queue_base(self.name());
        self.conn
            .query(
                redis::cmd("EVAL")
                    .arg(DEFER_FAILURE)
                    .arg(3)
                    .arg(self.job_key(id))
                    .arg(format!("{base}:completed"))
                    .arg(format!("{base}:failed"))
                    .arg(id)
                    .arg(reason),
            )
            .await
    }
}

/// The pub/sub channel cancellations of a queue travel on.
pub(in crate::backend::engine) fn cancel_channel(conn: &Connection, queue: &str) -> String {
    format!("{}:cancel", conn.queue_base(queue))
}
