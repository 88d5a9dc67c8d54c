//! The outbox relay's marks in Redis: which rows' jobs were added already. A mark is a
//! deduplication key of BullMQ's (`<queue>:de:<id>`) that no job owns, so that it
//! outlives the job.

use std::time::Duration;

use super::EngineQueue;
use crate::backend::engine::convert::millis;
use crate::error::Error;

// Only the outbox relay (feature `sqlx`) holds rows' deduplication keys.
#[cfg_attr(not(feature = "sqlx"), allow(dead_code))]
impl EngineQueue {
    fn deduplication_key(&self, id: &str) -> String {
        format!("{}:de:{id}", self.conn.queue_base(self.name()))
    }

    /// Whether each deduplication id is taken (its key exists), in one round trip.
    pub(crate) async fn deduplication_taken(&self, ids: &[String]) -> Result<Vec<bool>, Error> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("EXISTS").arg(self.deduplication_key(id));
        }
        self.conn.pipeline(&pipe).await
    }

    /// Holds each deduplication id `(id, job id)` for `ttl`, in one round trip, under a
    /// value that is no job's id (`relayed:<job id>`: job ids have no `:`). BullMQ
    /// deletes a deduplication key with a job only when the key holds that job's id, so
    /// the job's removal (retention, `remove`, `clean`, `drain`, `obliterate`) leaves a
    /// held key in place until its TTL.
    pub(crate) async fn hold_deduplication(
        &self,
        held: &[(String, String)],
        ttl: Duration,
    ) -> Result<(), Error> {
        if held.is_empty() {
            return Ok(());
        }
        let ttl_ms = millis(ttl).max(1);
        let mut pipe = redis::pipe();
        for (id, job_id) in held {
            pipe.cmd("SET")
                .arg(self.deduplication_key(id))
                .arg(format!("relayed:{job_id}"))
                .arg("PX")
                .arg(ttl_ms)
                .ignore();
        }
        self.conn.pipeline(&pipe).await
    }
}
