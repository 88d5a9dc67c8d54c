//! The Markdown pages people read, compiled as doctests: every Rust block of the README,
//! of the guide (`docs/`) and of the example's README builds with `cargo test -p
//! queue-tests --doc`, so a page cannot drift from the API. Blocks that would need a
//! running service are marked `no_run`; they still compile.
//!
//! Only built under `cfg(doctest)`: the items exist for their docs alone. The four guide
//! pages `queue-core` includes as its own docs (`registration`, `contracts`, `flows`,
//! `exactly-once`) are doctests of that crate already, and are not repeated here.
#![cfg(doctest)]

/// Includes `$path` (relative to this file) as the docs of an empty item.
macro_rules! page {
    ($item:ident, $path:literal) => {
        #[doc = include_str!($path)]
        pub struct $item;
    };
}

page!(Readme, "../../README.md");
page!(ExampleReadme, "../../examples/welcome-app/README.md");
page!(DashboardReadme, "../../queue-dashboard/README.md");
page!(GuideIndex, "../../docs/index.md");
page!(GettingStarted, "../../docs/getting-started.md");
page!(JobsAndOptions, "../../docs/jobs-and-options.md");
page!(Axum, "../../docs/axum.md");
page!(Results, "../../docs/results.md");
page!(Testing, "../../docs/testing.md");
page!(Encryption, "../../docs/encryption.md");
page!(Scheduling, "../../docs/scheduling.md");
page!(Groups, "../../docs/groups.md");
page!(Batches, "../../docs/batches.md");
page!(Operations, "../../docs/operations.md");
page!(ScaleOut, "../../docs/scale-out.md");
page!(NodeInterop, "../../docs/node-interop.md");
page!(Engine, "../../docs/engine.md");
page!(Architecture, "../../docs/architecture.md");
page!(Grafana, "../../docs/grafana/README.md");
