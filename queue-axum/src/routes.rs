//! The job-status route: `GET /jobs/{queue}/{id}`.

use axum::extract::{Path, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use queue_core::{JobInfo, JobState, QueueApp};
use serde::Serialize;

use crate::error::QueueError;
use crate::extract::app_of;

/// The status route with default settings: `GET /jobs/{queue}/{id}`, without payloads.
/// Needs [`QueueLayer`](crate::QueueLayer) on the router.
pub fn job_routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    JobRoutes::new().router()
}

/// Settings of the status route.
///
/// ```
/// use queue_axum::JobRoutes;
/// let routes: axum::Router = JobRoutes::new().include_data(true).router();
/// ```
#[derive(Debug, Clone, Copy, Default)]
#[must_use]
pub struct JobRoutes {
    include_data: bool,
}

impl JobRoutes {
    /// Defaults: the payload is never shown (it can hold personal data).
    pub fn new() -> Self {
        Self::default()
    }

    /// Shows the job's payload as `data` too. Only for routes behind your own auth.
    pub fn include_data(mut self, include: bool) -> Self {
        self.include_data = include;
        self
    }

    /// The router, at `/jobs/{queue}/{id}`.
    pub fn router<S: Clone + Send + Sync + 'static>(self) -> Router<S> {
        Router::new().route("/jobs/{queue}/{id}", get(status).with_state(self))
    }
}

/// What the status route answers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct JobStatus {
    queue: String,
    id: String,
    name: String,
    state: Option<JobState>,
    progress: serde_json::Value,
    attempts_made: u32,
    max_attempts: u32,
    timestamp: u64,
    processed_on: Option<u64>,
    finished_on: Option<u64>,
    failed_reason: Option<String>,
    return_value: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<serde_json::Value>,
}

fn not_found(what: &str, message: String) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({ "error": what, "message": message })),
    )
        .into_response()
}

async fn status(
    State(settings): State<JobRoutes>,
    Path((queue, id)): Path<(String, String)>,
    parts: Parts,
) -> Response {
    let app = match app_of(&parts) {
        Ok(app) => app,
        Err(rejection) => return rejection.into_response(),
    };
    match lookup(&app, &queue, &id, settings).await {
        Ok(Some(status)) => Json(status).into_response(),
        Ok(None) => not_found("job not found", format!("no job `{id}` in queue `{queue}`")),
        Err(Lookup::UnknownQueue) => not_found(
            "unknown queue",
            format!("this service has no queue `{queue}`"),
        ),
        Err(Lookup::Queue(e)) => e.into_response(),
    }
}

enum Lookup {
    UnknownQueue,
    Queue(QueueError),
}

async fn lookup(
    app: &QueueApp,
    queue: &str,
    id: &str,
    settings: JobRoutes,
) -> Result<Option<JobStatus>, Lookup> {
    if !app.knows_queue(queue) {
        return Err(Lookup::UnknownQueue);
    }
    let handle = app
        .queue::<serde_json::Value>(queue)
        .map_err(|_| Lookup::UnknownQueue)?;
    let Some(info) = handle
        .get_job(id)
        .await
        .map_err(|e| Lookup::Queue(e.into()))?
    else {
        return Ok(None);
    };
    let state = handle
        .get_job_state(id)
        .await
        .map_err(|e| Lookup::Queue(e.into()))?;
    Ok(Some(to_status(queue, info, state, settings.include_data)))
}

fn to_status(queue: &str, info: JobInfo, state: Option<JobState>, include_data: bool) -> JobStatus {
    JobStatus {
        queue: queue.to_owned(),
        id: info.id,
        name: info.name,
        state,
        progress: info.progress,
        attempts_made: info.attempts_made,
        max_attempts: info.max_attempts,
        timestamp: info.timestamp_ms,
        processed_on: info.processed_on_ms,
        finished_on: info.finished_on_ms,
        failed_reason: info.failed_reason,
        return_value: info.return_value,
        data: include_data.then_some(info.data),
    }
}
