//! `POST /users` (sign-up: 202 and a welcome email job, committed together) and
//! `GET /users/{id}/coupons` (the user's own, with the token they got at sign-up).

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use axum::Json;
use queue_axum::Accepted;

use super::auth::{bearer, new_token, operator_access, same, token_hash};
use super::{validate, ApiError, AppState, Producers};
use crate::db::{Inserted, NewUser};
use crate::jobs::email::{self, WelcomeEmail};

/// Creates the user and writes the welcome email job in the same transaction (through
/// the outbox), so that the job exists exactly when the user does, whether or not Redis
/// answers right now. 202 with the user's public id and access token (shown once).
pub(crate) async fn create(
    State(state): State<AppState>,
    producers: Producers,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let Json(body) = body?;
    let email_address = validate::email(&body)?;
    let name = validate::string(&body, "name", 200)?;
    let birthday_text = validate::string(&body, "birthday", 10)?;
    let birthday = validate::birthday(&birthday_text, state.today())?;
    let birthday = birthday.format("%Y-%m-%d").to_string();

    let public_id = uuid::Uuid::new_v4().simple().to_string();
    let token = new_token();
    let mut tx = state.db.begin().await?;
    let user = NewUser {
        public_id: &public_id,
        email: &email_address,
        name: &name,
        birthday: &birthday,
        token_hash: &token_hash(&token),
    };
    if tx.insert_user(&user).await? == Inserted::AlreadyThere {
        return Err(ApiError::Conflict(format!(
            "`{email_address}` is already registered"
        )));
    }
    let welcome = WelcomeEmail {
        user_id: public_id.clone(),
        email: email_address,
        name,
    };
    let job = tx
        .add_job(
            &producers.email,
            welcome,
            email::options(&public_id, state.welcome_backoff),
        )
        .await?;
    tx.commit().await?;
    let accepted = Accepted::from(job)
        .with("userId", &public_id)
        .with("accessToken", &token);
    Ok(([(header::CACHE_CONTROL, "no-store")], accepted))
}

/// The user's coupon grants: for the user (their access token) or the operator. An
/// unknown user and a token that is not theirs get the same 404.
pub(crate) async fn coupons(
    State(state): State<AppState>,
    Path(id): Path<String>,
    request: Parts,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Some(given) = bearer(&request.headers) else {
        return Err(ApiError::Unauthorized(
            "send Authorization: Bearer <the accessToken you got at sign-up>".to_owned(),
        ));
    };
    let not_found = || ApiError::NotFound("no such user, or the token is not theirs".to_owned());
    let user = state.db.user(&id).await?.ok_or_else(not_found)?;
    let own = user
        .token_hash
        .as_deref()
        .is_some_and(|stored| same(stored, &token_hash(given)));
    if !own && !operator_access(&state, &request)? {
        return Err(not_found());
    }
    let grants = state.db.grants(user.id).await?;
    Ok(Json(
        serde_json::json!({ "userId": user.public_id, "grants": grants }),
    ))
}
