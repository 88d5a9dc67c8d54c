//! Fair groups: fairness and limits, producers of grouped jobs, and processes killed
//! while they run.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test group -- <module>::`.

mod chaos;
mod fairness;
mod producers;
