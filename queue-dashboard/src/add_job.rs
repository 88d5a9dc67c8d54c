//! Adding a job from a form. The JSON is checked against the JSON Schema of the job's
//! declared payload (`#[job_queue]`), then against the payload type of the handler this
//! app has for the job's name, before anything is added; the complaint is shown beside
//! the field. The form shows each declared job's schema.

use std::sync::Arc;

use axum::extract::rejection::FormRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use axum::{Extension, Form};
use queue_core::{error::PayloadError, JobOptions};
use serde::Deserialize;

use maud::html;

use super::view::{self, format::Clip};
use super::{Access, Base, PageResult, Problem, Shared, AUDIT_TARGET};

/// What the form sends.
#[derive(Debug, Default, Deserialize)]
pub(super) struct AddForm {
    name: String,
    data: String,
    #[serde(default)]
    job_id: String,
    #[serde(default)]
    delay_ms: String,
}

/// What is wrong with a field of the form, shown beside it.
#[derive(Debug, Default)]
struct FieldErrors {
    name: Option<String>,
    data: Option<String>,
    job_id: Option<String>,
    delay_ms: Option<String>,
}

impl FieldErrors {
    fn any(&self) -> bool {
        self.name.is_some()
            || self.data.is_some()
            || self.job_id.is_some()
            || self.delay_ms.is_some()
    }
}

/// `GET /queues/{queue}/add`: the empty form.
pub(super) async fn form(
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
    Ok(page(
        &shared,
        &base,
        &access,
        &name,
        &form,
        &FieldErrors::default(),
    )
    .into_response())
}

/// `POST /queues/{queue}/add`: checks, adds, and goes to the new job's page.
pub(super) async fn submit(
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
        match shared.app.check_payload(&queue_name, job_name, data) {
            Ok(()) => {}
            Err(PayloadError::NoHandler { .. }) => {
                errors.name = Some(format!(
                    "No handler of this app takes {} on this queue.",
                    queue_axum::quote(job_name)
                ))
            }
            Err(PayloadError::SchemaMismatch {
                payload_type,
                at,
                reason,
            }) => {
                let place = if at.is_empty() {
                    "the data".to_owned()
                } else {
                    format!("`{at}`")
                };
                errors.data = Some(format!(
                    "Does not follow the schema of `{payload_type}` at {place}: {reason}."
                ))
            }
            Err(PayloadError::DoesNotFit {
                payload_type,
                reason,
            }) => errors.data = Some(format!("Does not fit `{payload_type}`: {reason}")),
            Err(other) => errors.data = Some(other.to_string()),
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
            Ok(ms) => options = options.delay(std::time::Duration::from_millis(ms)),
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
    tracing::info!(
        target: AUDIT_TARGET,
        who = access.who(),
        action = "add",
        queue = %queue_name,
        job_id = %added.id,
        duplicate = added.duplicate,
        "dashboard action"
    );
    Ok(Redirect::to(&base.job(&queue_name, &added.id)).into_response())
}

fn invalid(
    shared: &Shared,
    base: &Base,
    access: &Access,
    queue: &str,
    form: &AddForm,
    errors: &FieldErrors,
) -> axum::response::Response {
    (
        StatusCode::BAD_REQUEST,
        page(shared, base, access, queue, form, errors),
    )
        .into_response()
}

fn page(
    shared: &Shared,
    base: &Base,
    access: &Access,
    queue: &str,
    form: &AddForm,
    errors: &FieldErrors,
) -> axum::response::Html<String> {
    let here = base.queue(queue);
    let (names, any_name) = shared.app.job_names(queue);
    let beside = |error: &Option<String>| {
        html! {
            @if let Some(error) = error { p.bad.field-error role="alert" { (Clip(error, 2_000)) } }
        }
    };
    let hint = match (names.is_empty(), any_name) {
        (true, false) => "No handler of this app processes this queue.".to_owned(),
        (_, true) => format!(
            "Handled by name: {}; any other name by the catch-all.",
            names.join(", ")
        ),
        (false, false) => format!("Handled: {}.", names.join(", ")),
    };
    let declared = shared.app.declared_jobs();
    let schemas = declared
        .iter()
        .filter(|job| job.queue == queue)
        .filter_map(|job| Some((job, job.payload_schema.as_ref()?)));
    let body = html! {
        h1 { a href=(here) { (Clip(queue, 80)) } " · add a job" }
        form.add method="post" action={ (here) "/add" } {
            dl {
                dt { label for="name" { "name" } }
                dd {
                    input #name name="name" list="names" value=(form.name) required;
                    " " span.muted { (hint) }
                    datalist #names { @for name in &names { option value=(name); } }
                    (beside(&errors.name))
                }
                dt { label for="data" { "data (JSON)" } }
                dd {
                    textarea #data name="data" rows="10" cols="70" { (form.data) }
                    (beside(&errors.data))
                    @for (job, schema) in schemas {
                        details.schema {
                            summary { "data of " code { (job.name) } " (" (job.payload_type) ")" }
                            pre { (serde_json::to_string_pretty(schema).unwrap_or_default()) }
                        }
                    }
                }
                dt { label for="job_id" { "job id" } }
                dd { input #job_id name="job_id" value=(form.job_id) placeholder="automatic"; (beside(&errors.job_id)) }
                dt { label for="delay_ms" { "delay (ms)" } }
                dd { input #delay_ms name="delay_ms" value=(form.delay_ms) placeholder="0"; (beside(&errors.delay_ms)) }
            }
            button { "Add" }
        }
    };
    view::page(base, &format!("add to {queue}"), access.who(), body)
}
