//! Human-written durations such as "90s", "30m", "8h" or "1h30m15s".
//!
//! Only whole hours, minutes and seconds are supported, largest unit first,
//! each at most once, so every value has one obvious spelling.

use std::time::Duration;

const UNITS: [(char, u64); 3] = [('h', 3600), ('m', 60), ('s', 1)];

/// Parses "3s", "90m", "8h", "1h30m", "1h30m15s" (surrounding spaces allowed).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let text = s.trim();
    let bad = || {
        format!("invalid duration \"{s}\" (expected e.g. \"90s\", \"30m\", \"8h\" or \"1h30m\")")
    };
    if text.is_empty() {
        return Err(bad());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    // Index into UNITS of the next unit allowed; enforces h before m before s.
    let mut next_unit = 0;
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let Some(offset) = UNITS[next_unit..].iter().position(|(u, _)| *u == c) else {
            return Err(bad());
        };
        if digits.is_empty() {
            return Err(bad());
        }
        let unit_index = next_unit + offset;
        let value: u64 = digits.parse().map_err(|_| bad())?;
        let seconds = value.checked_mul(UNITS[unit_index].1).ok_or_else(bad)?;
        total = total.checked_add(seconds).ok_or_else(bad)?;
        digits.clear();
        next_unit = unit_index + 1;
    }
    if !digits.is_empty() {
        // A bare number like "90" is ambiguous; make the unit explicit.
        return Err(bad());
    }
    if total > MAX_DURATION.as_secs() {
        return Err(format!(
            "duration \"{s}\" is too long (at most {})",
            format_duration(MAX_DURATION)
        ));
    }
    Ok(Duration::from_secs(total))
}

/// The longest duration anything takes from outside (budgets, extensions,
/// timeouts): a year, far beyond any attempt, far below any overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Formats whole seconds the way `parse_duration` reads them: "1h30m", "45s",
/// "2h", "0s". Sub-second parts are dropped.
pub fn format_duration(d: Duration) -> String {
    let mut rest = d.as_secs();
    if rest == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    for (unit, size) in UNITS {
        let count = rest / size;
        rest %= size;
        if count > 0 {
            out.push_str(&count.to_string());
            out.push(unit);
        }
    }
    out
}

/// `#[serde(with = "crate::environment::duration::text")]` stores a
/// `Duration` as its human string ("1h30m") instead of `{secs, nanos}`.
pub mod text {
    use super::{format_duration, parse_duration};
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(deserializer)?;
        parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn parses_single_units() {
        assert_eq!(parse_duration("3s").unwrap(), secs(3));
        assert_eq!(parse_duration("90m").unwrap(), secs(5400));
        assert_eq!(parse_duration("8h").unwrap(), secs(8 * 3600));
        assert_eq!(parse_duration(" 45s ").unwrap(), secs(45));
    }

    #[test]
    fn parses_combinations() {
        assert_eq!(parse_duration("1h30m").unwrap(), secs(5400));
        assert_eq!(parse_duration("1h30m15s").unwrap(), secs(5415));
        assert_eq!(parse_duration("2h15s").unwrap(), secs(7215));
        assert_eq!(parse_duration("0s").unwrap(), secs(0));
    }

    #[test]
    fn rejects_bad_input() {
        for bad in [
            "",
            " ",
            "90",
            "h",
            "1x",
            "1.5h",
            "-1h",
            "1m1h",
            "1h1h",
            "1s30m",
            "1h 30m",
            "s5",
            "99999999999999999999s",
            "1d",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("invalid duration"), "{bad:?} gave {err}");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(format_duration(secs(0)), "0s");
        assert_eq!(format_duration(secs(45)), "45s");
        assert_eq!(format_duration(secs(7200)), "2h");
        assert_eq!(format_duration(secs(5400)), "1h30m");
        assert_eq!(format_duration(secs(5415)), "1h30m15s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s");
    }

    #[test]
    fn round_trips() {
        for n in [0, 1, 59, 60, 61, 3599, 3600, 3661, 115_200, 86_400 * 3 + 7] {
            let text = format_duration(secs(n));
            assert_eq!(parse_duration(&text).unwrap(), secs(n), "{text}");
        }
        for text in ["3s", "90m", "8h", "1h30m", "1h30m15s"] {
            let d = parse_duration(text).unwrap();
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
    }

    #[test]
    fn serde_text_helper() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Holder {
            #[serde(with = "super::text")]
            d: Duration,
        }
        let json = serde_json::to_string(&Holder { d: secs(5400) }).unwrap();
        assert_eq!(json, r#"{"d":"1h30m"}"#);
        let back: Holder = serde_json::from_str(&json).unwrap();
        assert_eq!(back.d, secs(5400));
        assert!(serde_json::from_str::<Holder>(r#"{"d":"soon"}"#).is_err());
    }
}
