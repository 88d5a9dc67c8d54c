//! `POST /birthdays/run`: a birthday scan now, for today or a given day.

use axum::body::Bytes;
use chrono::Utc;
use queue_axum::Accepted;
use queue_core::JobOptions;

use super::{validate, ApiError, Producers};
use crate::jobs::coupons::BirthdayScan;

/// Adds a `birthday-scan` job; the body is empty or `{"date": "YYYY-MM-DD"}`.
pub(crate) async fn run(producers: Producers, body: Bytes) -> Result<Accepted, ApiError> {
    let date = if body.iter().all(u8::is_ascii_whitespace) {
        Utc::now().date_naive()
    } else {
        let value: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| ApiError::Body {
                status: axum::http::StatusCode::BAD_REQUEST,
                message: format!("the body is not JSON: {e}"),
            })?;
        match value.get("date") {
            None | Some(serde_json::Value::Null) => Utc::now().date_naive(),
            Some(serde_json::Value::String(date)) => validate::date(date, "date")?,
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
    let job = producers
        .coupon
        .add("birthday-scan", scan, JobOptions::new().attempts(3))
        .await?;
    Ok(job.into())
}
