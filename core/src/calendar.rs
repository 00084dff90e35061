//! Dates and times as text, shared by the formats (Avro's logical types) and the connectors
//! that read databases: days since the epoch ↔ `YYYY-MM-DD`, time of day ↔ `HH:MM:SS.ffffff`,
//! instants ↔ RFC 3339 in UTC (`…Z`). Proleptic Gregorian calendar, no time zones beyond UTC
//! (a local timestamp is written without the `Z`); parsing also takes an offset.
//!
//! The arithmetic is our own, not a date library's, on purpose: databases keep dates far
//! outside the years the maintained libraries represent (`jiff` and `time` stop at ±9999, or
//! ±999 999 with `time`'s large dates), while PostgreSQL's dates run to 5 874 897 AD — a
//! replication must carry them as they are. Any `i64` of days works here (Howard Hinnant's
//! `days_from_civil`, exact on the proleptic calendar); instants in microseconds since the
//! epoch reach 294 247 AD (PostgreSQL's timestamps: 294 276 AD), and one past that is not
//! parsed ([`parse_instant`] says `None`) rather than wrapped.

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `(year, month, day)` of `days` since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since 1970-01-01 of a date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The UTC time `ms` (milliseconds since the epoch) as `pattern` says: `%Y %m %d %H %M %S`
/// (`%%` a percent sign), the rest as it is — `format(ms, "%Y%m%dT%H%M%SZ")`.
pub fn format(ms: i64, pattern: &str) -> String {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let tod = secs.rem_euclid(86_400);
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&format!("{y:04}")),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('H') => out.push_str(&format!("{:02}", tod / 3600)),
            Some('M') => out.push_str(&format!("{:02}", tod / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", tod % 60)),
            _ => out.push('%'),
        }
    }
    out
}

/// Whether `pattern` uses only the fields [`format()`] knows; the unknown one otherwise.
pub fn check_format(pattern: &str) -> Result<(), String> {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some('Y' | 'm' | 'd' | 'H' | 'M' | 'S' | '%') => {}
                other => {
                    return Err(format!(
                        "`%{}` is not a known format (%Y %m %d %H %M %S)",
                        other.map(String::from).unwrap_or_default()
                    ))
                }
            }
        }
    }
    Ok(())
}

