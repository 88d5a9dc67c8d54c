//! The app: health probes, metrics, the testing kit, features, and start-up's check
//! of queue names.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test app -- <module>::`.

mod features;
mod health;
mod metrics;
mod queue_names;
mod testing_kit;
