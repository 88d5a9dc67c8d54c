//! `#[processor]`: parse, validate, expand, on an `async fn` or on an `impl` block.

mod args;
mod expand;
pub(crate) mod signature;

use proc_macro2::TokenStream;
use syn::{ImplItem, Item, LitStr};

use self::args::ProcessorConfig;
use self::expand::JobMethod;
use crate::args::{Args, QueueRef};
use crate::diagnostics::{item_with_errors, Errors};

pub(crate) fn processor(attr: TokenStream, item: TokenStream) -> TokenStream {
    let parsed: syn::Result<Item> = syn::parse2(item.clone());
    let mut errors = Errors::default();
    let config = match syn::parse2::<Args>(attr) {
        Ok(args) => ProcessorConfig::from_args(&args, &mut errors),
        Err(e) => {
            errors.push(e);
            None
        }
    };
    // On error, the item is re-emitted as the user wrote it, except that an impl
    // block's #[job] attributes are gone: left on, each would report that it stands
    // outside a #[processor] impl, burying the real mistake.
    let mut cleaned: Option<TokenStream> = None;
    let expanded = match parsed {
        Ok(Item::Fn(item_fn)) => {
            let batch = config.as_ref().is_some_and(|c| c.batch_written);
            if let Some(job) = config
                .as_ref()
                .filter(|c| c.batch_written)
                .and_then(|c| c.job.as_ref())
            {
                errors.spanned(
                    job,
                    "a batch handler takes every job name of its queue (of a declared queue, the job its payload declares); leave `job = ..` out",
                );
            }
            let sig = signature::check(&item_fn.sig, false, batch, &mut errors);
            match (config, sig) {
                (Some(config), Some(sig)) => Some(expand::on_fn(&config, &item_fn, &sig)),
                _ => None,
            }
        }
        Ok(Item::Impl(mut item_impl)) => {
            let typed = config
                .as_ref()
                .is_some_and(|c| matches!(c.queue, QueueRef::Type(_)));
            let methods = job_methods(&mut item_impl, typed, &mut errors);
            cleaned = Some(quote::ToTokens::to_token_stream(&item_impl));
            if config.as_ref().is_some_and(|c| c.batch_written) {
                errors.spanned(&item_impl.self_ty, "`batch(..)` goes on a processor fn, `async fn(batch: Batch<T>, ..) -> Result<BatchResult, JobError>`, not on an impl block");
            }
            if let Some(config) = config.as_ref().filter(|c| c.job.is_some()) {
                errors.spanned(config.job.as_ref(), "`job = ..` is for a processor fn; in an impl block, name each method's job with #[job(\"..\")]");
            }
            if item_impl.trait_.is_some() || !item_impl.generics.params.is_empty() {
                errors.spanned(
                    &item_impl.self_ty,
                    "#[processor] goes on a plain, non-generic `impl YourStruct { .. }` block",
                );
            }
            match config {
                Some(config) if !methods.is_empty() => {
                    Some(expand::on_impl(&config, &item_impl, &methods))
                }
                _ => None,
            }
        }
        Ok(other) => {
            errors.spanned(
                &other,
                "#[processor] goes on an `async fn` or on an `impl` block with #[job] methods",
            );
            None
        }
        Err(e) => {
            errors.push(e);
            None
        }
    };
    match errors.finish(expanded) {
        Ok(Some(tokens)) => tokens,
        Ok(None) => item,
        Err(e) => item_with_errors(cleaned.unwrap_or(item), &e),
    }
}

/// Finds `#[job("name")]` methods (`#[job]` in a declared queue's processor, `typed`),
/// removes the attribute, checks each signature.
fn job_methods(item: &mut syn::ItemImpl, typed: bool, errors: &mut Errors) -> Vec<JobMethod> {
    let mut methods = Vec::new();
    for impl_item in &mut item.items {
        let ImplItem::Fn(method) = impl_item else {
            continue;
        };
        let Some(index) = method.attrs.iter().position(|a| a.path().is_ident("job")) else {
            continue;
        };
        let attr = method.attrs.remove(index);
        let bare = matches!(attr.meta, syn::Meta::Path(_));
        // `Some(None)`: the name comes from the payload's declaration.
        let job = match (typed, bare) {
            (true, true) => Some(None),
            (true, false) => {
                errors.spanned(&attr, "in a processor of a declared queue, the job name comes from the payload's declaration: write #[job]");
                None
            }
            (false, true) => {
                errors.spanned(&attr, "write the job name as #[job(\"welcome\")] (a bare #[job] is for a processor of a declared queue: #[processor(Email)])");
                None
            }
            (false, false) => match attr.parse_args::<LitStr>() {
                Ok(job) if !job.value().is_empty() => Some(Some(job)),
                Ok(job) => {
                    errors.spanned(&job, "the job name cannot be empty");
                    None
                }
                Err(_) => {
                    errors.spanned(&attr, "write the job name as #[job(\"welcome\")]");
                    None
                }
            },
        };
        let sig = signature::check(&method.sig, true, false, errors);
        let job_ty = method.sig.inputs.iter().nth(1).and_then(|arg| match arg {
            syn::FnArg::Typed(typed) => Some((*typed.ty).clone()),
            syn::FnArg::Receiver(_) => None,
        });
        if let (Some(job), Some(sig), Some(job_ty)) = (job, sig, job_ty) {
            methods.push(JobMethod {
                job,
                method: method.sig.ident.clone(),
                sig,
                job_ty,
            });
        }
    }
    if methods.is_empty() && errors.count() == 0 {
        errors.spanned(
            &item.self_ty,
            "a #[processor] impl needs at least one method marked #[job(\"name\")]",
        );
    }
    methods
}
