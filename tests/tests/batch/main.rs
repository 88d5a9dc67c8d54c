//! Batches (#46): a handler that takes many jobs at once, each job's outcome its own.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test batch -- <module>::`.

mod chaos;
mod combos;
mod outcomes;
mod runs;
mod startup;
