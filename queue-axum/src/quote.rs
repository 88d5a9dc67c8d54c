//! Quoting a client's text in an answer, bounded: an error that repeats the input whole
//! sends a megabyte back for a megabyte in, and puts it in every log that keeps the
//! answer.

/// The most characters of a client's text that [`quote`] keeps.
pub const MAX_QUOTED_CHARS: usize = 64;

/// `text` in backticks, for an error message that names what the client sent: at most
/// [`MAX_QUOTED_CHARS`] characters of it (then `…` and how long it was), control
/// characters escaped so that the message stays one line.
///
/// ```
/// use queue_axum::quote;
///
/// assert_eq!(quote("2026-13-01"), "`2026-13-01`");
/// let long = quote(&"9".repeat(1_000_000));
/// assert!(long.len() < 120 && long.ends_with("… (1000000 characters)"));
/// assert_eq!(quote("a\nb"), "`a\\nb`");
/// ```
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_QUOTED_CHARS) + 2);
    out.push('`');
    let mut chars = text.chars();
    for c in chars.by_ref().take(MAX_QUOTED_CHARS) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('`');
    if chars.next().is_some() {
        out.push_str(&format!("… ({} characters)", text.chars().count()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_quoted_whole_and_long_text_cut() {
        assert_eq!(quote(""), "``");
        let exact = "x".repeat(MAX_QUOTED_CHARS);
        assert_eq!(quote(&exact), format!("`{exact}`"));
        let over = "é".repeat(MAX_QUOTED_CHARS + 1);
        let quoted = quote(&over);
        assert!(quoted.starts_with(&format!("`{}`", "é".repeat(MAX_QUOTED_CHARS))));
        assert!(quoted.ends_with(&format!("… ({} characters)", MAX_QUOTED_CHARS + 1)));
        assert_eq!(quote("\u{1b}[31m"), "`\\u{1b}[31m`");
    }
}
