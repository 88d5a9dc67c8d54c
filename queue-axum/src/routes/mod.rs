//! The job-status route: `GET /jobs/{queue}/{id}` ([`status`]), its live stream
//! ([`events`]), and a flow job's parent and children ([`flow`]), as [`JobRoutes`] sets
//! them.

mod events;
mod flow;
mod router;
mod settings;
mod status;
mod stream_slots;

pub use router::job_routes;
pub use settings::{
    JobRoutes, DEFAULT_JOB_STREAM_IDLE, DEFAULT_JOB_STREAM_LIFETIME, DEFAULT_MAX_JOB_STREAMS,
    DEFAULT_MAX_STREAMS_PER_CLIENT, DEFAULT_MAX_STREAMS_PER_JOB, DEFAULT_STATUS_REDIS_WAIT,
};
pub(crate) use status::{lookup, JobStatus};
