//! Time: instants are [`EpochMillis`] everywhere in the domain; this type owns every conversion
//! to seconds (TTLs, SQS delays) and to ISO 8601 text (responses).

use serde::{Deserialize, Serialize};
use std::time::Duration;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::OffsetDateTime;

/// Milliseconds since 1970-01-01T00:00:00Z. Stored and sent as a plain integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EpochMillis(pub i64);

impl EpochMillis {
    pub const fn from_secs(secs: i64) -> Self {
        Self(secs.saturating_mul(1000))
    }

    pub fn from_datetime(at: OffsetDateTime) -> Self {
        Self((at.unix_timestamp_nanos() / 1_000_000) as i64)
    }

    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// Whole seconds, rounded down (a DynamoDB TTL, an SQS delay).
    pub const fn as_secs(self) -> i64 {
        self.0.div_euclid(1000)
    }

    pub const fn plus_secs(self, secs: i64) -> Self {
        Self(self.0.saturating_add(secs.saturating_mul(1000)))
    }

    pub fn plus(self, by: Duration) -> Self {
        Self(self.0.saturating_add(i64::try_from(by.as_millis()).unwrap_or(i64::MAX)))
    }

    /// Time from `self` until `later`; zero if `later` is not after `self`.
    pub fn until(self, later: EpochMillis) -> Duration {
        Duration::from_millis(u64::try_from(later.0.saturating_sub(self.0)).unwrap_or(0))
    }

    /// `2026-11-22T14:17:20.123Z`.
    pub fn iso8601(self) -> String {
        let at = OffsetDateTime::from_unix_timestamp_nanos(self.0 as i128 * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        at.format(format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"))
            .expect("a UTC timestamp always formats")
    }

    /// Parses an RFC 3339 timestamp.
    pub fn parse_iso8601(text: &str) -> Option<Self> {
        OffsetDateTime::parse(text, &Rfc3339).ok().map(Self::from_datetime)
    }
}

impl std::fmt::Display for EpochMillis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.iso8601())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn formats_and_parses_utc_with_millis() {
        assert_eq!(EpochMillis(0).iso8601(), "1970-01-01T00:00:00.000Z");
        assert_eq!(EpochMillis(1_795_357_040_123).iso8601(), "2026-11-22T14:17:20.123Z");
        assert_eq!(EpochMillis(1_795_357_040_123).to_string(), "2026-11-22T14:17:20.123Z");
        assert_eq!(
            EpochMillis::parse_iso8601("2026-11-22T14:17:20.123Z"),
            Some(EpochMillis(1_795_357_040_123))
        );
        assert_eq!(EpochMillis::parse_iso8601("yesterday"), None);
    }

    #[test]
    fn seconds_round_down_and_add_up() {
        assert_eq!(EpochMillis(1_999).as_secs(), 1);
        assert_eq!(EpochMillis(-1).as_secs(), -1, "before the epoch rounds toward the past");
        assert_eq!(EpochMillis(500).plus_secs(2), EpochMillis(2_500));
        assert_eq!(EpochMillis(500).plus(Duration::from_millis(1_250)), EpochMillis(1_750));
        assert_eq!(EpochMillis(500).plus(Duration::MAX), EpochMillis(i64::MAX), "saturates");
        assert_eq!(EpochMillis::from_secs(3), EpochMillis(3_000));
        assert_eq!(EpochMillis(1_000).until(EpochMillis(250)), Duration::ZERO);
        assert_eq!(EpochMillis(1_000).until(EpochMillis(3_500)), Duration::from_millis(2_500));
    }

    proptest! {
        #[test]
        fn seconds_round_trip(secs in -10_000_000_000i64..10_000_000_000) {
            prop_assert_eq!(EpochMillis::from_secs(secs).as_secs(), secs);
        }

        #[test]
        fn iso8601_round_trips(ms in 0i64..253_402_300_799_999) {
            let at = EpochMillis(ms);
            prop_assert_eq!(EpochMillis::parse_iso8601(&at.iso8601()), Some(at));
        }
    }
}
