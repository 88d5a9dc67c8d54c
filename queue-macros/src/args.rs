//! The shared shape of our attribute arguments: a leading string literal (the queue
//! name) or queue type (`Email`, `crate::jobs::Email`), then `key = value`, `key(..)` or
//! bare `key` items, separated by commas.

use proc_macro2::Span;
use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{Ident, Lit, LitStr, Path, Token};

use crate::diagnostics::Errors;

/// The value of one item.
pub(crate) enum Value {
    /// `key`
    Flag,
    /// `key = literal`
    Lit(Lit),
    /// `key(a = 1, b = "x")`
    List(Vec<Item>),
    /// `key = ["a", "b"]`
    Strings(Vec<LitStr>),
}

/// One `key ...` item.
pub(crate) struct Item {
    pub(crate) key: Ident,
    pub(crate) value: Value,
}

/// Everything inside the attribute's parentheses.
pub(crate) struct Args {
    /// The leading string literal, if there was one.
    pub(crate) name: Option<LitStr>,
    /// The leading queue type, if there was one instead.
    pub(crate) queue_type: Option<Path>,
    pub(crate) items: Vec<Item>,
}

/// The queue an attribute names: by string, or by its declared type.
#[derive(Clone)]
pub(crate) enum QueueRef {
    Name(LitStr),
    Type(Box<syn::Type>),
}

impl QueueRef {
    /// The queue name as a `&'static str` expression.
    pub(crate) fn name_tokens(&self, krate: &TokenStream) -> TokenStream {
        match self {
            QueueRef::Name(lit) => quote!(#lit),
            QueueRef::Type(path) => quote!(<#path as #krate::__private::QueueType>::NAME),
        }
    }
}

/// A leading `Email` or `a::b::Email` (a type: its first letter is upper case, or it has
/// `::`), followed by a comma or the end.
fn peek_queue_type(input: ParseStream<'_>) -> Option<Path> {
    let fork = input.fork();
    let path: Path = fork.parse().ok()?;
    if !(fork.is_empty() || fork.peek(Token![,])) {
        return None;
    }
    let typed = path.segments.len() > 1
        || path.leading_colon.is_some()
        || path.segments.first().is_some_and(|s| {
            s.ident
                .to_string()
                .starts_with(|c: char| c.is_ascii_uppercase())
        });
    typed.then_some(path)
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut name = None;
        if let Some(path) = peek_queue_type(input) {
            let _: Path = input.parse()?;
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
            let items = parse_items(input)?;
            return Ok(Args {
                name: None,
                queue_type: Some(path),
                items,
            });
        }
        if input.peek(Lit) {
            match input.parse::<Lit>()? {
                Lit::Str(s) => name = Some(s),
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        "the queue name must be a string literal, e.g. \"email\"",
                    ))
                }
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        let items = parse_items(input)?;
        Ok(Args {
            name,
            queue_type: None,
            items,
        })
    }
}

fn parse_items(input: ParseStream<'_>) -> syn::Result<Vec<Item>> {
    let mut items = Vec::new();
    while !input.is_empty() {
        let key = input.call(Ident::parse_any)?;
        let value = if input.peek(Token![=]) && input.peek2(syn::token::Bracket) {
            input.parse::<Token![=]>()?;
            let inner;
            syn::bracketed!(inner in input);
            let strings = inner.parse_terminated(<LitStr as Parse>::parse, Token![,])?;
            Value::Strings(strings.into_iter().collect())
        } else if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Value::Lit(input.parse()?)
        } else if input.peek(syn::token::Paren) {
            let inner;
            syn::parenthesized!(inner in input);
            Value::List(parse_items(&inner)?)
        } else {
            Value::Flag
        };
        items.push(Item { key, value });
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(items)
}

impl Args {
    /// The queue, by name (checked as [`queue`](Self::queue) does) or by type.
    pub(crate) fn queue_ref(&self, errors: &mut Errors, attribute: &str) -> Option<QueueRef> {
        match &self.queue_type {
            Some(path) => Some(QueueRef::Type(Box::new(syn::Type::Path(syn::TypePath {
                qself: None,
                path: path.clone(),
            })))),
            None => self.queue(errors, attribute).map(QueueRef::Name),
        }
    }

