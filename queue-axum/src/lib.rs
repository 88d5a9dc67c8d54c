//! axum integration for `queue-core`.
//!
//! A placeholder until the axum issue lands: `QueueLayer`, the extractors,
//! `Accepted` (202 with the job's id and a `Location`) and `job_routes()`
//! will live here. The crate exists now so the workspace has its final shape.

pub use queue_core;
