//! Code generation for `#[processor]`: the user's item, spanned compile-time checks,
//! and one `ProcessorRecord` per handler, all helpers inside `const _: () = { .. }`.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{ItemFn, ItemImpl, LitStr, Type};

use super::args::ProcessorConfig;
use super::signature::HandlerSignature;
use crate::args::QueueRef;

/// Compile-time checks whose errors point at the user's types.
fn checks(config: &ProcessorConfig, sig: &HandlerSignature, name: &Ident) -> TokenStream {
    let krate = &config.krate;
    let payload = &sig.payload;
    let output = &sig.output;
    let payload_check = quote_spanned! {payload.span()=>
        #krate::__private::assert_payload::<#payload>();
    };
    let output_check = match config.batch {
        Some(_) => quote_spanned! {output.span()=>
            #krate::__private::assert_batch_return::<#output>();
        },
        None => quote_spanned! {output.span()=>
            #krate::__private::assert_handler_return::<#output>();
        },
    };
    let children_check = sig.children.as_ref().map(|children| {
        quote_spanned! {children.span()=>
            #krate::__private::assert_child_results::<#children>();
        }
    });
    // A declared queue's handler: its payload is a job of that queue, and it returns
    // what the job declares.
    let contract_checks = match &config.queue {
        QueueRef::Type(queue) => {
            let queue_check = quote_spanned! {queue.span()=>
                #krate::__private::assert_queue_type::<#queue>();
            };
            let job_check = quote_spanned! {payload.span()=>
                #krate::__private::assert_job_of::<#queue, #payload>();
            };
            // A batch handler's jobs return what `BatchResult` gives each.
            let returned = super::signature::result_ok_type(output)
                .filter(|_| config.batch.is_none())
                .map(|ok| {
                    quote_spanned! {ok.span()=>
                        #krate::__private::assert_output_of::<#payload, #ok>();
                    }
                });
            quote!(#queue_check #job_check #returned)
        }
        QueueRef::Name(_) => TokenStream::new(),
    };
    let checks = format_ident!("__queue_checks_{}", name);
    quote! {
        #[allow(dead_code, non_snake_case)]
        fn #checks() {
            #payload_check
            #children_check
            #output_check
            #contract_checks
        }
    }
}

