//! Time as the API server writes it: RFC 3339 in UTC (`2026-11-22T03:14:34Z`, Events and
//! `restartAt`), `MicroTime` with six fractional digits (Leases), parsing both, and the
//! Unix clock. The one place for calendar arithmetic (Howard Hinnant's algorithms).

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch now (0 before it).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `2026-11-20T03:14:41Z` for a Unix time in seconds.
pub fn rfc3339(unix_seconds: u64) -> String {
    let (date, rem) = date_of(unix_seconds as i64);
    format!(
        "{date}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A `MicroTime`: UTC with exactly six fractional digits, as the API server requires of
/// Leases (`2026-11-22T03:14:41.136035Z`; without the fraction it answers 400).
pub fn micro_time(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (date, rem) = date_of(since.as_secs() as i64);
    format!(
        "{date}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        since.subsec_micros()
    )
}

/// Unix seconds of an RFC 3339 UTC timestamp (`2026-11-22T03:14:34Z`, fractions allowed
/// and ignored), as the API server and exec credential plugins write them.
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let text = text
        .strip_suffix('Z')
        .or_else(|| text.strip_suffix("+00:00"))?;
    let (date, time) = text.split_once('T')?;
    let time = time.split('.').next()?;
    let number = |s: &str, len: usize| -> Option<i64> {
        (s.len() == len && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let mut d = date.split('-');
    let (year, month, day) = (
        number(d.next()?, 4)?,
        number(d.next()?, 2)?,
        number(d.next()?, 2)?,
    );
    let mut t = time.split(':');
    let (hour, minute, second) = (
        number(t.next()?, 2)?,
        number(t.next()?, 2)?,
        number(t.next()?, 2)?,
    );
    if d.next().is_some()
        || t.next().is_some()
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    u64::try_from(days * 86_400 + hour * 3600 + minute * 60 + second).ok()
}

/// `YYYY-MM-DD` of a Unix time, and the seconds into that day.
fn date_of(unix_seconds: i64) -> (String, i64) {
    let (days, rem) = (
        unix_seconds.div_euclid(86_400),
        unix_seconds.rem_euclid(86_400),
    );
    let (year, month, day) = civil_from_days(days);
    (format!("{year:04}-{month:02}-{day:02}"), rem)
}

/// Days since 1970-01-01 to (year, month, day).
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

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_rfc3339_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_795_144_481), "2026-11-20T03:14:41Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn micro_time_has_six_fractional_digits_like_the_recordings() {
        let t = UNIX_EPOCH + Duration::new(1_795_317_281, 136_035_999);
        assert_eq!(micro_time(t), "2026-11-22T03:14:41.136035Z");
        assert_eq!(micro_time(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
    }

    #[test]
    fn both_forms_round_trip_through_the_parser() {
        for secs in [0, 951_782_400, 1_795_317_281, 4_102_444_800] {
            assert_eq!(parse_rfc3339(&rfc3339(secs)), Some(secs));
            let micro = micro_time(UNIX_EPOCH + Duration::from_secs(secs));
            assert_eq!(parse_rfc3339(&micro), Some(secs));
        }
    }

    #[test]
    fn what_is_not_rfc3339_in_utc_is_refused() {
        for text in [
            "",
            "2026-11-22",
            "2026-11-22T03:14:34",
            "2026-11-22T03:14:34+01:00",
            "2026-13-01T00:00:00Z",
            "26-11-22T03:14:34Z",
        ] {
            assert_eq!(parse_rfc3339(text), None, "{text}");
        }
    }
}
