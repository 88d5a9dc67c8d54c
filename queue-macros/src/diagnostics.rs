//! Collecting every error of one attribute, and emitting them next to the user's item.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;

/// Errors found so far; `finish` must be called (it is the only way to get the value out).
#[derive(Default)]
pub(crate) struct Errors {
    combined: Option<syn::Error>,
    count: usize,
}

impl Errors {
    /// How many errors were reported so far.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    pub(crate) fn push(&mut self, error: syn::Error) {
        self.count += 1;
        match &mut self.combined {
            Some(all) => all.combine(error),
            None => self.combined = Some(error),
        }
    }

    pub(crate) fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    pub(crate) fn spanned(&mut self, tokens: impl ToTokens, message: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// `Ok(value)` when nothing was reported.
    pub(crate) fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.combined {
            Some(error) => Err(error),
            None => Ok(value),
        }
    }
}

/// The user's item unchanged plus the errors, so that one mistake does not turn into
/// a cascade of "cannot find function" errors and the IDE keeps working.
pub(crate) fn item_with_errors(item: TokenStream, error: &syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    quote::quote! { #item #errors }
}
