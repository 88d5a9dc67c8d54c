//! The add-a-job form: each field with what is wrong with it beside it, the job names
//! the app's handlers take, and each declared job's payload schema.

use axum::response::Html;
use maud::html;

use super::format::Clip;
use crate::base::Base;
use crate::load::add_job::JobHints;
use crate::query::{AddForm, FieldErrors};

/// The form for `queue`, filled with `form`.
pub(crate) fn page(
    base: &Base,
    who: &str,
    queue: &str,
    form: &AddForm,
    errors: &FieldErrors,
    hints: &JobHints<'_>,
) -> Html<String> {
    let here = base.queue(queue);
    let beside = |error: &Option<String>| {
        html! {
            @if let Some(error) = error { p.bad.field-error role="alert" { (Clip(error, 2_000)) } }
        }
    };
    let names = &hints.names;
    let hint = match (names.is_empty(), hints.any_name) {
        (true, false) => "No handler of this app processes this queue.".to_owned(),
        (_, true) => format!(
            "Handled by name: {}; any other name by the catch-all.",
            names.join(", ")
        ),
        (false, false) => format!("Handled: {}.", names.join(", ")),
    };
    let body = html! {
        h1 { a href=(here) { (Clip(queue, 80)) } " · add a job" }
        form.add method="post" action={ (here) "/add" } {
            dl {
                dt { label for="name" { "name" } }
                dd {
                    input #name name="name" list="names" value=(form.name) required;
                    " " span.muted { (hint) }
                    datalist #names { @for name in names { option value=(name); } }
                    (beside(&errors.name))
                }
                dt { label for="data" { "data (JSON)" } }
                dd {
                    textarea #data name="data" rows="10" cols="70" { (form.data) }
                    (beside(&errors.data))
                    @for (job, schema) in &hints.schemas {
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
    super::page(base, &format!("add to {queue}"), who, body)
}
