//! Timestamps for the fake: RFC 3339 in UTC with whole seconds (as the API server
//! writes `creationTimestamp`), and a strictly increasing variant so objects created in
//! sequence (pods) always sort by creation time.

use std::time::{SystemTime, UNIX_EPOCH};

/// A clock that never goes backwards and can hand out strictly increasing seconds.
#[derive(Debug, Default)]
pub struct Clock {
    last_issued: u64,
}

impl Clock {
    fn wall_seconds() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }

    /// Now (never earlier than a timestamp already handed out).
    pub fn now(&mut self) -> String {
        self.last_issued = self.last_issued.max(Self::wall_seconds());
        format_rfc3339(self.last_issued)
    }

    /// A timestamp strictly later than every one handed out before: runs ahead of the wall
    /// clock by a second per call within the same second.
    pub fn strictly_later(&mut self) -> String {
        self.last_issued = (self.last_issued + 1).max(Self::wall_seconds());
        format_rfc3339(self.last_issued)
    }

    /// Now with microseconds (`MicroTime`), for eviction bookkeeping.
    pub fn now_micros(&mut self) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let seconds = self.last_issued.max(now.as_secs());
        let rfc = format_rfc3339(seconds);
        format!("{}.{:06}Z", rfc.trim_end_matches('Z'), now.subsec_micros())
    }
}

/// `2026-11-22T03:12:36Z` for seconds since the Unix epoch.
pub fn format_rfc3339(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rem = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_seconds() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(1_795_317_280), "2026-11-22T03:14:40Z");
    }

    #[test]
    fn strictly_later_always_increases() {
        let mut clock = Clock::default();
        let a = clock.strictly_later();
        let b = clock.strictly_later();
        assert!(b > a);
        assert!(clock.now() >= b);
    }
}
