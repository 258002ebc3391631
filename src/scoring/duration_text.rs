//! Short human renderings of durations for failure messages ("timeout after 1m30s").

use std::time::Duration;

/// `250ms`, `10s`, `1.5s`, `2m`, `1m30s`, `1h5m`: whole units only, no padding.
pub(crate) fn format_duration(duration: Duration) -> String {
    let total_ms = duration.as_millis();
    if total_ms < 1000 {
        return format!("{total_ms}ms");
    }
    let total_secs = duration.as_secs();
    let millis = total_ms % 1000;
    if total_secs < 60 && millis != 0 {
        // Sub-minute timeouts with a fraction are rare; keep the fraction exact.
        let fraction = format!("{millis:03}");
        return format!("{total_secs}.{}s", fraction.trim_end_matches('0'));
    }
    let (hours, minutes, secs) = (total_secs / 3600, total_secs / 60 % 60, total_secs % 60);
    let mut text = String::new();
    for (value, unit) in [(hours, "h"), (minutes, "m"), (secs, "s")] {
        if value != 0 {
            text.push_str(&format!("{value}{unit}"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_simply() {
        let cases = [
            (Duration::from_millis(0), "0ms"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(2050), "2.05s"),
            (Duration::from_secs(120), "2m"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3600 + 300), "1h5m"),
            (Duration::from_secs(7200 + 1), "2h1s"),
            (Duration::from_millis(60_500), "1m"),
        ];
        for (duration, expected) in cases {
            assert_eq!(format_duration(duration), expected, "{duration:?}");
        }
    }
}
