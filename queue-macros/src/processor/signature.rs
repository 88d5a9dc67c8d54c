//! The handler signature: `async fn(Job<T>, Dep<A>, ...) -> Result<R, JobError>`, or
//! for a flow parent `async fn(Job<T>, ChildResults<C>, Dep<A>, ...)`, checked
//! syntactically so that mistakes are reported at the user's token.

use syn::{FnArg, GenericArgument, PathArguments, ReturnType, Signature, Type};

use crate::diagnostics::Errors;

/// What the expansion needs from a checked signature.
pub(crate) struct HandlerSignature {
    pub(crate) payload: Type,
    /// `ChildResults<C>`, for a flow parent.
    pub(crate) children: Option<Type>,
    pub(crate) deps: Vec<Type>,
    pub(crate) output: Type,
}

/// The one generic argument of a path type whose last segment is `name`
/// (`Job<T>` -> `T`).
pub(crate) fn single_generic<'a>(ty: &'a Type, name: &str) -> Option<&'a Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != name {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.iter().collect::<Vec<_>>().as_slice() {
        [GenericArgument::Type(inner)] => Some(inner),
        _ => None,
    }
}

/// Checks `sig`; `method` says whether a `&self` receiver is expected first, `batch`
/// whether it is a batch handler (`Batch<T>` first, no children).
pub(crate) fn check(
    sig: &Signature,
    method: bool,
    batch: bool,
    errors: &mut Errors,
) -> Option<HandlerSignature> {
    let before = errors_snapshot(errors);
    if sig.asyncness.is_none() {
        errors.spanned(sig.fn_token, "a job handler must be an `async fn`");
    }
    if !sig.generics.params.is_empty() {
        errors.spanned(
            &sig.generics,
            "a job handler cannot be generic; name the payload type",
        );
    }
    let mut inputs = sig.inputs.iter().peekable();
    match (method, inputs.peek()) {
        (true, Some(FnArg::Receiver(r))) if r.reference.is_some() && r.mutability.is_none() => {
            inputs.next();
        }
        (true, _) => errors.spanned(&sig.ident, "a #[job] method takes `&self` first, then `job: Job<T>`"),
        (false, Some(FnArg::Receiver(r))) => errors.spanned(
            r,
            "#[processor] on a method: put #[processor(\"queue\")] on the impl block and #[job(\"name\")] on the method",
        ),
        (false, _) => {}
    }
    let (first, wrong, missing) = match batch {
        false => (
            "Job",
            "the first argument of a job handler must be `Job<YourPayload>`",
            "a job handler takes `job: Job<YourPayload>` as its first argument",
        ),
        true => (
            "Batch",
            "the first argument of a batch handler must be `Batch<YourPayload>`",
            "a batch handler takes `batch: Batch<YourPayload>` as its first argument",
        ),
    };
    let payload = match inputs.next() {
        Some(FnArg::Typed(arg)) => match single_generic(&arg.ty, first) {
            Some(payload) => Some(payload.clone()),
            None => {
                errors.spanned(&arg.ty, wrong);
                None
            }
        },
        _ => {
            errors.spanned(&sig.ident, missing);
            None
        }
    };
    let mut children = None;
    if let Some(FnArg::Typed(arg)) = inputs.peek().filter(|_| !batch) {
        if single_generic(&arg.ty, "ChildResults").is_some() {
            children = Some((*arg.ty).clone());
            inputs.next();
        }
    }
    let mut deps = Vec::new();
    for arg in inputs {
        let FnArg::Typed(arg) = arg else { continue };
        if single_generic(&arg.ty, "Dep").is_some() {
            deps.push((*arg.ty).clone());
        } else {
            errors.spanned(
                &arg.ty,
                "after the job, a handler takes only dependencies: `Dep<T>`, provided with `QueueApp::builder().provide(..)` (a flow parent takes `ChildResults<C>` right after the job)",
            );
        }
    }
    let output = match &sig.output {
        // Aliases such as `JobResult<T>` pass here; the trait check after expansion decides.
        ReturnType::Type(_, ty) if !last_segment_ends_with(ty, "Result") => {
            errors.spanned(
                ty,
                "a job handler must return `Result<R, JobError>`, e.g. `Result<(), JobError>`",
            );
            None
        }
        ReturnType::Type(_, ty) => Some((**ty).clone()),
        ReturnType::Default => {
            errors.spanned(
                &sig.ident,
                "a job handler must return `Result<R, JobError>`; add `-> Result<(), JobError>`",
            );
            None
        }
    };
    if errors_snapshot(errors) != before {
        return None;
    }
    Some(HandlerSignature {
        payload: payload?,
        children,
        deps,
        output: output?,
    })
}

/// `R` of a `Result<R, E>` (or of an alias with the value type first).
pub(crate) fn result_ok_type(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let PathArguments::AngleBracketed(args) = &path.path.segments.last()?.arguments else {
        return None;
    };
    match args.args.first()? {
        GenericArgument::Type(ok) => Some(ok),
        _ => None,
    }
}

fn last_segment_ends_with(ty: &Type, suffix: &str) -> bool {
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident.to_string().ends_with(suffix)),
        _ => false,
    }
}

fn errors_snapshot(errors: &Errors) -> usize {
    errors.count()
}
