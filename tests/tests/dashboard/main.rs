//! queue-dashboard: its pages and actions, groups, ids, credentials, live streams,
//! Redis cost, the bounds on searches, actions on missing jobs, sealed payloads, and a
//! real browser.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test dashboard -- <module>::`.

mod audit;
mod browser;
mod cost;
mod credentials;
mod groups;
mod ids;
mod live;
mod missing_jobs;
mod pages;
mod queues;
mod sealed;
mod searches;
mod support;
