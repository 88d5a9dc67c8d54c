//! Field checks for request bodies, each naming the field it refuses.

use chrono::NaiveDate;
use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

use super::ignorable::is_default_ignorable;
use super::ApiError;

/// The earliest birthday accepted.
pub(crate) const EARLIEST_BIRTHDAY: NaiveDate = match NaiveDate::from_ymd_opt(1900, 1, 1) {
    Some(day) => day,
    None => panic!("1900-01-01 is a date"),
};

/// Characters that show nothing or reorder text: zero-width spaces and joiners,
/// direction overrides, the soft hyphen, the byte-order mark, tag characters.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}')
}

/// A required string field: trimmed, NFC-normalised, non-empty, at most `max`
/// characters, without control or invisible characters.
pub(crate) fn string(body: &Value, field: &'static str, max: usize) -> Result<String, ApiError> {
    let raw = match body.get(field) {
        None | Some(Value::Null) => {
            return Err(ApiError::invalid(field, format!("`{field}` is required")))
        }
        Some(Value::String(s)) => s,
        Some(_) => {
            return Err(ApiError::invalid(
                field,
                format!("`{field}` must be a string"),
            ))
        }
    };
    let text: String = raw.trim().nfc().collect();
    if text.is_empty() {
        return Err(ApiError::invalid(
            field,
            format!("`{field}` cannot be empty"),
        ));
    }
    if text.chars().count() > max {
        return Err(ApiError::invalid(
            field,
            format!("`{field}` is longer than {max} characters"),
        ));
    }
    if text.chars().any(|c| c.is_control() || is_invisible(c)) {
        return Err(ApiError::invalid(
            field,
            format!("`{field}` contains control or invisible characters"),
        ));
    }
    Ok(text)
}

/// An email address, normalised so that one mailbox is one account: NFKC (full-width
/// `ａ` is `a`), lower case (the local part too: providers treat it so), and none of
/// Unicode's default-ignorable code points (variation selectors, fillers, joiners:
/// characters that show nothing and make look-alike addresses). One `@`, a local part
/// of at most 64 characters, a dotted domain of letters, digits and hyphens, and none of
/// the characters that separate or quote addresses (`,;<>()[]"\` and spaces).
pub(crate) fn email(body: &Value) -> Result<String, ApiError> {
    let refuse = |why: &str| ApiError::invalid("email", format!("not an email address: {why}"));
    let text = string(body, "email", 254)?;
    let email: String = text.nfkc().collect::<String>().to_lowercase();
    if text.chars().chain(email.chars()).any(is_default_ignorable) {
        return Err(refuse(
            "it contains a character that shows nothing (a variation selector, a filler, a joiner)",
        ));
    }
    if email
        .chars()
        .any(|c| c.is_whitespace() || ",;<>()[]\"\\".contains(c))
    {
        return Err(refuse(
            "it contains a space or one of , ; < > ( ) [ ] \" \\",
        ));
    }
    let Some((local, domain)) = email.split_once('@') else {
        return Err(refuse("it has no @"));
    };
    if local.is_empty() || local.chars().count() > 64 || domain.contains('@') {
        return Err(refuse(
            "the part before the @ must be 1 to 64 characters, and one @ only",
        ));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    let label_ok = |label: &&str| {
        !label.is_empty()
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_alphanumeric() || c == '-')
    };
    if labels.len() < 2 || !labels.iter().all(label_ok) {
        return Err(refuse(
            "the domain must be dotted names of letters, digits and hyphens",
        ));
    }
    Ok(email)
}

/// A `YYYY-MM-DD` date.
pub(crate) fn date(value: &str, field: &'static str) -> Result<NaiveDate, ApiError> {
    let refused = || {
        let value = queue_axum::quote(value);
        ApiError::invalid(field, format!("{value} is not a date; use YYYY-MM-DD"))
    };
    // chrono's `%Y` also takes signs and other numbers of digits (`+10000`, `-0999`),
    // and `%m` one digit: the shape is checked first.
    if !has_shape(value, "9999-99-99") {
        return Err(refused());
    }
    NaiveDate::parse_from_str(value, "%Y-%m-%d").map_err(|_| refused())
}

