//! Field checks for request bodies, each naming the field it refuses.

use chrono::NaiveDate;
use serde_json::Value;

use super::ApiError;

/// A required, non-empty string field of at most `max` characters.
pub(crate) fn string(body: &Value, field: &'static str, max: usize) -> Result<String, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Err(ApiError::invalid(field, format!("`{field}` is required"))),
        Some(Value::String(s)) if s.trim().is_empty() => Err(ApiError::invalid(
            field,
            format!("`{field}` cannot be empty"),
        )),
        Some(Value::String(s)) if s.chars().count() > max => Err(ApiError::invalid(
            field,
            format!("`{field}` is longer than {max} characters"),
        )),
        Some(Value::String(s)) => Ok(s.trim().to_owned()),
        Some(_) => Err(ApiError::invalid(
            field,
            format!("`{field}` must be a string"),
        )),
    }
}

/// A plausible email address: one `@`, a local part, a dotted domain, no spaces.
pub(crate) fn email(body: &Value) -> Result<String, ApiError> {
    let email = string(body, "email", 254)?;
    let valid = match email.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.contains('@')
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !email.chars().any(char::is_whitespace)
        }
        None => false,
    };
    if valid {
        Ok(email.to_lowercase())
    } else {
        Err(ApiError::invalid(
            "email",
            format!("`{email}` is not an email address"),
        ))
    }
}

/// A `YYYY-MM-DD` date.
pub(crate) fn date(value: &str, field: &'static str) -> Result<NaiveDate, ApiError> {
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .map_err(|_| ApiError::invalid(field, format!("`{value}` is not a date; use YYYY-MM-DD")))
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

    #[test]
    fn emails_and_dates() {
        let ok = serde_json::json!({"email": "Ada@Example.com"});
        assert_eq!(email(&ok).unwrap(), "ada@example.com");
        for bad in [
            "ada", "ada@", "@x.io", "a b@x.io", "a@x", "a@@x.io", "a@x.io.",
        ] {
            assert_eq!(
                field_of(email(&serde_json::json!({ "email": bad })).unwrap_err()),
                "email",
                "{bad}"
            );
        }
        assert_eq!(
            field_of(email(&serde_json::json!({})).unwrap_err()),
            "email"
        );
        assert!(date("1990-02-30", "birthday").is_err());
        assert!(date("1990-02-28", "birthday").is_ok());
    }
}
