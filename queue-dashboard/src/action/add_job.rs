//! `/{queue}/add`: adding a job from a form. The JSON is checked against the JSON
//! Schema of the job's declared payload (`#[job_queue]`), then against the payload type
//! of the handler this app has for the job's name, before anything is added; the
//! complaint is shown beside the field.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::FormRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use queue_axum::access::Access;
use queue_axum::quote;
use queue_core::{error::PayloadError, JobOptions};

use crate::audit;
use crate::base::Base;
use crate::load;
use crate::problem::{PageResult, Problem};
use crate::query::{AddForm, FieldErrors};
use crate::state::Shared;
use crate::view;

/// `GET`: the empty form.
pub(crate) async fn form(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
) -> PageResult {
    shared.queue(&name)?;
    if !access.can_act() {
        return Ok(view::error_page(
            StatusCode::FORBIDDEN,
            "Adding a job is an operator action; you may only look.",
            Some(&base),
        ));
    }
    let form = AddForm {
        data: "{}".to_owned(),
        ..AddForm::default()
    };
    let hints = load::add_job::read(&shared.app, &name);
    let page = view::add_job::page(
        &base,
        access.who(),
        &name,
        &form,
        &FieldErrors::default(),
        &hints,
    );
    Ok(page.into_response())
}

/// `POST`: checks, adds, and goes to the new job's page.
pub(crate) async fn submit(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(queue_name): Path<String>,
    form: Result<Form<AddForm>, FormRejection>,
) -> PageResult {
    let queue = shared.queue(&queue_name)?;
    let Form(form) = form.map_err(|e| Problem::BadRequest(e.body_text()))?;
    let mut errors = FieldErrors::default();
    let job_name = form.name.trim();
    if job_name.is_empty() {
        errors.name = Some("A job needs a name.".to_owned());
    }
    let data = match serde_json::from_str::<serde_json::Value>(&form.data) {
        Ok(data) => Some(data),
        Err(e) => {
            errors.data = Some(format!("Not JSON: {e}"));
            None
        }
    };
    if let (Some(data), false) = (&data, job_name.is_empty()) {
        if let Err(error) = shared.app.check_payload(&queue_name, job_name, data) {
            complain(&mut errors, job_name, error);
        }
    }
    let mut options = JobOptions::new();
    let job_id = form.job_id.trim();
    if !job_id.is_empty() {
        options = options.job_id(job_id);
    }
    match form.delay_ms.trim() {
        "" => {}
        delay => match delay.parse::<u64>() {
            Ok(ms) => options = options.delay(Duration::from_millis(ms)),
            Err(_) => errors.delay_ms = Some("A whole number of milliseconds.".to_owned()),
        },
    }
    let refuse =
        |errors: &FieldErrors| Ok(invalid(&shared, &base, &access, &queue_name, &form, errors));
    let (Some(data), false) = (data, errors.any()) else {
        return refuse(&errors);
    };
    let added = match queue.add(job_name, data, options).await {
        Ok(added) => added,
        // An option BullMQ refuses (a `:` in the id, say) is the form's mistake.
        Err(queue_core::Error::InvalidOption { option, reason }) => {
            let message = Some(reason);
            match option {
                "job_id" => errors.job_id = message,
                "payload" => errors.data = message,
                _ => errors.delay_ms = message,
            }
            return refuse(&errors);
        }
        Err(e) => return Err(e.into()),
    };
    audit::added(&access, &queue_name, &added.id, added.duplicate);
    Ok(Redirect::to(&base.job(&queue_name, &added.id)).into_response())
}

/// What the payload check said, beside the field it is about.
fn complain(errors: &mut FieldErrors, job_name: &str, error: PayloadError) {
    match error {
        PayloadError::NoHandler { .. } => {
            errors.name = Some(format!(
                "No handler of this app takes {} on this queue.",
                quote(job_name)
            ))
        }
        PayloadError::SchemaMismatch {
            payload_type,
            at,
            reason,
        } => {
            let place = if at.is_empty() {
                "the data".to_owned()
            } else {
                format!("`{at}`")
            };
            errors.data = Some(format!(
                "Does not follow the schema of `{payload_type}` at {place}: {reason}."
            ))
        }
        PayloadError::DoesNotFit {
            payload_type,
            reason,
        } => errors.data = Some(format!("Does not fit `{payload_type}`: {reason}")),
        other => errors.data = Some(other.to_string()),
    }
}

/// The form again, 400, with what is wrong beside each field.
fn invalid(
    shared: &Shared,
    base: &Base,
    access: &Access,
    queue: &str,
    form: &AddForm,
    errors: &FieldErrors,
) -> Response {
    let hints = load::add_job::read(&shared.app, queue);
    let page = view::add_job::page(base, access.who(), queue, form, errors, &hints);
    (StatusCode::BAD_REQUEST, page).into_response()
}
