//! Timestamps: stored as epoch milliseconds, shown as ISO 8601 UTC with milliseconds.

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::OffsetDateTime;

/// `2026-11-22T14:17:20.123Z`.
pub fn iso8601(epoch_millis: i64) -> String {
    let at = OffsetDateTime::from_unix_timestamp_nanos(epoch_millis as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    at.format(format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"))
        .expect("a UTC timestamp always formats")
}

/// Parses an RFC 3339 timestamp into epoch milliseconds.
pub fn parse_iso8601(text: &str) -> Option<i64> {
    let at = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    Some((at.unix_timestamp_nanos() / 1_000_000) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_utc_with_millis() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_795_357_040_123), "2026-11-22T14:17:20.123Z");
        assert_eq!(parse_iso8601("2026-11-22T14:17:20.123Z"), Some(1_795_357_040_123));
        assert_eq!(parse_iso8601("yesterday"), None);
    }
}
