//! Flows: parents and children, and their edges.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test flow -- <module>::`.

mod children;
mod edges;
