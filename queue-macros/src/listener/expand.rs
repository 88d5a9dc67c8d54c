//! Code generation for the listener attributes: the function, spanned checks of a
//! typed listener's types, and one listener record whose `call` turns an event into the
//! function's arguments through queue-core's `TypedListener`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::ItemFn;

use super::signature::Shape;
use super::{ListenerArgs, Source};
use crate::args::QueueRef;

pub(crate) fn expand(
    source: Source,
    args: &ListenerArgs,
    function: &ItemFn,
    shape: &Shape,
) -> TokenStream {
    let krate = &args.krate;
    let name = &function.sig.ident;
    let queue = args.queue.name_tokens(krate);
    let kind = &args.kind;
    let deps = shape.deps();
    let (record, event) = match source {
        Source::Worker => (quote!(WorkerListenerRecord), quote!(WorkerEvent)),
        Source::Queue => (quote!(QueueListenerRecord), quote!(QueueEvent)),
    };
    let label = quote!(::core::concat!(
        ::core::module_path!(),
        "::",
        ::core::stringify!(#name)
    ));
    let Arguments {
        statements,
        leading,
        checks,
    } = arguments(args, shape, &label);
    quote! {
        #function
        const _: () = {
            #[allow(dead_code)]
            fn __queue_checks() {
                #checks
            }
            fn __queue_call(
                event: #krate::#event,
                deps: &#krate::__private::Deps,
            ) -> ::core::option::Option<#krate::__private::BoxFuture<'static, ()>> {
                #statements
                ::core::option::Option::Some(::std::boxed::Box::pin(#name(#leading #(deps.get::<#deps>()?),*)))
            }
            fn __queue_dependencies() -> ::std::vec::Vec<#krate::__private::DepInfo> {
                ::std::vec![#(#krate::__private::DepInfo::of::<#deps>()),*]
            }
            #krate::__private::inventory::submit! {
                #krate::__private::#record {
                    queue: #queue,
                    event: #kind,
                    label: #label,
                    call: __queue_call,
                    dependencies: __queue_dependencies,
                }
            }
        };
    }
}

/// How the event becomes the function's first arguments.
struct Arguments {
    /// Statements that end the call with `None` when the event is not for this
    /// listener.
    statements: TokenStream,
    /// The arguments before the dependencies, each followed by a comma.
    leading: TokenStream,
    /// Compile-time checks of a typed listener's types, at the user's tokens.
    checks: TokenStream,
}

fn arguments(args: &ListenerArgs, shape: &Shape, label: &TokenStream) -> Arguments {
    let krate = &args.krate;
    let final_only = args.final_only;
    let job_name = match (shape, &args.queue, &args.job) {
        (Shape::Typed { payload, .. }, QueueRef::Type(_), _) => {
            quote!(::core::option::Option::Some(<#payload as #krate::__private::JobType>::NAME))
        }
        (_, _, Some(job)) => quote!(::core::option::Option::Some(#job)),
        _ => quote!(::core::option::Option::None),
    };
    let listener = quote! {
        const LISTENER: #krate::__private::TypedListener = #krate::__private::TypedListener {
            label: #label,
            job_name: #job_name,
            final_only: #final_only,
        };
    };
    let Shape::Typed {
        payload, second, ..
    } = shape
    else {
        // The event itself; `final_only` is the one filter that applies to it.
        return Arguments {
            statements: if final_only {
                quote! { #listener let event = LISTENER.event(event)?; }
            } else {
                TokenStream::new()
            },
            leading: quote!(event,),
            checks: TokenStream::new(),
        };
    };
    let convert = match args.kind.as_str() {
        "failed" => quote!(LISTENER.failed::<#payload>(event)?),
        "completed" => quote!(LISTENER.completed::<#payload, #second>(event)?),
        _ => quote!(LISTENER.progress::<#payload, #second>(event)?),
    };
    let mut checks = quote_spanned! {payload.span()=>
        #krate::__private::assert_payload::<#payload>();
    };
    if args.kind != "failed" {
        checks.extend(quote_spanned! {second.span()=>
            #krate::__private::assert_payload::<#second>();
        });
    }
    if let QueueRef::Type(queue) = &args.queue {
        checks.extend(quote_spanned! {payload.span()=>
            #krate::__private::assert_job_of::<#queue, #payload>();
        });
        if args.kind == "completed" {
            checks.extend(quote_spanned! {second.span()=>
                #krate::__private::assert_output_of::<#payload, #second>();
            });
        }
    }
    Arguments {
        statements: quote! {
            #listener
            let (job, second) = #convert;
        },
        leading: quote!(job, second,),
        checks,
    }
}
