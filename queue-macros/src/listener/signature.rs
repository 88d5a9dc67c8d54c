//! A listener's signature, checked syntactically so that mistakes are reported at the
//! user's token: `async fn(event, Dep<A>, ..)`, or for a worker event listener the typed
//! shape `async fn(job: EventJob<T>, second, Dep<A>, ..)` whose `second` is what
//! happened: `JobFailure` (`failed`), the job's output (`completed`), the progress value
//! (`progress`).

use syn::{FnArg, ItemFn, ReturnType, Type};

use super::Source;
use crate::diagnostics::Errors;
use crate::processor::signature::single_generic;

/// The kinds a typed listener may take, with what its second argument is.
const TYPED_KINDS: &str = "failed (`failure: JobFailure`), completed (`output: YourOutput`) or progress (`progress: serde_json::Value`)";

/// What the expansion calls the function with.
pub(crate) enum Shape {
    /// The event itself, then dependencies.
    Event { deps: Vec<Type> },
    /// `EventJob<payload>`, then `second`, then dependencies.
    Typed {
        payload: Box<Type>,
        second: Box<Type>,
        deps: Vec<Type>,
    },
}

impl Shape {
    pub(crate) fn deps(&self) -> &[Type] {
        match self {
            Shape::Event { deps } | Shape::Typed { deps, .. } => deps,
        }
    }
}

/// Checks the signature; `None` when it is too broken to expand (reported).
pub(crate) fn check(function: &ItemFn, source: Source, errors: &mut Errors) -> Option<Shape> {
    let sig = &function.sig;
    let event = match source {
        Source::Worker => "WorkerEvent",
        Source::Queue => "QueueEvent",
    };
    if sig.asyncness.is_none() {
        errors.spanned(
            sig.fn_token,
            format!("an event listener must be an `async fn(event: {event})`"),
        );
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        if !matches!(&**ty, syn::Type::Tuple(t) if t.elems.is_empty()) {
            errors.spanned(
                ty,
                "an event listener returns nothing; handle errors inside it",
            );
        }
    }
    let mut args = Vec::new();
    for arg in &sig.inputs {
        match arg {
            FnArg::Typed(typed) => args.push(&*typed.ty),
            FnArg::Receiver(r) => {
                errors.spanned(r, "an event listener is a free `async fn`");
                return None;
            }
        }
    }
    let Some((first, rest)) = args.split_first() else {
        errors.spanned(
            &sig.inputs,
            format!("an event listener takes the event first: `event: {event}`, then any `Dep<T>`"),
        );
        return None;
    };
    let Some(payload) = single_generic(first, "EventJob") else {
        let deps = deps(rest, "after the event", errors);
        return Some(Shape::Event { deps });
    };
    if source == Source::Queue {
        errors.spanned(
            first,
            "a queue event listener takes `event: QueueEvent` (the Redis stream names no job data); the job with its payload comes to #[on_worker_event] listeners",
        );
        return None;
    }
    let Some((second, rest)) = rest.split_first() else {
        errors.spanned(
            first,
            format!(
                "after `job: EventJob<T>`, a typed listener takes what happened: {TYPED_KINDS}"
            ),
        );
        return None;
    };
    let deps = deps(rest, "after the job and what happened to it", errors);
    Some(Shape::Typed {
        payload: Box::new(payload.clone()),
        second: Box::new((*second).clone()),
        deps,
    })
}

/// Checks the kind against a typed shape: the kinds it supports, and `JobFailure` after
/// the job of a `failed` listener.
pub(crate) fn check_kind(shape: &Shape, kind: &str, errors: &mut Errors) {
    let Shape::Typed {
        payload, second, ..
    } = shape
    else {
        return;
    };
    match kind {
        "failed" if !last_segment_is(second, "JobFailure") => errors.spanned(
            second,
            "a typed `failed` listener takes `failure: JobFailure` after the job",
        ),
        "failed" | "completed" | "progress" => {}
        other => errors.spanned(
            payload,
            format!(
                "a typed listener (`job: EventJob<T>` first) listens to {TYPED_KINDS}; for `{}` take `event: WorkerEvent`",
                other.replace('-', "_")
            ),
        ),
    }
}

fn last_segment_is(ty: &Type, name: &str) -> bool {
    matches!(ty, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == name))
}

/// The `T` of each `Dep<T>`.
fn deps(args: &[&Type], after: &str, errors: &mut Errors) -> Vec<Type> {
    let mut deps = Vec::new();
    for ty in args {
        match single_generic(ty, "Dep") {
            Some(inner) => deps.push(inner.clone()),
            None => errors.spanned(
                ty,
                format!("{after}, a listener takes only dependencies: `Dep<T>`, provided with `QueueApp::builder().provide(..)`"),
            ),
        }
    }
    deps
}
