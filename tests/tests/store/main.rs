//! The application's database: the transactional outbox and its relay, its edges and
//! migrations, and operation records.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test store -- <module>::`.

mod migrations;
mod operations;
mod outbox;
mod outbox_edges;
