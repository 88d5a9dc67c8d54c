//! How values read on a page: strings cut to a bound, times absolute and relative,
//! durations, sizes.

use std::time::{SystemTime, UNIX_EPOCH};

use maud::{html, Markup, Render};

use crate::text::clip;

/// A string cut to at most `.1` characters (an ellipsis says it was), escaped.
pub(crate) struct Clip<'a>(pub &'a str, pub usize);

impl Render for Clip<'_> {
    fn render_to(&self, buffer: &mut String) {
        clip(self.0, self.1).as_str().render_to(buffer);
    }
}

/// Now, in ms since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A moment, relative (`3 min ago`), with the absolute UTC time on hover and for
/// machines.
pub(crate) fn ago(ms: u64, now: u64) -> Markup {
    html! { time datetime=(iso(ms)) title=(time(ms)) { (relative(ms, now)) } }
}

/// A moment, absolute and relative: `2026-12-02 07:15:00 UTC (3 min ago)`.
pub(crate) fn at(ms: u64, now: u64) -> Markup {
    html! { time datetime=(iso(ms)) { (time(ms)) } " " span.muted { "(" (relative(ms, now)) ")" } }
}

/// `3 min ago`, `in 20 s`, `just now`.
pub(crate) fn relative(ms: u64, now: u64) -> String {
    if ms.abs_diff(now) < 1_000 {
        return "just now".to_owned();
    }
    if ms > now {
        format!("in {}", duration(ms - now))
    } else {
        format!("{} ago", duration(now - ms))
    }
}

/// A span of milliseconds in the two largest units: `850 ms`, `4.2 s`, `3 min 12 s`,
/// `2 h 5 min`, `3 d 4 h`.
pub(crate) fn duration(ms: u64) -> String {
    let s = ms / 1_000;
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..10_000 => format!("{}.{} s", s, ms % 1_000 / 100),
        10_000..60_000 => format!("{s} s"),
        60_000..3_600_000 => two_units(s / 60, "min", s % 60, "s"),
        3_600_000..86_400_000 => two_units(s / 3_600, "h", s % 3_600 / 60, "min"),
        _ => two_units(s / 86_400, "d", s % 86_400 / 3_600, "h"),
    }
}

/// A duration in whole milliseconds (saturating), for [`duration`].
pub(crate) fn millis(d: &std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `3 min 12 s`, or `3 min` when the smaller unit is zero.
fn two_units(big: u64, big_unit: &str, small: u64, small_unit: &str) -> String {
    if small == 0 {
        format!("{big} {big_unit}")
    } else {
        format!("{big} {big_unit} {small} {small_unit}")
    }
}

/// Bytes for a person: `812 B`, `3.4 MB`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Milliseconds since the epoch as a UTC time, to the second.
pub(crate) fn time(ms: u64) -> String {
    let (date, rem) = date_and_seconds(ms);
    format!(
        "{date} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Milliseconds since the epoch as ISO 8601 (`datetime` attributes).
fn iso(ms: u64) -> String {
    let (date, rem) = date_and_seconds(ms);
    format!(
        "{date}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn date_and_seconds(ms: u64) -> (String, u64) {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    (format!("{year:04}-{month:02}-{day:02}"), rem)
}

/// Days since 1970-01-01 as a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped_and_long_strings_cut() {
        let rendered = html! { (Clip(r#"<script>alert("x")</script>&'"#, 100)) }.into_string();
        assert_eq!(
            rendered,
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;'"
        );
        assert_eq!(html! { (Clip("héllo wörld", 5)) }.into_string(), "héllo…");
    }

    #[test]
    fn times_are_utc_dates_and_relative() {
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(time(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(time(1_798_761_599_000), "2026-12-31 23:59:59 UTC");
        assert_eq!(iso(1_798_761_599_000), "2026-12-31T23:59:59Z");
        assert_eq!(relative(10_000, 190_000), "3 min ago");
        assert_eq!(relative(190_000, 10_000), "in 3 min");
        assert_eq!(relative(10_000, 10_500), "just now");
    }

    #[test]
    fn durations_and_sizes_read_in_two_units() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(4_250), "4.2 s");
        assert_eq!(duration(192_000), "3 min 12 s");
        assert_eq!(duration(7_500_000), "2 h 5 min");
        assert_eq!(duration(3_600_000), "1 h");
        assert_eq!(duration(273_600_000), "3 d 4 h");
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(3_565_158), "3.4 MB");
    }
}
