//! The path generated code uses to reach queue-core: `::queue_core`, or `crate = "..."`.

use proc_macro2::TokenStream;
use quote::quote;

pub(crate) fn crate_path(custom: Option<&syn::LitStr>) -> syn::Result<TokenStream> {
    match custom {
        None => Ok(quote!(::queue_core)),
        Some(lit) => {
            let path: syn::Path = lit.parse()?;
            Ok(quote!(#path))
        }
    }
}
