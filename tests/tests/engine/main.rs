//! The engine's own API (queue-engine/PATCHES.md): the patches, locks, processor
//! placement, Redis's cost per job, and the renewing connection's deadline.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test engine -- <module>::`.

mod batch;
mod locks;
mod patches;
mod placement;
mod redis_cost;
mod renewing;
