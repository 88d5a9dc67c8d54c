//! The job-status route: `GET /jobs/{queue}/{id}` ([`status`]), its live stream
//! ([`events`]), and a flow job's parent and children ([`flow`]), as [`JobRoutes`] sets
//! them.

mod events;
mod flow;
mod router;
mod settings;
mod status;

pub use router::job_routes;
pub use settings::{
    JobRoutes, DEFAULT_JOB_STREAM_LIFETIME, DEFAULT_MAX_JOB_STREAMS, DEFAULT_STATUS_REDIS_WAIT,
};
pub(crate) use status::{lookup, JobStatus};