/// `YYYY-MM-DD`.
pub fn date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `HH:MM:SS` with `digits` fraction digits (3 or 6) of `units` (ms or µs) since midnight.
pub fn time_of_day(units: i64, per_second: i64, digits: usize) -> String {
    let secs = units.div_euclid(per_second);
    let frac = units.rem_euclid(per_second);
    format!(
        "{:02}:{:02}:{:02}.{frac:0digits$}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// RFC 3339 of `units` since the epoch (`per_second` units a second, `digits` fraction digits),
/// ending in `Z` when `utc`.
pub fn instant(units: i64, per_second: i64, digits: usize, utc: bool) -> String {
    let secs = units.div_euclid(per_second);
    let frac = units.rem_euclid(per_second);
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    format!(
        "{}T{:02}:{:02}:{:02}.{frac:0digits$}{}",
        date(days),
        tod / 3600,
        tod / 60 % 60,
        tod % 60,
        if utc { "Z" } else { "" }
    )
}

/// Parses `YYYY-MM-DD` into days since the epoch.
pub fn parse_date(s: &str) -> Option<i64> {
    let mut it = s.splitn(3, '-');
    let (y, m, d) = (it.next()?, it.next()?, it.next()?);
    let (y, m, d): (i64, u32, u32) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then(|| days_from_civil(y, m, d))
}

/// Parses `HH:MM:SS[.fraction]` into units (`per_second` a second) since midnight.
pub fn parse_time(s: &str, per_second: i64) -> Option<i64> {
    let (hms, frac) = s.split_once('.').unwrap_or((s, ""));
    let mut it = hms.splitn(3, ':');
    let h: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let sec: i64 = it.next().unwrap_or("0").parse().ok()?;
    if h > 23 || m > 59 || sec > 60 {
        return None;
    }
    Some((h * 3600 + m * 60 + sec) * per_second + fraction(frac, per_second)?)
}

/// `digits` of a fraction of a second as units (`per_second` a second); extra digits cut.
fn fraction(digits: &str, per_second: i64) -> Option<i64> {
    if digits.is_empty() {
        return Some(0);
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let width = per_second.ilog10() as usize;
    let mut padded: String = digits.chars().take(width).collect();
    while padded.len() < width {
        padded.push('0');
    }
    padded.parse().ok()
}

/// Parses RFC 3339 (`YYYY-MM-DDTHH:MM:SS[.f](Z|±HH:MM)`, or without an offset: UTC) into
/// units since the epoch.
pub fn parse_instant(s: &str, per_second: i64) -> Option<i64> {
    let (d, rest) = s.split_once(['T', 't', ' '])?;
    let days = parse_date(d)?;
    let (clock, offset_secs) = if let Some(c) = rest.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let (c, off) = rest.split_at(i);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let (oh, om) = off[1..].split_once(':').unwrap_or((&off[1..], "0"));
        let (oh, om): (i64, i64) = (oh.parse().ok()?, om.parse().ok()?);
        (c, sign * (oh * 3600 + om * 60))
    } else {
        (rest, 0)
    };
    let tod = parse_time(clock, per_second)?;
    days.checked_mul(86_400)?
        .checked_sub(offset_secs)?
        .checked_mul(per_second)?
        .checked_add(tod)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_past_the_libraries_range_round_trip() {
        // PostgreSQL's largest date.
        let last = parse_date("5874897-12-31").unwrap();
        assert_eq!(date(last), "5874897-12-31");
        let ts = parse_instant("200000-12-31T23:59:59.999999Z", 1_000_000).unwrap();
        assert_eq!(
            instant(ts, 1_000_000, 6, true),
            "200000-12-31T23:59:59.999999Z"
        );
        // Past what microseconds since the epoch hold: not parsed, never wrapped.
        assert_eq!(
            parse_instant("294276-12-31T23:59:59.999999Z", 1_000_000),
            None
        );
        assert_eq!(date(days_from_civil(-4713, 11, 24)), "-4713-11-24");
    }

    #[test]
    fn times_format_by_pattern() {
        // 2024-03-01T10:05:07.250Z
        let ms = 1_709_287_507_250;
        assert_eq!(format(ms, "%Y%m%dT%H%M%SZ"), "20240301T100507Z");
        assert_eq!(format(ms, "dt=%Y-%m-%d/%%"), "dt=2024-03-01/%");
        assert!(check_format("%Y-%m").is_ok());
        assert!(check_format("%q").unwrap_err().contains("%q"));
    }

    #[test]
    fn dates_round_trip_across_eras() {
        for days in [-719_468, -1, 0, 1, 10_957, 19_723, 2_932_896] {
            assert_eq!(parse_date(&date(days)), Some(days), "{}", date(days));
        }
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(19_723), "2024-01-01");
        assert_eq!(date(-1), "1969-12-31");
        assert_eq!(parse_date("2024-02-30x"), None);
        assert_eq!(parse_date("2024-13-01"), None);
    }

    #[test]
    fn instants_are_rfc3339_in_utc() {
        assert_eq!(instant(0, 1000, 3, true), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            instant(1_700_000_000_123, 1000, 3, true),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(
            instant(-1, 1_000_000, 6, false),
            "1969-12-31T23:59:59.999999"
        );
        assert_eq!(
            parse_instant("2023-11-14T22:13:20.123Z", 1000),
            Some(1_700_000_000_123)
        );
        assert_eq!(
            parse_instant("2023-11-15T00:13:20.123+02:00", 1000),
            Some(1_700_000_000_123)
        );
        assert_eq!(
            parse_instant("1969-12-31T23:59:59.999999", 1_000_000),
            Some(-1)
        );
        assert_eq!(parse_instant("yesterday", 1000), None);
    }

    #[test]
    fn times_of_day() {
        assert_eq!(time_of_day(3_723_004, 1000, 3), "01:02:03.004");
        assert_eq!(parse_time("01:02:03.004", 1000), Some(3_723_004));
        assert_eq!(
            parse_time("01:02:03.0045678", 1_000_000),
            Some(3_723_004_567)
        );
        assert_eq!(parse_time("25:00:00", 1000), None);
    }
}
