//! queue-axum over real HTTP: the layer and extractors, 202 Accepted, idempotency,
//! Prefer: wait, a job's status and stream, sealed payloads, serving and shutdown, and
//! traces.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test http -- <module>::`.

mod extract;
mod idempotency;
mod job_stream;
mod layer;
mod prefer_wait;
mod sealed;
mod serve;
mod status_outage;
