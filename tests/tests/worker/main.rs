//! The worker runtime: handlers, attempts and their supervision, retries and their
//! record, locks, stalled jobs, blocking handlers, start and stop, and chaos.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test worker -- <module>::`.

mod attempt;
mod blocking;
mod chaos;
mod failed_attempts;
mod handler;
mod handler_errors;
mod lifecycle;
mod lock_keeper;
mod retries;
mod schedulers;
mod stalled;
