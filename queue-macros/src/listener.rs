//! `#[on_worker_event("queue", kind)]` and `#[on_queue_event("queue", kind)]` on an
//! `async fn(event, Dep<A>, ..)`: the `@OnWorkerEvent` / `@OnQueueEvent` equivalents.
//! The queue may be a declared queue type: `#[on_worker_event(Email, failed)]`.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{FnArg, ItemFn, ReturnType, Type};

use crate::args::{self, Args, QueueRef, Value};
use crate::diagnostics::{item_with_errors, Errors};
use crate::processor::signature::single_generic;

/// Which of the two listener attributes.
#[derive(Clone, Copy)]
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

pub(crate) fn listener(source: Source, attr: TokenStream, item: TokenStream) -> TokenStream {
    let attribute = source.attribute();
    let mut errors = Errors::default();
    let mut krate = quote!(::queue_core);
    let mut queue = None;
    let mut kind = None;
    match syn::parse2::<Args>(attr) {
        Ok(parsed) => {
            queue = parsed.queue_ref(&mut errors, attribute);
            args::reject_duplicates(&parsed.items, &mut errors);
            for item in &parsed.items {
                let key = item.key.to_string();
                match (&item.value, key.as_str()) {
                    (Value::Lit(_), "crate") => {
                        if let Some(path) = args::crate_option(item, &mut errors) {
                            krate = path;
                        }
                    }
                    (Value::Flag, k)
                        if source.kinds().iter().any(|known| known == k) && kind.is_none() =>
                    {
                        kind = Some(k.replace('_', "-"))
                    }
                    (Value::Flag, _) if kind.is_some() => errors.spanned(
                        &item.key,
                        format!(
                            "one event kind per #[{attribute}]; add another function for `{key}`"
                        ),
                    ),
                    _ => errors.spanned(
                        &item.key,
                        format!(
                            "unknown event kind `{key}`; #[{attribute}] knows: {}",
                            source.kinds().join(", ")
                        ),
                    ),
                }
            }
            let named_a_kind = parsed.items.iter().any(|i| matches!(i.value, Value::Flag));
            if kind.is_none() && queue.is_some() && !named_a_kind {
                errors.at(
                    proc_macro2::Span::call_site(),
                    format!(
                        "name the event kind: #[{attribute}(\"queue\", failed)]; kinds: {}",
                        source.kinds().join(", ")
                    ),
                );
            }
        }
        Err(e) => errors.push(e),
    }
    let function: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            let e = syn::Error::new_spanned(
                &item,
                format!("#[{attribute}] goes on an `async fn(event)`"),
            );
            return item_with_errors(item, &e);
        }
    };
    let deps = check_signature(&function, source, &mut errors);
    match errors.finish((queue, kind)) {
        Ok((Some(queue), Some(kind))) => expand(source, &krate, &function, &queue, &kind, &deps),
        Ok(_) => item,
        Err(e) => item_with_errors(item, &e),
    }
}

/// Checks the signature; returns the `T` of each `Dep<T>` after the event.
fn check_signature(function: &ItemFn, source: Source, errors: &mut Errors) -> Vec<Type> {
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
    let args: Vec<&FnArg> = sig.inputs.iter().collect();
    let mut deps = Vec::new();
    match args.split_first() {
        Some((FnArg::Typed(_), rest)) => {
            for arg in rest {
                match arg {
                    FnArg::Typed(typed) => match single_generic(&typed.ty, "Dep") {
                        Some(inner) => deps.push(inner.clone()),
                        None => errors.spanned(
                            &typed.ty,
                            "after the event, a listener takes only dependencies: `Dep<T>`, provided with `QueueApp::builder().provide(..)`",
                        ),
                    },
                    FnArg::Receiver(r) => errors.spanned(r, "an event listener is a free `async fn`"),
                }
            }
        }
        _ => errors.spanned(
            &sig.inputs,
            format!("an event listener takes the event first: `event: {event}`, then any `Dep<T>`"),
        ),
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        if !matches!(&**ty, syn::Type::Tuple(t) if t.elems.is_empty()) {
            errors.spanned(
                ty,
                "an event listener returns nothing; handle errors inside it",
            );
        }
    }
    deps
}

fn expand(
    source: Source,
    krate: &TokenStream,
    function: &ItemFn,
    queue: &QueueRef,
    kind: &str,
    deps: &[Type],
) -> TokenStream {
    let name = &function.sig.ident;
    let queue = queue.name_tokens(krate);
    let (record, event) = match source {
        Source::Worker => (quote!(WorkerListenerRecord), quote!(WorkerEvent)),
        Source::Queue => (quote!(QueueListenerRecord), quote!(QueueEvent)),
    };
    quote! {
        #function
        const _: () = {
            fn __queue_call(
                event: #krate::#event,
                deps: &#krate::__private::Deps,
            ) -> ::core::option::Option<#krate::__private::BoxFuture<'static, ()>> {
                ::core::option::Option::Some(::std::boxed::Box::pin(#name(event, #(deps.get::<#deps>()?),*)))
            }
            fn __queue_dependencies() -> ::std::vec::Vec<#krate::__private::DepInfo> {
                ::std::vec![#(#krate::__private::DepInfo::of::<#deps>()),*]
            }
            #krate::__private::inventory::submit! {
                #krate::__private::#record {
                    queue: #queue,
                    event: #kind,
                    label: ::core::concat!(::core::module_path!(), "::", ::core::stringify!(#name)),
                    call: __queue_call,
                    dependencies: __queue_dependencies,
                }
            }
        };
    }
}
