//! Events and watches: queue events, listeners (by name and typed), the bounded event
//! channel, waiting for a job, many waiters.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test events -- <module>::`.

mod dropped;
mod job_wait;
mod listeners;
mod queue_events;
mod typed;
mod waiters;
