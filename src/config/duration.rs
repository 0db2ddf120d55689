//! Durations written the way Kubernetes users write them: Go's `time.ParseDuration` syntax.
//!
//! A duration is a sequence of decimal numbers, each with an optional fraction and a unit:
//! `500ms`, `10s`, `1.5s`, `5m`, `1h30m`, `.5h`. Units are `ns`, `us` (also `µs`, `μs`),
//! `ms`, `s`, `m`, `h`. A bare `0` is zero; any other number needs a unit. A leading `+` is
//! allowed; negative durations are refused, since no wavelet setting can be negative.
//! [`format`] prints the shortest form that [`parse`] reads back (`10m`, not Go's `10m0s`).

use std::fmt;
use std::time::Duration;

/// The units, longest spellings first so that `ms` is not read as `m` followed by `s`.
const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Go's limit: a `time.Duration` is an int64 of nanoseconds (about 292 years).
const MAX_NANOS: u128 = i64::MAX as u128;

/// What is wrong with a duration; `Display` repeats the input and says what is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// The input is empty (or only whitespace).
    Empty,
    /// The input starts with `-`.
    Negative(String),
    /// A number has no unit, e.g. `10`.
    MissingUnit(String),
    /// A unit that is not one of `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`.
    UnknownUnit { input: String, unit: String },
    /// Not a number where one was expected, e.g. `s`, `1.s5`, `abc`.
    Invalid(String),
    /// Longer than Go's maximum (about 292 years).
    TooLong(String),
}

const ACCEPTED: &str =
    "write a number followed by a unit (ns, us, ms, s, m, h), e.g. 500ms, 10s, 5m, 1h30m, or 0";

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => write!(f, "empty duration: {ACCEPTED}"),
            DurationError::Negative(s) => {
                write!(
                    f,
                    "invalid duration {s:?}: must not be negative; {ACCEPTED}"
                )
            }
            DurationError::MissingUnit(s) => {
                write!(f, "invalid duration {s:?}: missing unit; {ACCEPTED}")
            }
            DurationError::UnknownUnit { input, unit } => {
                write!(
                    f,
                    "invalid duration {input:?}: unknown unit {unit:?}; {ACCEPTED}"
                )
            }
            DurationError::Invalid(s) => write!(f, "invalid duration {s:?}: {ACCEPTED}"),
            DurationError::TooLong(s) => {
                write!(
                    f,
                    "invalid duration {s:?}: longer than the maximum of about 292 years"
                )
            }
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a non-negative Go duration (`500ms`, `10s`, `1h30m`, `1.5s`, `0`).
///
/// Surrounding whitespace is ignored (environment variables often carry a newline).
/// Fractions finer than a nanosecond are truncated, as Go does.
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let input = s.trim();
    let mut rest = input;
    if rest.is_empty() {
        return Err(DurationError::Empty);
    }
    if rest.starts_with('-') {
        return Err(DurationError::Negative(input.to_string()));
    }
    if let Some(unsigned) = rest.strip_prefix('+') {
        rest = unsigned;
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(DurationError::Invalid(input.to_string()));
    }

    let mut total: u128 = 0;
    while !rest.is_empty() {
        // The number: digits, optionally `.` and more digits; at least one digit in all.
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(f) => {
                let n = f.bytes().take_while(u8::is_ascii_digit).count();
                f.split_at(n)
            }
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(DurationError::Invalid(input.to_string()));
        }

        // The unit: everything up to the next digit or `.`.
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(input.to_string()));
        }
        let Some(&(_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(DurationError::UnknownUnit {
                input: input.to_string(),
                unit: unit.to_string(),
            });
        };

        let too_long = || DurationError::TooLong(input.to_string());
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| too_long())?
        };
        // Enough fraction digits for nanosecond precision of an hour; the rest truncate.
        let frac_digits = &frac_part[..frac_part.len().min(18)];
        let fraction: u128 = if frac_digits.is_empty() {
            0
        } else {
            let numerator: u128 = frac_digits.parse().map_err(|_| too_long())?;
            numerator * scale / 10u128.pow(frac_digits.len() as u32)
        };
        total = whole
            .checked_mul(scale)
            .and_then(|w| w.checked_add(fraction))
            .and_then(|v| v.checked_add(total))
            .filter(|&t| t <= MAX_NANOS)
            .ok_or_else(too_long)?;
        rest = after;
    }
    // MAX_NANOS fits in u64, so this conversion cannot fail.
    Ok(Duration::from_nanos(total as u64))
}

/// The shortest Go-style text for `d` that [`parse`] reads back: `0s`, `500ms`, `1.5s`,
/// `10m`, `1h30m`, `1h5s` (zero parts left out, unlike Go's `1h0m5s`).
#[cfg(test)]
pub(crate) fn format(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        let (value, unit) = if nanos >= 1_000_000 {
            (decimal(nanos, 1_000_000), "ms")
        } else if nanos >= 1_000 {
            (decimal(nanos, 1_000), "µs")
        } else {
            (nanos.to_string(), "ns")
        };
        return format!("{value}{unit}");
    }
    let secs = d.as_secs();
    let (hours, minutes, seconds) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    let sub = u128::from(d.subsec_nanos());
    if seconds > 0 || sub > 0 {
        let value = decimal(u128::from(seconds) * 1_000_000_000 + sub, 1_000_000_000);
        out.push_str(&format!("{value}s"));
    }
    out
}

