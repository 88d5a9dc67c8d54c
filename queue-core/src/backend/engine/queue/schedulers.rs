//! Job schedulers: BullMQ's repeatable jobs, by cron pattern or interval.

use super::EngineQueue;
use crate::backend::engine::convert::{millis, options_to_engine};
use crate::clock::now_ms;
use crate::error::Error;
use crate::options::{JobOptions, Schedule};

impl EngineQueue {
    pub(crate) async fn upsert_scheduler(
        &self,
        id: &str,
        schedule: &Schedule,
        name: &str,
        data: serde_json::Value,
        opts: &JobOptions,
    ) -> Result<(), Error> {
        let repeat = bullmq::job_scheduler::RepeatOptions {
            pattern: schedule.cron.clone(),
            every: schedule.every.map(millis),
            tz: schedule.tz.clone(),
            ..Default::default()
        };
        let mut engine_opts = options_to_engine(opts, now_ms());
        engine_opts.timestamp = None;
        self.inner
            .upsert_job_scheduler(id, repeat, Some(name), Some(data), Some(engine_opts))
            .await
            .map(drop)
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn scheduler_count(&self) -> Result<u64, Error> {
        self.inner
            .get_job_schedulers_count()
            .await
            .map_err(|e| self.error(e))
    }

    pub(crate) async fn remove_scheduler(&self, id: &str) -> Result<bool, Error> {
        self.inner
            .remove_job_scheduler(id)
            .await
            .map_err(|e| self.error(e))
    }
}