    /// The queue name, checked: present, a string, not empty, no `:`.
    pub(crate) fn queue(&self, errors: &mut Errors, attribute: &str) -> Option<LitStr> {
        match &self.name {
            None => {
                let span = self
                    .items
                    .first()
                    .map_or_else(Span::call_site, |i| i.key.span());
                let bare = self
                    .items
                    .first()
                    .filter(|i| matches!(i.value, Value::Flag));
                match bare {
                    Some(item) => errors.at(
                        item.key.span(),
                        format!("the queue name must be a string literal: write #[{attribute}(\"{}\")], or name a queue type declared with #[job_queue]", item.key),
                    ),
                    None => errors.at(
                        span,
                        format!("missing queue name: write #[{attribute}(\"email\", ...)] with the queue as the first argument"),
                    ),
                }
                None
            }
            Some(lit) if lit.value().is_empty() => {
                errors.spanned(lit, "the queue name cannot be empty");
                None
            }
            Some(lit) if lit.value().contains(':') => {
                errors.spanned(
                    lit,
                    format!(
                        "queue names cannot contain ':' (BullMQ's key separator); use \"{}\"",
                        lit.value().replace(':', "-")
                    ),
                );
                None
            }
            Some(lit) => Some(lit.clone()),
        }
    }
}

/// Rejects a second use of one key.
pub(crate) fn reject_duplicates(items: &[Item], errors: &mut Errors) {
    for (i, item) in items.iter().enumerate() {
        if items[..i].iter().any(|earlier| earlier.key == item.key) {
            errors.spanned(
                &item.key,
                format!("duplicate option `{}`; give it once", item.key),
            );
        }
    }
}

/// An unknown key, with the valid ones listed.
pub(crate) fn unknown(item: &Item, valid: &[&str], errors: &mut Errors) {
    errors.spanned(
        &item.key,
        format!(
            "unknown option `{}`; valid options are: {}",
            item.key,
            valid.join(", ")
        ),
    );
}

/// `key = "string"`.
pub(crate) fn string(item: &Item, errors: &mut Errors) -> Option<LitStr> {
    match &item.value {
        Value::Lit(Lit::Str(s)) => Some(s.clone()),
        _ => {
            errors.spanned(
                &item.key,
                format!("`{}` takes a string, e.g. {} = \"...\"", item.key, item.key),
            );
            None
        }
    }
}

/// `key = "30s"` as milliseconds, within the range queue-core sets for `key`.
pub(crate) fn duration(item: &Item, errors: &mut Errors) -> Option<u64> {
    let lit = string(item, errors)?;
    let key = item.key.to_string();
    let checked = queue_vocab::parse_duration_millis(&lit.value()).and_then(|ms| {
        match queue_vocab::duration_range(&key) {
            Some((min, max)) if ms < min || ms > max => Err(format!(
                "`{key}` must be from {min}ms to {max}ms; `{}` is out of range",
                lit.value()
            )),
            _ => Ok(ms),
        }
    });
    match checked {
        Ok(ms) => Some(ms),
        Err(message) => {
            errors.spanned(&lit, message);
            None
        }
    }
}

/// `crate = "path::to::queue_core"`: the path generated code reaches queue-core by.
pub(crate) fn crate_option(item: &Item, errors: &mut Errors) -> Option<TokenStream> {
    let path = string(item, errors)?;
    crate::crate_path::crate_path(Some(&path))
        .map_err(|e| errors.push(e))
        .ok()
}

/// `key = N` with `N >= 1`.
pub(crate) fn positive_integer(item: &Item, errors: &mut Errors) -> Option<u64> {
    let message = format!(
        "`{}` takes a whole number of at least 1, e.g. {} = 5",
        item.key, item.key
    );
    match &item.value {
        Value::Lit(Lit::Int(int)) => match int.base10_parse::<u64>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                errors.spanned(int, message);
                None
            }
        },
        Value::Lit(other) => {
            errors.spanned(other, message);
            None
        }
        _ => {
            errors.spanned(&item.key, message);
            None
        }
    }
}

/// A bare `key` (or `key = true` / `key = false`).
pub(crate) fn flag(item: &Item, errors: &mut Errors) -> bool {
    match &item.value {
        Value::Flag => true,
        Value::Lit(Lit::Bool(b)) => b.value,
        _ => {
            errors.spanned(
                &item.key,
                format!(
                    "`{}` is a flag: write it alone, e.g. `{}`",
                    item.key, item.key
                ),
            );
            false
        }
    }
}
