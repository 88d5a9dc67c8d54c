//! `#[inject_queue]` on a struct of `#[queue("name")] field: Queue<T>` fields: the
//! NestJS service-with-`@InjectQueue` shape. In a crate that depends on `queue-axum`,
//! the struct is also an axum extractor ([`manifest`] finds out).

mod expand;
mod manifest;

use proc_macro2::TokenStream;
use syn::{Fields, ItemStruct, LitStr};

use crate::args::{self, Args, QueueRef};
use crate::diagnostics::{item_with_errors, Errors};
use crate::processor::signature::single_generic;

pub(crate) use manifest::AxumDependency;

/// One checked `#[queue("..")]` field.
pub(crate) struct QueueField {
    pub(crate) ident: syn::Ident,
    /// `#[queue("name")]`, or none: the field is `Queue<DeclaredQueue>`.
    pub(crate) queue: QueueRef,
    pub(crate) payload: syn::Type,
}

pub(crate) fn inject_queue(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let mut krate = quote::quote!(::queue_core);
    // `axum` forces the extractor, `axum = false` leaves it out; by default the crate's
    // dependencies decide.
    let mut axum = None;
    match syn::parse2::<Args>(attr) {
        Ok(args) => {
            if let Some(name) = &args.name {
                errors.spanned(
                    name,
                    "#[inject_queue] takes no queue name; put #[queue(\"name\")] on each field",
                );
            }
            args::reject_duplicates(&args.items, &mut errors);
            for item in &args.items {
                match item.key.to_string().as_str() {
                    "crate" => {
                        if let Some(path) = args::crate_option(item, &mut errors) {
                            krate = path;
                        }
                    }
                    "axum" if matches!(item.value, args::Value::Flag) => axum = Some(true),
                    "axum" => match &item.value {
                        args::Value::Lit(syn::Lit::Bool(b)) => axum = Some(b.value),
                        _ => errors.spanned(&item.key, "write `axum` or `axum = false`"),
                    },
                    _ => args::unknown(item, &["axum", "crate"], &mut errors),
                }
            }
        }
        Err(e) => errors.push(e),
    }
    let mut strct: ItemStruct = match syn::parse2(item.clone()) {
        Ok(s) => s,
        Err(_) => {
            let e = syn::Error::new_spanned(
                &item,
                "#[inject_queue] goes on a struct with named fields",
            );
            return item_with_errors(item, &e);
        }
    };
    let fields = queue_fields(&mut strct, &mut errors);
    // The struct with `#[queue]` removed is emitted even on error, so the IDE keeps working.
    let cleaned = quote::quote!(#strct);
    let axum = match axum {
        Some(true) => AxumDependency::Normal,
        Some(false) => AxumDependency::None,
        None => manifest::axum_dependency(),
    };
    match errors.finish(()) {
        Ok(()) => expand::expand(&krate, &strct, &fields, axum),
        Err(e) => item_with_errors(cleaned, &e),
    }
}

fn queue_fields(strct: &mut ItemStruct, errors: &mut Errors) -> Vec<QueueField> {
    if !strct.generics.params.is_empty() {
        errors.spanned(
            &strct.generics,
            "an #[inject_queue] struct cannot be generic",
        );
    }
    let Fields::Named(named) = &mut strct.fields else {
        errors.spanned(
            &strct.ident,
            "#[inject_queue] needs named fields: `#[queue(\"email\")] email: Queue<T>`",
        );
        return Vec::new();
    };
    let mut fields = Vec::new();
    for field in &mut named.named {
        let ident = field.ident.clone().expect("named field");
        let Some(index) = field.attrs.iter().position(|a| a.path().is_ident("queue")) else {
            // `Queue<Email>`: a declared queue, named by its type.
            match single_generic(&field.ty, "Queue") {
                Some(queue) => fields.push(QueueField {
                    ident,
                    queue: QueueRef::Type(Box::new(queue.clone())),
                    payload: queue.clone(),
                }),
                None => errors.spanned(&field.ty, format!("field `{ident}` must be a queue: `Queue<DeclaredQueue>`, or `Queue<Payload>` with #[queue(\"queue-name\")]")),
            }
            continue;
        };
        let attr = field.attrs.remove(index);
        let queue = match attr.parse_args::<LitStr>() {
            Ok(q) if q.value().is_empty() => {
                errors.spanned(&q, "the queue name cannot be empty");
                continue;
            }
            Ok(q) if q.value().contains(':') => {
                errors.spanned(
                    &q,
                    "queue names cannot contain ':' (BullMQ's key separator); use '-'",
                );
                continue;
            }
            Ok(q) => q,
            Err(_) => {
                errors.spanned(
                    &attr,
                    "write the queue as #[queue(\"email\")], with a string literal",
                );
                continue;
            }
        };
        match single_generic(&field.ty, "Queue") {
            Some(payload) => fields.push(QueueField {
                ident,
                queue: QueueRef::Name(queue),
                payload: payload.clone(),
            }),
            None => errors.spanned(
                &field.ty,
                "a #[queue(\"..\")] field must have type `Queue<YourPayload>`",
            ),
        }
    }
    fields
}
