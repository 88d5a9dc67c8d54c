//! `#[on_worker_event("queue", kind)]` and `#[on_queue_event("queue", kind)]` on an
//! `async fn`: the `@OnWorkerEvent` / `@OnQueueEvent` equivalents. The queue may be a
//! declared queue type: `#[on_worker_event(Email, failed)]`. A worker event listener
//! may take the event (`event: WorkerEvent`), or, NestJS's shape, the job with its
//! payload typed and what happened to it: `job: EventJob<T>, failure: JobFailure` (see
//! [`signature`]). Parsed and checked here, generated in [`expand`].

mod expand;
mod signature;

use proc_macro2::TokenStream;
use syn::{ItemFn, Lit, LitStr};

use crate::args::{self, Args, QueueRef, Value};
use crate::diagnostics::{item_with_errors, Errors};

/// Which of the two listener attributes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    Worker,
    Queue,
}

impl Source {
    fn attribute(self) -> &'static str {
        match self {
            Source::Worker => "on_worker_event",
            Source::Queue => "on_queue_event",
        }
    }

    /// The kinds as the attribute spells them (`lock_lost`), from queue-core's own
    /// list (`queue-vocab`), so that a kind queue-core gains or renames is known here.
    fn kinds(self) -> Vec<String> {
        let kinds = match self {
            Source::Worker => queue_vocab::WORKER_EVENT_KINDS,
            Source::Queue => queue_vocab::QUEUE_EVENT_KINDS,
        };
        kinds
            .iter()
            .map(|k| queue_vocab::attribute_spelling(k))
            .collect()
    }
}

/// The checked attribute arguments.
pub(crate) struct ListenerArgs {
    pub(crate) krate: TokenStream,
    pub(crate) queue: QueueRef,
    /// As queue-core names it (`lock-lost`).
    pub(crate) kind: String,
    /// `final_only`: failures no retry follows.
    pub(crate) final_only: bool,
    /// `job = "name"`: only jobs of this name (a typed listener of a queue named by
    /// string).
    pub(crate) job: Option<LitStr>,
}

pub(crate) fn listener(source: Source, attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let parsed = parse_args(source, attr, &mut errors);
    let function: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            let e = syn::Error::new_spanned(
                &item,
                format!("#[{}] goes on an `async fn(event)`", source.attribute()),
            );
            let _ = errors.finish(());
            return item_with_errors(item, &e);
        }
    };
    let shape = signature::check(&function, source, &mut errors);
    if let (Some(args), Some(shape)) = (&parsed, &shape) {
        check_options(source, args, shape, &mut errors);
    }
    match errors.finish((parsed, shape)) {
        Ok((Some(args), Some(shape))) => expand::expand(source, &args, &function, &shape),
        Ok(_) => item,
        Err(e) => item_with_errors(item, &e),
    }
}

/// The queue, the kind and the options; `None` when the queue or the kind is missing
/// (reported).
fn parse_args(source: Source, attr: TokenStream, errors: &mut Errors) -> Option<ListenerArgs> {
    let attribute = source.attribute();
    let parsed = match syn::parse2::<Args>(attr) {
        Ok(parsed) => parsed,
        Err(e) => {
            errors.push(e);
            return None;
        }
    };
    let queue = parsed.queue_ref(errors, attribute);
    args::reject_duplicates(&parsed.items, errors);
    let mut krate = quote::quote!(::queue_core);
    let mut kind: Option<String> = None;
    let mut final_only = false;
    let mut job = None;
    let kinds = source.kinds();
    for item in &parsed.items {
        let key = item.key.to_string();
        match (&item.value, key.as_str()) {
            (Value::Lit(_), "crate") => {
                if let Some(path) = args::crate_option(item, errors) {
                    krate = path;
                }
            }
            (Value::Flag, "final_only") if source == Source::Worker => final_only = true,
            (Value::Lit(Lit::Str(name)), "job") if source == Source::Worker => {
                job = Some(name.clone())
            }
            (_, "job") if source == Source::Worker => errors.spanned(
                &item.key,
                "write the job name as a string: `job = \"welcome\"`",
            ),
            (Value::Flag, k) if kinds.iter().any(|known| known == k) && kind.is_none() => {
                kind = Some(k.replace('_', "-"))
            }
            (Value::Flag, k) if kind.is_some() && kinds.iter().any(|known| known == k) => errors
                .spanned(
                    &item.key,
                    format!("one event kind per #[{attribute}]; add another function for `{key}`"),
                ),
            _ => {
                let options = match source {
                    Source::Worker => {
                        "; options: final_only (with `failed`), job = \"name\", crate = \"..\""
                    }
                    Source::Queue => "; option: crate = \"..\"",
                };
                errors.spanned(
                    &item.key,
                    format!(
                        "unknown event kind `{key}`; #[{attribute}] knows: {}{options}",
                        kinds.join(", ")
                    ),
                )
            }
        }
    }
    // A misspelled kind was reported above: no second error for it.
    let named_a_kind = parsed
        .items
        .iter()
        .any(|i| matches!(i.value, Value::Flag) && i.key != "final_only");
    if kind.is_none() && queue.is_some() && !named_a_kind {
        errors.at(
            proc_macro2::Span::call_site(),
            format!(
                "name the event kind: #[{attribute}(\"queue\", failed)]; kinds: {}",
                kinds.join(", ")
            ),
        );
    }
    if final_only && kind.as_deref().is_some_and(|k| k != "failed") {
        let item = parsed.items.iter().find(|i| i.key == "final_only");
        if let Some(item) = item {
            errors.spanned(
                &item.key,
                "`final_only` picks the failures no retry follows: it goes with `failed` only",
            );
        }
    }
    Some(ListenerArgs {
        krate,
        queue: queue?,
        kind: kind?,
        final_only,
        job,
    })
}

/// The rules between the options and the signature.
fn check_options(
    source: Source,
    args: &ListenerArgs,
    shape: &signature::Shape,
    errors: &mut Errors,
) {
    signature::check_kind(shape, &args.kind, errors);
    let Some(job) = &args.job else { return };
    match (shape, &args.queue) {
        (signature::Shape::Event { .. }, _) => errors.spanned(
            job,
            format!(
                "`job = ..` picks the jobs of a typed listener: take `job: EventJob<Payload>` first (#[{}])",
                source.attribute()
            ),
        ),
        (_, QueueRef::Type(_)) => errors.spanned(
            job,
            "on a declared queue the payload type names the job: drop `job = ..`",
        ),
        _ => {}
    }
}
