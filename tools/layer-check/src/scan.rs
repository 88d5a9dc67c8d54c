//! One source file read as the compiler's tokens: the modules it declares (a `mod x;`
//! or an inline `mod x { .. }`), the names each module defines or imports, and every
//! path that could name something of this crate, with its line.

use std::collections::BTreeSet;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// A module as one file (or an inline `mod` of it) declares it.
#[derive(Debug, Default)]
pub(crate) struct ModuleBody {
    /// `mod x;` lines: modules in files of their own.
    pub(crate) file_children: Vec<String>,
    /// `mod x { .. }`: modules inside this file.
    pub(crate) inline_children: Vec<(String, ModuleBody)>,
    /// Names of the items it defines (types, functions, constants, traits, macros).
    pub(crate) items: Vec<String>,
    /// Its `use` declarations, one per name brought in.
    pub(crate) uses: Vec<UseLeaf>,
    /// Paths written in its code (outside `use`), each as its segments.
    pub(crate) paths: Vec<Written>,
    /// Every identifier its code names (outside `use`): whether a re-exported name is
    /// also used here.
    pub(crate) idents: BTreeSet<String>,
}

/// One name a `use` declaration brings into a module.
#[derive(Debug, Clone)]
pub(crate) struct UseLeaf {
    /// The path as written, `self` of a group resolved (`a::{self}` is `a`).
    pub(crate) path: Vec<String>,
    /// The name it is known by here: the last segment, or what `as` says (`_`: none).
    pub(crate) name: Option<String>,
    /// A `*` import: every public name of `path`.
    pub(crate) glob: bool,
    /// `pub use` (of any reach): handed on to other modules, which is not an import of
    /// this one unless its code names it too.
    pub(crate) public: bool,
    pub(crate) line: usize,
}

/// A path in code.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    pub(crate) path: Vec<String>,
    pub(crate) line: usize,
}

/// Reads one file's tokens. Fails where the file is not Rust's tokens (an unclosed
/// string, say): the compiler would refuse it too.
pub(crate) fn scan_file(source: &str) -> Result<ModuleBody, String> {
    let tokens: TokenStream = source.parse().map_err(|e| format!("{e:?}"))?;
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut body = ModuleBody::default();
    scan_items(&tokens, &mut body);
    Ok(body)
}

const ITEM_KEYWORDS: [&str; 7] = ["struct", "enum", "union", "trait", "type", "fn", "static"];

/// The items of a module body: declarations at its own level, and the paths in
/// everything below them.
fn scan_items(tokens: &[TokenTree], body: &mut ModuleBody) {
    let mut i = 0;
    while i < tokens.len() {
        if is_cfg_test_at(tokens, i) {
            i = skip_item(tokens, i);
            continue;
        }
        match &tokens[i] {
            TokenTree::Ident(ident) if ident == "mod" => {
                let (Some(TokenTree::Ident(name)), next) = (tokens.get(i + 1), tokens.get(i + 2))
                else {
                    i += 1;
                    continue;
                };
                match next {
                    Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
                        let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                        let mut child = ModuleBody::default();
                        scan_items(&inner, &mut child);
                        body.inline_children.push((name.to_string(), child));
                        i += 3;
                    }
                    _ => {
                        body.file_children.push(name.to_string());
                        i += 2;
                    }
                }
            }
            TokenTree::Ident(ident) if ident == "use" => {
                let end = tokens[i + 1..]
                    .iter()
                    .position(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ';'))
                    .map_or(tokens.len(), |at| i + 1 + at);
                let line = ident.span().start().line;
                let first = body.uses.len();
                parse_use_tree(&tokens[i + 1..end], Vec::new(), line, &mut body.uses);
                if is_public(tokens, i) {
                    for leaf in &mut body.uses[first..] {
                        leaf.public = true;
                    }
                }
                i = end + 1;
            }
            TokenTree::Ident(ident) if ident == "macro_rules" => {
                if let Some(TokenTree::Ident(name)) = tokens.get(i + 2) {
                    body.items.push(name.to_string());
                }
                // Its body is scanned as any other: the paths it writes are this module's.
                i += 3;
            }
            TokenTree::Ident(ident) if ident == "const" => {
                if let Some(TokenTree::Ident(name)) = tokens.get(i + 1) {
                    if name != "fn" && name != "unsafe" && name != "async" {
                        body.items.push(name.to_string());
                    }
                }
                i += 1;
            }
            TokenTree::Ident(ident) if ITEM_KEYWORDS.iter().any(|k| ident == k) => {
                let mut at = i + 1;
                if matches!(tokens.get(at), Some(TokenTree::Ident(m)) if m == "mut") {
                    at += 1;
                }
                if let Some(TokenTree::Ident(name)) = tokens.get(at) {
                    body.items.push(name.to_string());
                }
                i += 1;
            }
            TokenTree::Group(_) if is_visibility(tokens, i) => i += 1,
            TokenTree::Group(group) => {
                // A body (a function's, an impl's, a struct's fields): paths only; its
                // `use` lines import for the body, and count as paths of this module.
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                scan_nested(&inner, body);
                i += 1;
            }
            TokenTree::Ident(ident) => {
                body.idents.insert(ident.to_string());
                i = scan_path_at(tokens, i, &mut body.paths);
            }
            _ => i += 1,
        }
    }
}

