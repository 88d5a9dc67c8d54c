//! `#[on_worker_event("queue", kind)]` and `#[on_queue_event("queue", kind)]` on an
//! `async fn(event)`: the `@OnWorkerEvent` / `@OnQueueEvent` equivalents.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{FnArg, ItemFn, ReturnType};

use crate::args::{self, Args, Value};
use crate::diagnostics::{item_with_errors, Errors};

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
            queue = parsed.queue(&mut errors, attribute);
            args::reject_duplicates(&parsed.items, &mut errors);
            for item in &parsed.items {
                let key = item.key.to_string();
                match (&item.value, key.as_str()) {
                    (Value::Lit(_), "crate") => {
                        if let Some(path) = args::string(item, &mut errors) {
                            match crate::crate_path::crate_path(Some(&path)) {
                                Ok(tokens) => krate = tokens,
                                Err(e) => errors.push(e),
                            }
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
    check_signature(&function, source, &mut errors);
    match errors.finish((queue, kind)) {
        Ok((Some(queue), Some(kind))) => expand(source, &krate, &function, &queue, &kind),
        Ok(_) => item,
        Err(e) => item_with_errors(item, &e),
    }
}

fn check_signature(function: &ItemFn, source: Source, errors: &mut Errors) {
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
    match args.as_slice() {
        [FnArg::Typed(_)] => {}
        _ => errors.spanned(
            &sig.inputs,
            format!("an event listener takes exactly one argument: `event: {event}`"),
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
}

fn expand(
    source: Source,
    krate: &TokenStream,
    function: &ItemFn,
    queue: &syn::LitStr,
    kind: &str,
) -> TokenStream {
    let name = &function.sig.ident;
    let (record, event) = match source {
        Source::Worker => (quote!(WorkerListenerRecord), quote!(WorkerEvent)),
        Source::Queue => (quote!(QueueListenerRecord), quote!(QueueEvent)),
    };
    quote! {
        #function
        const _: () = {
            fn __queue_call(event: #krate::#event) -> #krate::__private::BoxFuture<'static, ()> {
                ::std::boxed::Box::pin(#name(event))
            }
            #krate::__private::inventory::submit! {
                #krate::__private::#record {
                    queue: #queue,
                    event: #kind,
                    label: ::core::concat!(::core::module_path!(), "::", ::core::stringify!(#name)),
                    call: __queue_call,
                }
            }
        };
    }
}
