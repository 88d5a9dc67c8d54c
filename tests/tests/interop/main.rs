//! Sharing queues with other BullMQ clients: Node BullMQ (features, groups,
//! telemetry), Python BullMQ, sealed payloads with both, and Bull Board.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test interop -- <module>::`.

mod batch;
mod bull_board;
mod node;
mod node_features;
mod node_groups;
mod node_telemetry;
mod python;
mod sealed;