/// Whether the `use` at `tokens[at]` is `pub` or `pub(..)`.
fn is_public(tokens: &[TokenTree], at: usize) -> bool {
    let before = |back: usize| at.checked_sub(back).and_then(|i| tokens.get(i));
    let is_pub = |t: Option<&TokenTree>| matches!(t, Some(TokenTree::Ident(p)) if p == "pub");
    is_pub(before(1))
        || (matches!(before(1), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis)
            && is_pub(before(2)))
}

/// Whether `tokens[at]` is the `(..)` of `pub(crate)`, `pub(in a::b)`: where an item
/// is visible, not what it uses.
fn is_visibility(tokens: &[TokenTree], at: usize) -> bool {
    matches!(&tokens[at], TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis)
        && at > 0
        && matches!(&tokens[at - 1], TokenTree::Ident(p) if p == "pub")
}

/// Whether `tokens[at..]` is the attribute `#[cfg(test)]`: test code is no part of the
/// crate's structure (a unit test may use what its module may not).
fn is_cfg_test_at(tokens: &[TokenTree], at: usize) -> bool {
    let (Some(TokenTree::Punct(hash)), Some(TokenTree::Group(attr))) =
        (tokens.get(at), tokens.get(at + 1))
    else {
        return false;
    };
    if hash.as_char() != '#' || attr.delimiter() != Delimiter::Bracket {
        return false;
    }
    let inner: Vec<TokenTree> = attr.stream().into_iter().collect();
    matches!(
        (inner.first(), inner.get(1), inner.len()),
        (Some(TokenTree::Ident(cfg)), Some(TokenTree::Group(args)), 2)
            if cfg == "cfg" && args.stream().to_string() == "test"
    )
}

/// The index after the item whose attributes start at `tokens[at]`: past its `;`, or
/// past its body's braces.
fn skip_item(tokens: &[TokenTree], at: usize) -> usize {
    let mut i = at;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Punct(p) if p.as_char() == '#' => i += 2,
            TokenTree::Punct(p) if p.as_char() == ';' => return i + 1,
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Tokens below a module's own level: paths, and `use` lines inside bodies.
fn scan_nested(tokens: &[TokenTree], body: &mut ModuleBody) {
    let mut i = 0;
    while i < tokens.len() {
        if is_cfg_test_at(tokens, i) {
            i = skip_item(tokens, i);
            continue;
        }
        match &tokens[i] {
            TokenTree::Ident(ident) if ident == "use" => {
                let end = tokens[i + 1..]
                    .iter()
                    .position(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ';'))
                    .map_or(tokens.len(), |at| i + 1 + at);
                let mut leaves = Vec::new();
                parse_use_tree(
                    &tokens[i + 1..end],
                    Vec::new(),
                    ident.span().start().line,
                    &mut leaves,
                );
                body.paths.extend(leaves.into_iter().map(|leaf| Written {
                    path: leaf.path,
                    line: leaf.line,
                }));
                i = end + 1;
            }
            TokenTree::Group(_) if is_visibility(tokens, i) => i += 1,
            TokenTree::Group(group) => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                scan_nested(&inner, body);
                i += 1;
            }
            TokenTree::Ident(ident) => {
                body.idents.insert(ident.to_string());
                i = scan_path_at(tokens, i, &mut body.paths);
            }
            _ => i += 1,
        }
    }
}

