//! `POST /users` (sign-up: 202 and a welcome email job) and `GET /users/{id}/coupons`.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::Json;
use chrono::Utc;
use queue_axum::Accepted;

use super::{validate, ApiError, AppState, Producers};
use crate::db::Inserted;
use crate::jobs::email::{self, WelcomeEmail};

/// Creates the user and enqueues the welcome email; 202 with the job and the user id.
pub(crate) async fn create(
    State(state): State<AppState>,
    producers: Producers,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Accepted, ApiError> {
    let Json(body) = body?;
    let email_address = validate::email(&body)?;
    let name = validate::string(&body, "name", 200)?;
    let birthday_text = validate::string(&body, "birthday", 10)?;
    let birthday = validate::date(&birthday_text, "birthday")?;
    if birthday > Utc::now().date_naive() {
        return Err(ApiError::invalid(
            "birthday",
            "a birthday cannot be in the future",
        ));
    }
    let birthday = birthday.format("%Y-%m-%d").to_string();

    let user_id = match state
        .db
        .insert_user(&email_address, &name, &birthday)
        .await?
    {
        Inserted::New(id) => id,
        Inserted::AlreadyThere => {
            return Err(ApiError::Conflict(format!(
                "`{email_address}` is already registered"
            )))
        }
    };
    let welcome = WelcomeEmail {
        user_id,
        email: email_address,
        name,
    };
    let job = producers
        .email
        .add(
            "welcome",
            welcome,
            email::options(user_id, state.welcome_backoff),
        )
        .await?;
    Ok(Accepted::from(job).with("userId", user_id))
}

/// The user's coupon grants.
pub(crate) async fn coupons(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if state.db.user(id).await?.is_none() {
        return Err(ApiError::NotFound(format!("no user {id}")));
    }
    let grants = state.db.grants(id).await?;
    Ok(Json(serde_json::json!({ "userId": id, "grants": grants })))
}
