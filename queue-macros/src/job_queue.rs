//! `#[job_queue("email")]` on an enum whose variants are the queue's jobs:
//! `#[job("welcome", output = Delivery)] Welcome(WelcomeEmail)`. The contract producers
//! and processors share: each payload type gets its queue, job name and output.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::{Fields, Ident, ItemEnum, LitStr, Token, Type};

use crate::args::{self, Args};
use crate::diagnostics::{item_with_errors, Errors};

/// One checked job of the declaration.
struct Declared {
    variant: Ident,
    name: LitStr,
    payload: Type,
    output: Option<Type>,
}

pub(crate) fn job_queue(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let mut krate = quote!(::queue_core);
    let mut encrypted = false;
    let queue = match syn::parse2::<Args>(attr) {
        Ok(parsed) => {
            let queue = parsed.queue(&mut errors, "job_queue");
            args::reject_duplicates(&parsed.items, &mut errors);
            for option in &parsed.items {
                match option.key.to_string().as_str() {
                    "crate" => {
                        if let Some(path) = args::crate_option(option, &mut errors) {
                            krate = path;
                        }
                    }
                    "encrypted" => encrypted = args::flag(option, &mut errors),
                    _ if queue.is_none() => {}
                    _ => args::unknown(option, &["crate", "encrypted"], &mut errors),
                }
            }
            queue
        }
        Err(e) => {
            errors.push(e);
            None
        }
    };
    let mut item_enum: ItemEnum = match syn::parse2(item.clone()) {
        Ok(item_enum) => item_enum,
        Err(_) => {
            let e = syn::Error::new_spanned(
                &item,
                "#[job_queue(\"queue\")] goes on an enum whose variants are the queue's jobs: `#[job(\"welcome\")] Welcome(WelcomeEmail)`",
            );
            let _ = errors.finish(());
            return item_with_errors(item, &e);
        }
    };
    if !item_enum.generics.params.is_empty() {
        errors.spanned(
            &item_enum.generics,
            "a #[job_queue] enum cannot be generic: it names one queue",
        );
    }
    let jobs = declared_jobs(&mut item_enum, &mut errors);
    let queue_name = queue.as_ref().map(LitStr::value).unwrap_or_default();
    check_unique(&jobs, &queue_name, &mut errors);
    if item_enum.variants.is_empty() {
        errors.spanned(
            &item_enum.ident,
            "a queue declares at least one job: `#[job(\"welcome\")] Welcome(WelcomeEmail)`",
        );
    }
    match errors.finish(queue) {
        Ok(Some(queue)) => expand(&krate, &item_enum, &queue, &jobs, encrypted),
        Ok(None) => item,
        Err(e) => item_with_errors(quote!(#item_enum), &e),
    }
}

/// Every variant as a job; the `#[job(..)]` attributes are removed from the enum.
fn declared_jobs(item: &mut ItemEnum, errors: &mut Errors) -> Vec<Declared> {
    let mut jobs = Vec::new();
    for variant in &mut item.variants {
        let index = variant.attrs.iter().position(|a| a.path().is_ident("job"));
        let Some(index) = index else {
            errors.spanned(
                &variant.ident,
                format!(
                    "each variant of a #[job_queue] enum is a job: add #[job(\"{}\")] above it",
                    kebab(&variant.ident.to_string())
                ),
            );
            continue;
        };
        let attr = variant.attrs.remove(index);
        let parsed = attr.parse_args_with(|input: ParseStream<'_>| {
            let name: LitStr = input.parse()?;
            let mut output = None;
            while !input.is_empty() {
                input.parse::<Token![,]>()?;
                if input.is_empty() {
                    break;
                }
                let key: Ident = input.parse()?;
                if key != "output" {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("unknown option `{key}`; a job takes `output = Type`"),
                    ));
                }
                input.parse::<Token![=]>()?;
                output = Some(input.parse::<Type>()?);
            }
            Ok((name, output))
        });
        let (name, output) = match parsed {
            Ok(parsed) => parsed,
            Err(e) => {
                errors.push(syn::Error::new(
                    e.span(),
                    format!(
                        "{e}; write #[job(\"welcome\")] or #[job(\"welcome\", output = Delivery)]"
                    ),
                ));
                continue;
            }
        };
        if name.value().is_empty() {
            errors.spanned(&name, "the job name cannot be empty");
            continue;
        }
        let payload = match &variant.fields {
            Fields::Unnamed(fields) if fields.unnamed.len() == 1 => fields.unnamed[0].ty.clone(),
            _ => {
                errors.spanned(
                    &variant.fields,
                    format!(
                        "a job variant wraps its payload type, and only that: `{}(YourPayload)`",
                        variant.ident
                    ),
                );
                continue;
            }
        };
        jobs.push(Declared {
            variant: variant.ident.clone(),
            name,
            payload,
            output,
        });
    }
    jobs
}

