//! Fair groups: fairness and limits, producers of grouped jobs, processes killed
//! while they run, the grouped scripts as Redis functions, what a grouped job costs
//! Redis, what the queue's tools see and earlier workers leave behind, and an idle
//! worker woken when a group can start again.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test group -- <module>::`.

mod chaos;
mod cost;
mod fairness;
mod functions;
mod producers;
mod support;
mod tools;
mod wake;
