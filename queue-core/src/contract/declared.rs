//! What a declared job type is, as an app reports it.

use serde::Serialize;

/// A job type a [`#[job_queue]`](crate::job_queue) declaration linked into this binary
/// declares, as [`QueueApp::declared_jobs`](crate::QueueApp::declared_jobs) reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DeclaredJob {
    /// The queue (after any rename).
    pub queue: String,
    /// The job name.
    pub name: String,
    /// The payload's Rust type.
    pub payload_type: &'static str,
    /// The output's Rust type.
    pub output_type: &'static str,
    /// The payload's JSON Schema, when the type implements `schemars::JsonSchema`.
    pub payload_schema: Option<serde_json::Value>,
    /// The output's JSON Schema, when the type implements `schemars::JsonSchema`.
    pub output_schema: Option<serde_json::Value>,
    /// Whether a handler of this app takes it: its own, or the queue's catch-all.
    pub handled: bool,
}
