//! Collecting every error of one attribute, and emitting them next to the user's item.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;

/// Errors found so far. `finish` must be called (it is the only way to get the value
/// out); dropping the collector unchecked is a bug in this crate, and panics, as serde's
/// `Ctxt` does, so that no error found is ever silently lost.
#[derive(Default)]
#[must_use = "call .finish(value) to emit the errors"]
pub(crate) struct Errors {
    combined: Option<syn::Error>,
    count: usize,
    checked: bool,
}

impl Drop for Errors {
    fn drop(&mut self) {
        if !self.checked && !std::thread::panicking() {
            panic!("queue-macros bug: an error collector was dropped without `finish`");
        }
    }
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
    pub(crate) fn finish<T>(mut self, value: T) -> syn::Result<T> {
        self.checked = true;
        match self.combined.take() {
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

#[cfg(test)]
mod tests {
    use super::Errors;

    #[test]
    fn finished_collectors_give_their_errors() {
        let mut errors = Errors::default();
        errors.at(proc_macro2::Span::call_site(), "one");
        errors.at(proc_macro2::Span::call_site(), "two");
        assert_eq!(errors.count(), 2);
        let combined = errors.finish(()).unwrap_err();
        assert_eq!(combined.into_iter().count(), 2);
        assert!(Errors::default().finish(7).is_ok());
    }

    #[test]
    #[should_panic(expected = "without `finish`")]
    fn an_unchecked_collector_is_a_bug_that_shows() {
        let mut errors = Errors::default();
        errors.at(proc_macro2::Span::call_site(), "lost");
        drop(errors);
    }
}
