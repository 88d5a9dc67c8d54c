//! `POST /reports` (202: the monthly report's flow of four steps) and
//! `GET /reports/{month}` (each step's job state and stage record). Operator only.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::Json;
use chrono::{Datelike, NaiveDate};
use futures::future::try_join_all;
use queue_axum::{Accepted, Queues};
use queue_core::{JobState, Queue};
use serde::Serialize;

use super::{validate, ApiError, AppState, Producers};
use crate::jobs::reports::{self, report_id, step_job_id, REPORT_STAGES, REPORT_STEPS};
use crate::jobs::Report;

/// The first year a report may be of.
const FIRST_YEAR: i32 = 1900;

/// `YYYY-MM`, four digits and two (chrono alone also takes `+2026-1`, `0000-01` and
/// `-999-01`), from 1900 to a month that has begun (in the service's time zone).
pub(super) fn month(text: &str, state: &AppState) -> Result<String, ApiError> {
    let first = NaiveDate::parse_from_str(&format!("{text}-01"), "%Y-%m-%d")
        .ok()
        .filter(|day| validate::has_shape(text, "9999-99") && day.year() >= FIRST_YEAR)
        .ok_or_else(|| {
            ApiError::invalid(
                "month",
                format!("write the month as YYYY-MM from {FIRST_YEAR}, e.g. 2026-11"),
            )
        })?;
    let today = state.today();
    if (first.year(), first.month()) > (today.year(), today.month()) {
        return Err(ApiError::invalid("month", format!("{text} has not begun")));
    }
    Ok(text.to_owned())
}

/// Starts the report of `{"month": "YYYY-MM"}`: 202 with every step's job, and
/// `Location: /reports/{month}`. A report already started answers the same, marked
/// `duplicate`; its steps are not added again.
pub(crate) async fn create(
    State(state): State<AppState>,
    Queues(app): Queues,
    producers: Producers,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Accepted, ApiError> {
    let Json(body) = body?;
    let month = month(&validate::string(&body, "month", 7)?, &state)?;
    let added = app
        .add_flow(reports::flow(&producers.report, &month))
        .await?;
    Ok(Accepted::from(added)
        .location_at(format!("/reports/{month}"))
        .with("month", &month))
}

/// One step, as the status shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct StepStatus {
    step: &'static str,
    job_id: String,
    state: Option<JobState>,
    attempts_made: Option<u32>,
    failed_reason: Option<String>,
    /// The stage record: done (and when) or not.
    stage: &'static str,
    done_at: Option<u64>,
}

/// The report of `month`: each step's job and stage record, the report's state (its
/// last step's), and where the file is once uploaded. 404 for a report never started.
pub(crate) async fn status(
    State(state): State<AppState>,
    producers: Producers,
    Path(month_text): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let month = month(&month_text, &state)?;
    Ok(Json(
        report_status(&state, &producers.report, &month).await?,
    ))
}

/// The report of `month` as `GET /reports/{month}` answers it.
pub(super) async fn report_status(
    state: &AppState,
    queue: &Queue<Report>,
    month: &str,
) -> Result<serde_json::Value, ApiError> {
    let ids: Vec<String> = REPORT_STEPS
        .iter()
        .map(|(step, _)| step_job_id(month, step))
        .collect();
    // Each job with its state, read together.
    let jobs = try_join_all(ids.iter().map(|id| queue.get_job(id))).await?;
    let done = state
        .db
        .stages_done(REPORT_STAGES, &report_id(month))
        .await?;
    if jobs.iter().all(Option::is_none) && done.is_empty() {
        return Err(ApiError::NotFound(format!(
            "no report of {month} was started"
        )));
    }
    let steps: Vec<StepStatus> = REPORT_STEPS
        .iter()
        .zip(ids.into_iter().zip(jobs))
        .map(|((step, stage), (job_id, job))| StepStatus {
            step,
            job_id,
            state: job.as_ref().and_then(|j| j.state),
            attempts_made: job.as_ref().map(|j| j.attempts_made),
            failed_reason: job.and_then(|j| j.failed_reason),
            stage,
            done_at: done
                .iter()
                .find(|d| d.stage == *stage)
                .map(|d| d.done_at_ms),
        })
        .collect();
    let uploaded = done
        .iter()
        .find(|d| d.stage == "uploaded")
        .map(|d| d.result["location"].clone());
    Ok(serde_json::json!({
        "month": month,
        "reportId": report_id(month),
        "state": steps.last().and_then(|s| s.state),
        "steps": steps,
        "file": uploaded,
    }))
}