/// One name per job and one job per payload type, within the queue.
fn check_unique(jobs: &[Declared], queue: &str, errors: &mut Errors) {
    let type_text = |ty: &Type| quote!(#ty).to_string().replace(' ', "");
    for (i, job) in jobs.iter().enumerate() {
        if let Some(first) = jobs[..i]
            .iter()
            .find(|j| j.name.value() == job.name.value())
        {
            errors.spanned(
                &job.name,
                format!(
                    "job `{}` is declared twice in queue `{queue}` (first by `{}`): give each job its own name",
                    job.name.value(),
                    first.variant
                ),
            );
        }
        let ty = type_text(&job.payload);
        if let Some(first) = jobs[..i].iter().find(|j| type_text(&j.payload) == ty) {
            errors.spanned(
                &job.payload,
                format!(
                    "`{ty}` is declared twice in queue `{queue}` (first as job `{}`): a payload type is one job; for a second job, wrap it in a type of its own",
                    first.name.value()
                ),
            );
        }
    }
}

fn expand(
    krate: &TokenStream,
    item: &ItemEnum,
    queue: &LitStr,
    jobs: &[Declared],
    encrypted: bool,
) -> TokenStream {
    let enum_name = &item.ident;
    let mut impls = TokenStream::new();
    for (index, job) in jobs.iter().enumerate() {
        let Declared {
            variant,
            name,
            payload,
            output,
        } = job;
        let output = output.clone().unwrap_or_else(|| syn::parse_quote!(()));
        let payload_check = quote_spanned! {payload.span()=>
            #krate::__private::assert_job_payload::<#payload>();
        };
        let output_check = quote_spanned! {output.span()=>
            #krate::__private::assert_job_output::<#output>();
        };
        let payload_schema = format_ident!("__queue_payload_schema_{}", index);
        let output_schema = format_ident!("__queue_output_schema_{}", index);
        let checks = format_ident!("__queue_checks_{}", index);
        impls.extend(quote! {
            impl #krate::__private::JobType for #payload {
                type Queue = #enum_name;
                const NAME: &'static str = #name;
                type Output = #output;
            }
            impl #krate::__private::JobOf<#enum_name> for #payload {}
            impl #krate::__private::OutputOf<#payload> for #output {}
            impl ::core::convert::From<#payload> for #enum_name {
                fn from(job: #payload) -> Self {
                    #enum_name::#variant(job)
                }
            }
            const _: () = {
                #[allow(dead_code)]
                fn #checks() {
                    #payload_check
                    #output_check
                }
                fn #payload_schema() -> ::core::option::Option<#krate::__private::serde_json::Value> {
                    #[allow(unused_imports)]
                    use #krate::__private::{NoSchema as _, WithSchema as _};
                    (&&#krate::__private::SchemaProbe::<#payload>::new()).schema()
                }
                fn #output_schema() -> ::core::option::Option<#krate::__private::serde_json::Value> {
                    #[allow(unused_imports)]
                    use #krate::__private::{NoSchema as _, WithSchema as _};
                    (&&#krate::__private::SchemaProbe::<#output>::new()).schema()
                }
                #krate::__private::inventory::submit! {
                    #krate::__private::JobTypeRecord {
                        queue: #queue,
                        name: #name,
                        payload: #krate::__private::TypeInfo::of::<#payload>(),
                        output: #krate::__private::TypeInfo::of::<#output>(),
                        payload_schema: #payload_schema,
                        output_schema: #output_schema,
                        label: ::core::concat!(
                            ::core::module_path!(), "::",
                            ::core::stringify!(#enum_name), "::",
                            ::core::stringify!(#variant)
                        ),
                        encrypted: #encrypted,
                    }
                }
            };
        });
    }
    quote! {
        // The variants hold payloads to name them; nothing needs to read them back.
        #[allow(dead_code)]
        #item
        impl #krate::__private::QueueType for #enum_name {
            const NAME: &'static str = #queue;
        }
        #impls
    }
}

/// `BirthdayGrant` -> `birthday-grant`, for a suggested job name.
fn kebab(ident: &str) -> String {
    let mut out = String::new();
    for (i, c) in ident.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}
