//! Code generation for `#[inject_queue]`: the struct, `FromApp`, an inherent
//! `from_app`, and a `ProducerRecord` per field.

use proc_macro2::TokenStream;
use quote::quote;
use syn::ItemStruct;

use super::{AxumDependency, QueueField};
use crate::args::QueueRef;

/// Where the crate depends on queue-axum, the struct also extracts in axum handlers,
/// through it (in its tests only, for a dev-dependency).
pub(crate) fn expand(
    krate: &TokenStream,
    strct: &ItemStruct,
    fields: &[QueueField],
    axum: AxumDependency,
) -> TokenStream {
    let ident = &strct.ident;
    let names: Vec<_> = fields.iter().map(|f| &f.ident).collect();
    let queues: Vec<_> = fields.iter().map(|f| f.queue.name_tokens(krate)).collect();
    let payloads: Vec<_> = fields.iter().map(|f| &f.payload).collect();
    let declared: Vec<bool> = fields
        .iter()
        .map(|f| matches!(f.queue, QueueRef::Type(_)))
        .collect();
    let handles: Vec<TokenStream> = fields
        .iter()
        .map(|f| match &f.queue {
            QueueRef::Name(name) => quote!(app.queue(#name)?),
            QueueRef::Type(queue) => quote!(app.queue_of::<#queue>()?),
        })
        .collect();
    let extractor = match axum {
        AxumDependency::Normal => quote!(::queue_axum::__impl_from_request_parts!(#ident);),
        AxumDependency::Dev => {
            quote!(#[cfg(test)] ::queue_axum::__impl_from_request_parts!(#ident);)
        }
        AxumDependency::None => TokenStream::new(),
    };
    quote! {
        #strct
        #extractor

        impl #krate::__private::FromApp for #ident {
            fn from_app(app: &#krate::__private::QueueApp) -> #krate::__private::Result<Self> {
                ::core::result::Result::Ok(Self {
                    #(#names: #handles,)*
                })
            }
        }

        impl #ident {
            /// Builds this service's queue handles from the app.
            #[allow(dead_code)]
            pub fn from_app(app: &#krate::__private::QueueApp) -> #krate::__private::Result<Self> {
                <Self as #krate::__private::FromApp>::from_app(app)
            }
        }

        const _: () = {
            #(
                #krate::__private::inventory::submit! {
                    #krate::__private::ProducerRecord {
                        queue: #queues,
                        payload: #krate::__private::TypeInfo::of::<#payloads>(),
                        declared: #declared,
                        label: ::core::concat!(::core::stringify!(#ident), ".", ::core::stringify!(#names)),
                    }
                }
            )*
        };
    }
}
