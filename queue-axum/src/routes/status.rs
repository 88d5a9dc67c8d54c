//! A job's status as the route answers it: read in one transaction from Redis, or from
//! the outbox while Redis is down, with the job's place in its flow.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use queue_core::{JobInfo, JobState, Queue, QueueApp};
use serde::Serialize;

use super::flow;
use super::settings::JobRoutes;
use crate::error::QueueError;
use crate::extract::app_of;
use crate::quote;

/// How long the status route waits for the outbox once Redis has not answered: a read of
/// one row by its key, in the application's own database.
const OUTBOX_WAIT: Duration = Duration::from_millis(300);

/// What the status route answers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobStatus {
    queue: String,
    id: String,
    name: String,
    pub(super) state: Option<JobState>,
    progress: serde_json::Value,
    attempts_made: u32,
    max_attempts: u32,
    timestamp: u64,
    processed_on: Option<u64>,
    finished_on: Option<u64>,
    /// Present (possibly `null`) only when the route opts in.
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_reason: Option<Option<String>>,
    /// Each failed attempt's record, oldest first: present with `failed_reason`.
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt_errors: Option<Vec<String>>,
    /// When a delayed job (a retry waiting out its backoff too) runs, in ms since the
    /// Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    runs_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    return_value: Option<Option<serde_json::Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<serde_json::Value>,
    /// For a flow child.
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<flow::JobRef>,
    /// For a flow parent.
    #[serde(skip_serializing_if = "Option::is_none")]
    children: Option<flow::ChildrenStatus>,
}

fn not_found(what: &str, message: String) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({ "error": what, "message": message })),
    )
        .into_response()
}

/// The 404 of a queue this route does not serve.
pub(super) fn unknown_queue(queue: &str) -> Response {
    not_found(
        "unknown queue",
        format!("this service has no queue {}", quote(queue)),
    )
}

/// The 404 of a job the queue does not have.
pub(super) fn no_job(queue: &str, id: &str) -> Response {
    not_found(
        "job not found",
        format!("no job {} in queue {}", quote(id), quote(queue)),
    )
}

pub(super) async fn status(
    State(settings): State<JobRoutes>,
    Path((queue, id)): Path<(String, String)>,
    parts: Parts,
) -> Response {
    let app = match app_of(&parts) {
        Ok(app) => app,
        Err(rejection) => return rejection.into_response(),
    };
    match lookup(&app, &queue, &id, &settings).await {
        Ok(Some(status)) => Json(status).into_response(),
        Ok(None) => no_job(&queue, &id),
        Err(Lookup::UnknownQueue) => unknown_queue(&queue),
        Err(Lookup::Queue(e)) => e.into_response(),
    }
}

pub(crate) enum Lookup {
    UnknownQueue,
    Queue(QueueError),
}

/// The job's status as these settings show it; `None` when there is no such job.
pub(crate) async fn lookup(
    app: &QueueApp,
    queue: &str,
    id: &str,
    settings: &JobRoutes,
) -> Result<Option<JobStatus>, Lookup> {
    if !settings.serves(app, queue) {
        return Err(Lookup::UnknownQueue);
    }
    let handle = app
        .queue::<serde_json::Value>(queue)
        .map_err(|_| Lookup::UnknownQueue)?;
    if !queue_core::options::could_be_job_id(id) {
        return Ok(None);
    }
    let wait = settings.redis_wait;
    let in_redis = tokio::time::timeout(wait, from_redis(app, &handle, queue, id, settings))
        .await
        .unwrap_or(Err(queue_core::Error::Timeout {
            what: "the job's status",
            after: wait,
        }));
    match in_redis {
        Err(e) if e.is_unavailable() => from_outbox(&handle, queue, id, settings)
            .await
            .ok_or_else(|| Lookup::Queue(e.into())),
        Err(e) => Err(Lookup::Queue(e.into())),
        Ok(found) => Ok(found),
    }
}

