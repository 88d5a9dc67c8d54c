//! What the engine hides about a job's data: it turns a `data` field that is missing
//! or not JSON into `null`, so a handler would fail with a misleading "invalid type:
//! null". When the engine hands us `null`, one HGET tells the three cases apart.

use super::connection::Connection;

/// How much of an unparsable payload a failure reason quotes.
const QUOTED_CHARS: usize = 40;

/// Why a job's data, which the engine read as `null`, is not usable; `None` when it
/// really is JSON `null` (or Redis cannot tell us now, and the handler decides).
pub(super) async fn problem(conn: &Connection, queue: &str, id: &str) -> Option<String> {
    let mut hget = redis::cmd("HGET");
    hget.arg(format!("{}:{id}", conn.queue_base(queue)))
        .arg("data");
    let raw: Option<String> = conn.query(&mut hget).await.ok()?;
    describe(raw.as_deref())
}

fn describe(raw: Option<&str>) -> Option<String> {
    let Some(raw) = raw else {
        return Some(
            "the job has no `data` field (was it written by another producer?)".to_owned(),
        );
    };
    let error = serde_json::from_str::<serde_json::Value>(raw).err()?;
    let quoted: String = raw.chars().take(QUOTED_CHARS).collect();
    let more = if raw.chars().count() > QUOTED_CHARS {
        "..."
    } else {
        ""
    };
    Some(format!(
        "the job's data is not JSON ({error}): {quoted:?}{more}"
    ))
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn missing_and_malformed_data_are_told_apart_from_null() {
        assert_eq!(describe(Some("null")), None);
        assert!(describe(None).unwrap().contains("no `data` field"));
        let reason = describe(Some("{not json")).unwrap();
        assert!(
            reason.starts_with("the job's data is not JSON (key must be a string"),
            "{reason}"
        );
        assert!(reason.ends_with("\"{not json\""), "{reason}");
        let long = "x".repeat(100);
        assert!(describe(Some(&long)).unwrap().ends_with("xxx\"..."));
    }
}
