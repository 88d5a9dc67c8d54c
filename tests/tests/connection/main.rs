//! Connections: one Redis server (restarts, TLS), Redis Cluster, and Redis Sentinel.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test connection -- <module>::`.

mod cluster;
mod fault_proxy;
mod partition;
mod sentinel;
mod server;