/// Whether `tokens[at..]` starts with `::`.
fn path_sep_at(tokens: &[TokenTree], at: usize) -> bool {
    matches!(
        (tokens.get(at), tokens.get(at + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
    )
}

/// A path of two segments or more starting at `tokens[start]` (an identifier), kept
/// when it may name this crate's items; the index after it.
fn scan_path_at(tokens: &[TokenTree], start: usize, paths: &mut Vec<Written>) -> usize {
    let TokenTree::Ident(first) = &tokens[start] else {
        return start + 1;
    };
    // `$crate::..` is the crate's path as a macro's user sees it: not an import here.
    let in_macro =
        start > 0 && matches!(&tokens[start - 1], TokenTree::Punct(p) if p.as_char() == '$');
    let mut path = vec![first.to_string()];
    let mut at = start + 1;
    while path_sep_at(tokens, at) {
        match tokens.get(at + 2) {
            Some(TokenTree::Ident(next)) => {
                path.push(next.to_string());
                at += 3;
            }
            _ => break,
        }
    }
    if path.len() > 1 && !in_macro {
        paths.push(Written {
            path,
            line: first.span().start().line,
        });
    }
    at.max(start + 1)
}

/// Expands a `use` tree (the tokens after `use`, before `;`) into one leaf per name.
fn parse_use_tree(tokens: &[TokenTree], prefix: Vec<String>, line: usize, out: &mut Vec<UseLeaf>) {
    let mut path = prefix;
    let mut i = 0;
    // A leading `::` names an external crate.
    if path_sep_at(tokens, 0) {
        return;
    }
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Ident(ident) if ident == "as" => {
                let alias = match tokens.get(i + 1) {
                    Some(TokenTree::Ident(alias)) => Some(alias.to_string()),
                    _ => None,
                };
                let name = alias.filter(|a| a != "_");
                out.push(UseLeaf {
                    path,
                    name,
                    glob: false,
                    public: false,
                    line,
                });
                return;
            }
            TokenTree::Ident(ident) => {
                let segment = ident.to_string();
                // `a::{self}` names `a`.
                if segment != "self" || path.is_empty() {
                    path.push(segment);
                }
                i += 1;
                if path_sep_at(tokens, i) {
                    i += 2;
                    continue;
                }
                if matches!(tokens.get(i), Some(TokenTree::Ident(next)) if next == "as") {
                    continue;
                }
                let name = path.last().cloned();
                out.push(UseLeaf {
                    path,
                    name,
                    glob: false,
                    public: false,
                    line,
                });
                return;
            }
            TokenTree::Punct(p) if p.as_char() == '*' => {
                out.push(UseLeaf {
                    path,
                    name: None,
                    glob: true,
                    public: false,
                    line,
                });
                return;
            }
            TokenTree::Group(group) if group.delimiter() == Delimiter::Brace => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                for branch in
                    inner.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
                {
                    if !branch.is_empty() {
                        let line = match &branch[0] {
                            TokenTree::Ident(first) => first.span().start().line,
                            _ => line,
                        };
                        parse_use_tree(branch, path.clone(), line, out);
                    }
                }
                return;
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_trees_expand_to_one_leaf_per_name() {
        let body = scan_file(
            "use crate::{a::{self, B as C}, d::*};\nuse super::e;\nuse ::std::f;\nuse g::H as _;",
        )
        .unwrap();
        let leaves: Vec<(String, Option<String>, bool)> = body
            .uses
            .iter()
            .map(|u| (u.path.join("::"), u.name.clone(), u.glob))
            .collect();
        assert_eq!(
            leaves,
            [
                ("crate::a".to_owned(), Some("a".to_owned()), false),
                ("crate::a::B".to_owned(), Some("C".to_owned()), false),
                ("crate::d".to_owned(), None, true),
                ("super::e".to_owned(), Some("e".to_owned()), false),
                ("g::H".to_owned(), None, false),
            ]
        );
    }

    #[test]
    fn items_modules_and_paths_are_found_and_comments_skipped() {
        let body = scan_file(
            "// crate::commented::Out\n\
             /// See crate::doc::Link\n\
             pub(crate) struct S;\n\
             mod file_child;\n\
             mod inline { pub fn f() {} }\n\
             fn g() { let _ = crate::x::y(); let _ = \"crate::in::string\"; }\n\
             macro_rules! m { () => { $crate::z::W } }\n\
             pub const N: usize = 1;\n\
             pub(in crate::vis) fn h() {}\n\
             #[cfg(test)]\n\
             mod tests { use crate::only::InTests; }",
        )
        .unwrap();
        assert_eq!(body.items, ["S", "g", "m", "N", "h"]);
        assert!(body.inline_children.iter().all(|(name, _)| name != "tests"));
        assert_eq!(body.file_children, ["file_child"]);
        assert_eq!(body.inline_children[0].0, "inline");
        assert_eq!(body.inline_children[0].1.items, ["f"]);
        let paths: Vec<String> = body.paths.iter().map(|p| p.path.join("::")).collect();
        assert_eq!(paths, ["crate::x::y"]);
        assert_eq!(body.paths[0].line, 6);
    }
}
