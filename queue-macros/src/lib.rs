//! Attribute macros for `queue-core`.
//!
//! This crate is a placeholder until the macros issue lands: `#[processor]`,
//! `#[inject_queue]`, `#[on_worker_event]` and `#[on_queue_event]` will live
//! here and expand to registrations in `queue_core::__private`. Until then,
//! register processors explicitly with `QueueApp::builder().processor(..)`.
