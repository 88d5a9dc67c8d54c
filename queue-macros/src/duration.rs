//! Durations written as strings in attributes: `"500ms"`, `"30s"`, `"5m"`, `"1h"`.

/// Milliseconds, or a message saying what is accepted.
pub(crate) fn parse_millis(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration; write a whole number and a unit, e.g. \"30s\" or \"500ms\""))?;
    let factor = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => {
            return Err(format!(
                "`{text}` has no known unit; use ms, s, m or h, e.g. \"30s\""
            ))
        }
    };
    let millis = number
        .checked_mul(factor)
        .ok_or_else(|| format!("`{text}` is too long"))?;
    if millis == 0 {
        return Err("a duration must be longer than zero".to_owned());
    }
    Ok(millis)
}

#[cfg(test)]
mod tests {
    use super::parse_millis;

    #[test]
    fn units_and_mistakes() {
        assert_eq!(parse_millis("250ms"), Ok(250));
        assert_eq!(parse_millis("30s"), Ok(30_000));
        assert_eq!(parse_millis("2m"), Ok(120_000));
        assert_eq!(parse_millis("1h"), Ok(3_600_000));
        assert!(parse_millis("30").unwrap_err().contains("no known unit"));
        assert!(parse_millis("s").unwrap_err().contains("not a duration"));
        assert!(parse_millis("0s").unwrap_err().contains("longer than zero"));
    }
}