/// `value / unit` as a decimal without trailing zeros: `decimal(1500, 1000)` is `1.5`.
#[cfg(test)]
fn decimal(value: u128, unit: u128) -> String {
    let (whole, rest) = (value / unit, value % unit);
    if rest == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let fraction = format!("{rest:0width$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn kubernetes_style_durations_parse() {
        assert_eq!(parse("500ms"), Ok(ms(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("2h45m30.5s"), Ok(Duration::from_millis(9_930_500)));
    }

    #[test]
    fn zero_needs_no_unit_but_other_numbers_do() {
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("+0"), Ok(Duration::ZERO));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("10"), Err(DurationError::MissingUnit("10".into())));
        assert_eq!(
            parse("1h30"),
            Err(DurationError::MissingUnit("1h30".into()))
        );
    }

    #[test]
    fn fractions_are_accepted_on_either_side_of_the_dot() {
        assert_eq!(parse("1.5s"), Ok(ms(1500)));
        assert_eq!(parse(".5s"), Ok(ms(500)));
        assert_eq!(parse("5.s"), Ok(Duration::from_secs(5)));
        assert_eq!(
            parse("0.1ns"),
            Ok(Duration::ZERO),
            "below a nanosecond truncates"
        );
        assert_eq!(parse("1.000000001s"), Ok(Duration::new(1, 1)));
        assert_eq!(parse(".s"), Err(DurationError::Invalid(".s".into())));
    }

    #[test]
    fn micro_and_nano_seconds_have_every_spelling_go_accepts() {
        for s in ["7us", "7µs", "7μs"] {
            assert_eq!(parse(s), Ok(Duration::from_micros(7)), "{s}");
        }
        assert_eq!(parse("7ns"), Ok(Duration::from_nanos(7)));
    }

    #[test]
    fn unknown_units_are_named_in_the_error() {
        let err = parse("5d").unwrap_err();
        assert_eq!(
            err,
            DurationError::UnknownUnit {
                input: "5d".into(),
                unit: "d".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "invalid duration \"5d\": unknown unit \"d\"; write a number followed by a unit (ns, us, ms, s, m, h), e.g. 500ms, 10s, 5m, 1h30m, or 0"
        );
        assert!(matches!(
            parse("5 s"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse("10S"),
            Err(DurationError::UnknownUnit { .. })
        ));
    }

    #[test]
    fn malformed_input_is_rejected_with_what_is_accepted() {
        assert_eq!(parse(""), Err(DurationError::Empty));
        assert_eq!(parse("  "), Err(DurationError::Empty));
        assert_eq!(parse("s"), Err(DurationError::Invalid("s".into())));
        assert_eq!(parse("+"), Err(DurationError::Invalid("+".into())));
        assert_eq!(parse("abc"), Err(DurationError::Invalid("abc".into())));
        assert!(parse("abc")
            .unwrap_err()
            .to_string()
            .contains("e.g. 500ms, 10s"));
    }

    #[test]
    fn negative_durations_are_refused() {
        assert_eq!(parse("-1s"), Err(DurationError::Negative("-1s".into())));
        assert!(parse("-1s")
            .unwrap_err()
            .to_string()
            .contains("must not be negative"));
    }

    #[test]
    fn durations_beyond_gos_int64_nanoseconds_are_refused() {
        assert_eq!(parse("2562047h"), Ok(Duration::from_secs(2_562_047 * 3600)));
        assert_eq!(
            parse("2562048h"),
            Err(DurationError::TooLong("2562048h".into()))
        );
        assert!(matches!(
            parse("99999999999999999999999999999999999999999h"),
            Err(DurationError::TooLong(_))
        ));
    }

    #[test]
    fn surrounding_whitespace_is_ignored() {
        assert_eq!(parse(" 10s\n"), Ok(Duration::from_secs(10)));
    }

    #[test]
    fn format_prints_the_short_form_without_zero_parts() {
        assert_eq!(format(Duration::ZERO), "0s");
        assert_eq!(format(Duration::from_secs(600)), "10m");
        assert_eq!(format(Duration::from_secs(1)), "1s");
        assert_eq!(format(ms(500)), "500ms");
        assert_eq!(format(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format(Duration::from_secs(3605)), "1h5s");
        assert_eq!(format(ms(1500)), "1.5s");
        assert_eq!(format(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(format(Duration::from_micros(7)), "7µs");
        assert_eq!(format(Duration::from_nanos(7)), "7ns");
        assert_eq!(format(Duration::new(61, 1)), "1m1.000000001s");
    }

    #[test]
    fn format_then_parse_gives_back_the_same_duration() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(999_999_999),
            ms(1),
            ms(2500),
            Duration::from_secs(59),
            Duration::from_secs(86_400 * 400 + 1),
            Duration::new(3661, 10),
        ] {
            assert_eq!(parse(&format(d)), Ok(d), "{}", format(d));
        }
    }
}
