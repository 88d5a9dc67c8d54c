//! `POST /birthdays/run`: a birthday scan now (an operator action), for today or a day
//! near it.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use chrono::{Duration, NaiveDate};
use queue_axum::Accepted;
use queue_core::JobOptions;

use super::auth::require_operator;
use super::{validate, ApiError, AppState, Producers};
use crate::jobs::coupons::BirthdayScan;
use crate::jobs::COUPON_QUEUE;

/// How far back a manual scan may go (to catch up on missed days), and ahead.
pub const SCAN_DAYS_BACK: i64 = 7;
/// How far ahead a manual scan may go (time zones around the date line).
pub const SCAN_DAYS_AHEAD: i64 = 1;

/// Adds a `birthday-scan` job; the body is empty, `{}`, or `{"date": "YYYY-MM-DD"}`, a
/// day from a week before today to tomorrow, in the scan's time zone. Operator only.
/// 202 with `Location` on the operator's status route.
pub(crate) async fn run(
    State(state): State<AppState>,
    request: Parts,
    producers: Producers,
    body: Bytes,
) -> Result<Accepted, ApiError> {
    require_operator(&state, &request)?;
    let headers = &request.headers;
    let today = state.today();
    let date = if body.iter().all(u8::is_ascii_whitespace) {
        today
    } else {
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !json {
            return Err(ApiError::Body {
                status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
                message: "send the body as Content-Type: application/json".to_owned(),
            });
        }
        let value: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| ApiError::Body {
                status: StatusCode::BAD_REQUEST,
                message: format!("the body is not JSON: {e}"),
            })?;
        // `[]`, `"2026-07-04"` or `42` has no `date`, and is no request for today's scan.
        if !value.is_object() {
            return Err(ApiError::Body {
                status: StatusCode::UNPROCESSABLE_ENTITY,
                message: "send an object: {} for today, or {\"date\": \"YYYY-MM-DD\"}".to_owned(),
            });
        }
        match value.get("date") {
            None | Some(serde_json::Value::Null) => today,
            Some(serde_json::Value::String(date)) => {
                in_window(validate::date(date, "date")?, today)?
            }
            Some(_) => {
                return Err(ApiError::invalid(
                    "date",
                    "`date` must be a string, YYYY-MM-DD",
                ))
            }
        }
    };
    let scan = BirthdayScan {
        date: Some(date.format("%Y-%m-%d").to_string()),
    };
    // A random id, not BullMQ's counter: a scan's id tells nothing of the others. The
    // coupon queue is not on the public status route; the operator's route follows it.
    let id = format!("scan-{}", uuid::Uuid::new_v4().simple());
    let job = producers
        .coupon
        .add_job(scan, JobOptions::new().job_id(&id).attempts(3))
        .await?;
    Ok(Accepted::from(job).location_at(format!("/admin/jobs/{COUPON_QUEUE}/{id}")))
}

fn in_window(date: NaiveDate, today: NaiveDate) -> Result<NaiveDate, ApiError> {
    let (first, last) = (
        today - Duration::days(SCAN_DAYS_BACK),
        today + Duration::days(SCAN_DAYS_AHEAD),
    );
    if date < first || date > last {
        return Err(ApiError::invalid(
            "date",
            format!("{date} is outside the scan window, {first} to {last}"),
        ));
    }
    Ok(date)
}