/// The job as Redis has it (or the outbox, for a job not there yet), with its flow.
async fn from_redis(
    app: &QueueApp,
    handle: &Queue<serde_json::Value>,
    queue: &str,
    id: &str,
    settings: &JobRoutes,
) -> Result<Option<JobStatus>, queue_core::Error> {
    // The job and its state in one read (`get_job` reads both in one transaction):
    // two reads could pair `completed` with the fields of a moment before.
    let (found, children) = tokio::try_join!(
        handle.get_job(id),
        handle.get_children(id, flow::CHILDREN_SHOWN)
    )?;
    let Some(info) = found else {
        return Ok(None);
    };
    let info = opened(handle, info, settings);
    let state = info.state;
    let children = match settings.include_return_value || settings.include_failed_reason {
        true => handle.open_children(children.clone()).unwrap_or_else(|e| {
            tracing::warn!(queue, id, error = %e, "a child's sealed return value does not open; shown sealed");
            children
        }),
        false => children,
    };
    let flow = Flow {
        parent: flow::parent(&info, |queue| settings.serves(app, queue)),
        children: flow::children(children, settings),
    };
    Ok(Some(to_status(queue, info, state, flow, settings)))
}

/// With Redis unavailable: the job as it waits in the app's outbox, if it does; `None`
/// also when the outbox cannot say in time (the caller answers 503).
async fn from_outbox(
    handle: &Queue<serde_json::Value>,
    queue: &str,
    id: &str,
    settings: &JobRoutes,
) -> Option<Option<JobStatus>> {
    let waiting = tokio::time::timeout(OUTBOX_WAIT, handle.get_outbox_job(id)).await;
    let info = opened(handle, waiting.ok()?.ok()??, settings);
    let state = info.state;
    // Not in Redis yet: no parent or children to show.
    let flow = Flow {
        parent: None,
        children: None,
    };
    Some(Some(to_status(queue, info, state, flow, settings)))
}

/// The job with its sealed payload, return value and failure reasons opened, when the
/// routes show any (the application chose to show them to whoever its access decision
/// lets through); as stored otherwise. One that does not open (a key missing from this
/// process's keyring) is shown sealed: the reader gets no secret, the log says why.
fn opened(handle: &Queue<serde_json::Value>, info: JobInfo, settings: &JobRoutes) -> JobInfo {
    let shows =
        settings.include_data || settings.include_return_value || settings.include_failed_reason;
    if !shows {
        return info;
    }
    handle.open(info.clone()).unwrap_or_else(|e| {
        tracing::warn!(queue = handle.name(), id = %info.id, error = %e, "a sealed job does not open; shown sealed");
        info
    })
}

/// The most characters of a job's name the status shows: a name is the producer's
/// word (a Node producer's too), and a public route that repeats a megabyte of it is a
/// lever on the route's clients and bandwidth.
const MAX_NAME_SHOWN: usize = 200;

/// `name`, or its first [`MAX_NAME_SHOWN`] characters and `…`.
fn clipped_name(name: String) -> String {
    match name.char_indices().nth(MAX_NAME_SHOWN) {
        None => name,
        Some((end, _)) => format!("{}…", &name[..end]),
    }
}

/// A job's place in its flow, for its status.
struct Flow {
    parent: Option<flow::JobRef>,
    children: Option<flow::ChildrenStatus>,
}

fn to_status(
    queue: &str,
    info: JobInfo,
    state: Option<JobState>,
    flow: Flow,
    settings: &JobRoutes,
) -> JobStatus {
    JobStatus {
        queue: queue.to_owned(),
        id: info.id,
        name: clipped_name(info.name),
        state,
        progress: info.progress,
        attempts_made: info.attempts_made,
        max_attempts: info.max_attempts,
        timestamp: info.timestamp_ms,
        processed_on: info.processed_on_ms,
        finished_on: info.finished_on_ms,
        failed_reason: settings.include_failed_reason.then_some(info.failed_reason),
        attempt_errors: settings.include_failed_reason.then_some(info.stacktrace),
        runs_at: info.runs_at_ms,
        return_value: settings.include_return_value.then_some(info.return_value),
        data: settings.include_data.then_some(info.data),
        parent: flow.parent,
        children: flow.children,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_name_is_shown_clipped() {
        assert_eq!(clipped_name("welcome".into()), "welcome");
        let exact = "é".repeat(MAX_NAME_SHOWN);
        assert_eq!(clipped_name(exact.clone()), exact);
        let long = clipped_name("n".repeat(1_000_000));
        assert_eq!(long.chars().count(), MAX_NAME_SHOWN + 1);
        assert!(long.ends_with('…'));
    }
}
