//! Strings as the dashboard hands them on: cut to a bound, and percent-encoded for a
//! URL. Leaf helpers: the links (`base`), the problems and the views use them.

use std::fmt::Write as _;

/// `text` cut to at most `max` characters, with `…` when it was cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// `segment` for a URL path or query value: unreserved characters kept, the rest
/// percent-encoded.
pub(crate) fn url_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_strings_are_cut_and_segments_encoded() {
        assert_eq!(clip("héllo wörld", 5), "héllo…");
        assert_eq!(clip("short", 5), "short");
        assert_eq!(url_segment("welcome-42"), "welcome-42");
        assert_eq!(url_segment("a/b c?"), "a%2Fb%20c%3F");
    }
}