/// The job name a handler's record claims: the one written, the payload's declared one
/// for a processor of a declared queue, or none (every name nobody else claims).
fn job_name(config: &ProcessorConfig, written: Option<&LitStr>, payload: &Type) -> TokenStream {
    let krate = &config.krate;
    if config.batch.is_some() && matches!(config.queue, QueueRef::Name(_)) {
        // A batch handler of a queue named by string takes every name of it; one of a
        // declared queue takes the job its payload declares, as a single handler does.
        return quote!(::core::option::Option::None);
    }
    match (written, &config.queue) {
        (Some(name), _) => quote!(::core::option::Option::Some(#name)),
        (None, QueueRef::Type(_)) => {
            quote!(::core::option::Option::Some(<#payload as #krate::__private::JobType>::NAME))
        }
        (None, QueueRef::Name(_)) => quote!(::core::option::Option::None),
    }
}

fn option<T: ToTokens>(value: Option<T>) -> TokenStream {
    match value {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    }
}

/// `fn __queue_group_limits() -> GroupLimits` for a processor with `groups`: the record
/// points to it, since a `GroupLimits` cannot be built in a static.
fn group_limits(config: &ProcessorConfig) -> TokenStream {
    let Some(groups) = &config.groups else {
        return TokenStream::new();
    };
    let krate = &config.krate;
    let concurrency = groups.concurrency.map(|n| quote!(.concurrency(#n)));
    let rate = groups
        .rate
        .map(|(max, ms)| quote!(.rate(#max, ::core::time::Duration::from_millis(#ms))));
    quote! {
        fn __queue_group_limits() -> #krate::group::GroupLimits {
            #krate::group::GroupLimits::new() #concurrency #rate
        }
    }
}

/// The record's `groups`: the function above, for a processor with `groups`.
fn groups_field(config: &ProcessorConfig) -> TokenStream {
    let groups = option(config.groups.as_ref().map(|_| quote!(__queue_group_limits)));
    quote!(groups: #groups,)
}

/// The record for one handler.
fn record(
    config: &ProcessorConfig,
    job: TokenStream,
    label: TokenStream,
    make: &Ident,
    instance: TokenStream,
) -> TokenStream {
    let krate = &config.krate;
    let queue = config.queue.name_tokens(krate);
    let concurrency = option(config.concurrency.map(|c| quote!(#c as usize)));
    let timeout = option(config.timeout_ms);
    let lock = option(config.lock_duration_ms);
    let limiter = option(config.limiter.map(|(max, per)| quote!((#max, #per))));
    let per_minute = option(config.per_minute_metrics.map(|n| quote!(#n as usize)));
    let also_serve = &config.also_serve;
    let groups = groups_field(config);
    let batch = option(config.batch.as_ref().map(|b| {
        let (size, wait) = (b.size, b.wait_ms);
        quote!((#size as usize, #wait))
    }));
    quote! {
        #krate::__private::inventory::submit! {
            #krate::__private::ProcessorRecord {
                queue: #queue,
                job: #job,
                concurrency: #concurrency,
                timeout_ms: #timeout,
                lock_duration_ms: #lock,
                limiter: #limiter,
                per_minute_metrics: #per_minute,
                also_serve: &[#(#also_serve),*],
                #groups
                batch: #batch,
                label: #label,
                handler: #make,
                instance: #instance,
            }
        }
    }
}

/// `#[processor]` on an `async fn`.
pub(crate) fn on_fn(
    config: &ProcessorConfig,
    item: &ItemFn,
    sig: &HandlerSignature,
) -> TokenStream {
    let krate = &config.krate;
    let name = &item.sig.ident;
    let checks = checks(config, sig, name);
    let label = quote!(::core::concat!(
        ::core::module_path!(),
        "::",
        ::core::stringify!(#name)
    ));
    let make = format_ident!("__queue_make_handler");
    let erase = match config.batch {
        Some(_) => format_ident!("batch"),
        None => format_ident!("new"),
    };
    let group_limits = group_limits(config);
    let record = record(
        config,
        job_name(config, config.job.as_ref(), &sig.payload),
        label,
        &make,
        quote!(::core::option::Option::None),
    );
    quote! {
        #item
        const _: () = {
            #checks
            #group_limits
            fn #make() -> #krate::__private::ErasedHandler {
                #krate::__private::ErasedHandler::#erase(#name)
            }
            #record
        };
    }
}

/// One `#[job("name")]` (or, in a declared queue's processor, `#[job]`) method of a
/// processor impl.
pub(crate) struct JobMethod {
    pub(crate) job: Option<LitStr>,
    pub(crate) method: Ident,
    pub(crate) sig: HandlerSignature,
    pub(crate) job_ty: Type,
}

/// `#[processor]` on an impl block: the impl (with `#[job]` removed) and a record per
/// job method. The struct comes from `provide`, else from `Default`.
pub(crate) fn on_impl(
    config: &ProcessorConfig,
    item: &ItemImpl,
    methods: &[JobMethod],
) -> TokenStream {
    let krate = &config.krate;
    let self_ty = &item.self_ty;
    let mut helpers = group_limits(config);
    for JobMethod {
        job,
        method,
        sig,
        job_ty,
    } in methods
    {
        helpers.extend(checks(config, sig, method));
        let make = format_ident!("__queue_make_{}", method);
        let dep_names: Vec<Ident> = (0..sig.deps.len())
            .map(|i| format_ident!("__dep{}", i))
            .collect();
        let dep_tys = &sig.deps;
        // A flow parent's children come right after the job, before `self`.
        let (children_param, children_arg) = match &sig.children {
            Some(ty) => (quote!(__children: #ty,), quote!(__children,)),
            None => (TokenStream::new(), TokenStream::new()),
        };
        let label = quote!(::core::concat!(
            ::core::module_path!(),
            "::",
            ::core::stringify!(#self_ty),
            "::",
            ::core::stringify!(#method)
        ));
        let instance = quote! {
            ::core::option::Option::Some((#krate::__private::TypeInfo::of::<#self_ty>(), __queue_instance))
        };
        let record = record(
            config,
            job_name(config, job.as_ref(), &sig.payload),
            label,
            &make,
            instance,
        );
        helpers.extend(quote! {
            fn #make() -> #krate::__private::ErasedHandler {
                #krate::__private::ErasedHandler::new(
                    |job: #job_ty, #children_param __this: #krate::__private::Dep<#self_ty>, #(#dep_names: #dep_tys),*| async move {
                        __this.#method(job, #children_arg #(#dep_names),*).await
                    },
                )
            }
            #record
        });
    }
    quote! {
        #item
        const _: () = {
            fn __queue_instance() -> ::core::option::Option<#krate::__private::MakeInstance> {
                #[allow(unused_imports)]
                use #krate::__private::{ViaDefault as _, WithoutDefault as _};
                (&&#krate::__private::DefaultProbe::<#self_ty>::new()).maker()
            }
            #helpers
        };
    }
}

#[cfg(test)]
mod tests {
    use super::{group_limits, groups_field};
    use crate::args::Args;
    use crate::diagnostics::Errors;
    use crate::processor::args::ProcessorConfig;

    fn config(attr: proc_macro2::TokenStream) -> ProcessorConfig {
        let args: Args = syn::parse2(attr).expect("arguments parse");
        let mut errors = Errors::default();
        let config = ProcessorConfig::from_args(&args, &mut errors);
        errors
            .finish(config)
            .ok()
            .flatten()
            .expect("valid arguments")
    }

    #[test]
    fn group_limits_are_built_through_the_crate_path() {
        let limited = config(quote::quote!(
            "reports",
            groups(concurrency = 2, rate = "30/1m"),
            crate = "my::queues"
        ));
        let built = group_limits(&limited).to_string();
        assert!(
            built.contains(
                "-> my :: queues :: group :: GroupLimits { my :: queues :: group :: GroupLimits :: new () \
                 . concurrency (2u32) . rate (30u64 , :: core :: time :: Duration :: from_millis (60000u64)) }"
            ),
            "{built}"
        );
        assert!(groups_field(&limited)
            .to_string()
            .contains("__queue_group_limits"));

        let turns = config(quote::quote!("reports", groups));
        assert!(group_limits(&turns)
            .to_string()
            .contains("{ :: queue_core :: group :: GroupLimits :: new () }"));

        let plain = config(quote::quote!("reports", concurrency = 2));
        assert!(group_limits(&plain).is_empty());
        assert!(groups_field(&plain).to_string().contains("None"));
    }
}
