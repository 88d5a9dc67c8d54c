//! Contracts and macros: #[job_queue] declarations, #[processor], #[inject_queue] and
//! listeners as macros, catch-all handlers, and records linked from another crate.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test contract -- <module>::`.

mod catch_all;
mod declared;
mod linker;
mod macros;
