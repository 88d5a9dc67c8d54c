//! `POST /exports` (202: an export of the users table), `GET /exports/{id}` (its
//! progress) and `DELETE /exports/{id}` (cancel it). Operator only.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use queue_axum::{Accepted, Queues};
use queue_core::queue::CancelOutcome;

use super::{ApiError, AppState, Producers};
use crate::jobs::exports::{self, export_job_id, rows_job_id};

/// An export id as minted here: 32 lowercase hex digits.
fn export_id(text: &str) -> Result<&str, ApiError> {
    let minted = text.len() == 32
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if minted {
        Ok(text)
    } else {
        Err(ApiError::NotFound(format!(
            "no export {}",
            queue_axum::quote(text)
        )))
    }
}

/// Starts an export: 202 with its jobs and `Location: /exports/{id}`.
pub(crate) async fn create(
    State(state): State<AppState>,
    Queues(app): Queues,
    producers: Producers,
) -> Result<Accepted, ApiError> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let added = app
        .add_flow(exports::flow(&producers.export, &id, &state.export))
        .await?;
    Ok(Accepted::from(added)
        .location_at(format!("/exports/{id}"))
        .with("exportId", &id))
}

/// The export's state (its `deliver` job's), the progress of its `rows` job, and the
/// rows delivered once it is done.
pub(crate) async fn status(
    State(state): State<AppState>,
    producers: Producers,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = export_id(&id)?;
    let queue = &producers.export;
    let (root_id, rows_id) = (export_job_id(id), rows_job_id(id));
    // Each job with its state, read together.
    let (root, rows) = tokio::try_join!(queue.get_job(&root_id), queue.get_job(&rows_id))?;
    let delivered = state.db.export_file_rows(id).await?;
    if root.is_none() && rows.is_none() && delivered.is_none() {
        return Err(ApiError::NotFound(format!("no export `{id}`")));
    }
    Ok(Json(serde_json::json!({
        "exportId": id,
        "state": root.as_ref().and_then(|j| j.state),
        "failedReason": root.and_then(|j| j.failed_reason),
        "rows": {
            "state": rows.as_ref().and_then(|j| j.state),
            "progress": rows.as_ref().map(|j| j.progress.clone()),
            "attemptsMade": rows.as_ref().map(|j| j.attempts_made),
            "failedReason": rows.and_then(|j| j.failed_reason),
        },
        "rowsDelivered": delivered,
    })))
}

/// Cancels an export, and says which way: `removed` (200) when it had not started (its
/// jobs, all under the id prefix `export-<id>`, are gone), `cancelling` (202) when it
/// runs (it stops at its next batch and ends failed as cancelled, without retries),
/// 409 when it has finished, 404 when there is no such export.
pub(crate) async fn cancel(
    producers: Producers,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = export_id(&id)?;
    let answer = |status: StatusCode, outcome: &str, extra: serde_json::Value| {
        let mut body = serde_json::json!({"exportId": id, "outcome": outcome});
        if let (Some(body), serde_json::Value::Object(extra)) = (body.as_object_mut(), extra) {
            body.extend(extra);
        }
        (status, Json(body)).into_response()
    };
    Ok(match producers.export.cancel(&export_job_id(id)).await? {
        CancelOutcome::Removed => answer(StatusCode::OK, "removed", serde_json::json!({})),
        CancelOutcome::Signalled { .. } => {
            answer(StatusCode::ACCEPTED, "cancelling", serde_json::json!({}))
        }
        CancelOutcome::AlreadyFinished(finished) => answer(
            StatusCode::CONFLICT,
            "finished",
            serde_json::json!({"state": finished}),
        ),
        CancelOutcome::NotFound | _ => {
            return Err(ApiError::NotFound(format!("no export `{id}`")));
        }
    })
}
