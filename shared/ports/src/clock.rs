//! The clock port, so that expiry, leases and time-outs can be tested without sleeping.

use rp_domain::time::EpochMillis;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use time::OffsetDateTime;

pub trait Clock: Send + Sync {
    fn now(&self) -> OffsetDateTime;

    /// Seconds since the Unix epoch.
    fn epoch_secs(&self) -> i64 {
        self.now().unix_timestamp()
    }

    /// The instant, as the domain holds it.
    fn now_millis(&self) -> EpochMillis {
        EpochMillis::from_datetime(self.now())
    }
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A clock that only moves when told to; shared between clones.
#[derive(Debug, Clone)]
pub struct ManualClock {
    millis: Arc<AtomicI64>,
}

impl ManualClock {
    pub fn at(now: OffsetDateTime) -> Self {
        Self { millis: Arc::new(AtomicI64::new((now.unix_timestamp_nanos() / 1_000_000) as i64)) }
    }

    pub fn starting_now() -> Self {
        Self::at(OffsetDateTime::now_utc())
    }

    pub fn advance(&self, by: std::time::Duration) {
        self.millis.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        let millis = self.millis.load(Ordering::SeqCst);
        OffsetDateTime::from_unix_timestamp_nanos(millis as i128 * 1_000_000)
            .expect("a manual clock stays within the representable range")
    }
}