/// Whether `text` is `shape` with each `9` an ASCII digit: `"9999-99"` takes `2026-11`
/// and nothing else of its kind (no sign, no missing or extra digit).
pub(crate) fn has_shape(text: &str, shape: &str) -> bool {
    text.len() == shape.len()
        && text.bytes().zip(shape.bytes()).all(|(t, s)| match s {
            b'9' => t.is_ascii_digit(),
            _ => t == s,
        })
}

/// A birthday: a date from 1900-01-01 to `today`.
pub(crate) fn birthday(value: &str, today: NaiveDate) -> Result<NaiveDate, ApiError> {
    let day = date(value, "birthday")?;
    if day < EARLIEST_BIRTHDAY || day > today {
        return Err(ApiError::invalid(
            "birthday",
            format!(
                "{} is out of range: a birthday is from {EARLIEST_BIRTHDAY} to today ({today})",
                queue_axum::quote(value)
            ),
        ));
    }
    Ok(day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(e: ApiError) -> &'static str {
        match e {
            ApiError::Invalid { field, .. } => field,
            other => panic!("{other:?}"),
        }
    }

    fn email_of(text: &str) -> Result<String, ApiError> {
        email(&serde_json::json!({ "email": text }))
    }

    #[test]
    fn emails_are_normalised_and_hostile_ones_refused() {
        assert_eq!(email_of(" Ada@Example.COM ").unwrap(), "ada@example.com");
        // NFD and NFC forms of one address are one account; so are full-width letters.
        assert_eq!(
            email_of("jose\u{301}@example.com").unwrap(),
            email_of("jos\u{e9}@example.com").unwrap()
        );
        assert_eq!(
            email_of("\u{ff41}da3@\u{ff45}xample.com").unwrap(),
            "ada3@example.com"
        );
        for bad in [
            "ada",
            "ada@",
            "@x.io",
            "a b@x.io",
            "a@x",
            "a@@x.io",
            "a@x.io.",
            "a\u{0}b@x.io",
            "a\u{1b}[31m@x.io",
            "a\u{200b}@x.io",
            "a,b@x.io",
            "a;b@x.io",
            "a>b@x.io",
            "\"a\"@x.io",
            "a@-x.io",
            "a@x_y.io",
            "ada3\u{fe0f}@x.io",
            "\u{3164}@x.io",
            "a\u{ffa0}@x.io",
            "a@x\u{34f}.io",
        ] {
            assert_eq!(field_of(email_of(bad).unwrap_err()), "email", "{bad:?}");
        }
        assert_eq!(
            field_of(email(&serde_json::json!({})).unwrap_err()),
            "email"
        );
    }

    #[test]
    fn names_are_trimmed_before_their_length_is_checked() {
        let padded = format!("  {}  ", "a".repeat(200));
        assert_eq!(
            string(&serde_json::json!({ "name": padded }), "name", 200)
                .unwrap()
                .len(),
            200
        );
        let bidi = serde_json::json!({ "name": "Ada\u{202e}evil" });
        assert_eq!(field_of(string(&bidi, "name", 200).unwrap_err()), "name");
    }

    #[test]
    fn shapes_take_exactly_their_digits() {
        assert!(has_shape("2026-11", "9999-99"));
        for bad in [
            "+2026-1",
            "-999-01",
            "2026-1",
            "2026-001",
            "2026/11",
            "２０２６-11",
            "",
        ] {
            assert!(!has_shape(bad, "9999-99"), "{bad}");
        }
    }

    #[test]
    fn dates_and_birthdays_are_bounded() {
        let today = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        assert!(birthday("1990-02-28", today).is_ok());
        assert!(birthday("1900-01-01", today).is_ok());
        assert!(birthday("2026-12-01", today).is_ok());
        for bad in [
            "1990-02-30",
            "0000-07-04",
            "-0999-07-04",
            "+10000-07-04",
            "1899-12-31",
            "2026-12-02",
            "9999-07-04",
        ] {
            assert!(birthday(bad, today).is_err(), "{bad}");
        }
    }
}
