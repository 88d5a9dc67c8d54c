//! Not public API: what generated code and trait signatures need to name.
//! Nothing here follows semver.

pub use crate::deps::{DepInfo, Deps};
