//! Text for times and scores, as the workspace shows them.

/// `h:mm:ss` (or `m:ss` under an hour); negative times read as 0.
pub fn clock(seconds: f64) -> String {
    let total = if seconds.is_finite() && seconds > 0.0 {
        seconds.floor() as u64
    } else {
        0
    };
    let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// `h:mm:ss` always (the big countdown keeps its width).
pub fn clock_hms(seconds: f64) -> String {
    let total = if seconds.is_finite() && seconds > 0.0 {
        seconds.floor() as u64
    } else {
        0
    };
    format!(
        "{}:{:02}:{:02}",
        total / 3600,
        (total / 60) % 60,
        total % 60
    )
}

/// A short human duration: `8h`, `2h 30m`, `15m`, `45s`.
pub fn human_duration(seconds: f64) -> String {
    let total = if seconds.is_finite() && seconds > 0.0 {
        seconds.round() as u64
    } else {
        0
    };
    let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
    match (h, m, s) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m {s}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h {m}m"),
    }
}

/// A raw metric value with its unit, with sensible precision.
pub fn raw(value: f64, unit: &str) -> String {
    let number = number(value);
    if unit.is_empty() {
        number
    } else {
        format!("{number} {unit}")
    }
}

/// Four significant-ish digits without exponent noise for everyday values.
pub fn number(value: f64) -> String {
    let a = value.abs();
    if !value.is_finite() {
        format!("{value}")
    } else if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{value:.0}")
    } else if a >= 100.0 {
        format!("{value:.1}")
    } else if a >= 1.0 {
        format!("{value:.2}")
    } else if a >= 0.001 {
        format!("{value:.3}")
    } else {
        format!("{value:.2e}")
    }
}

/// A normalized score: 0 is the starting solution, 1 the reference.
pub fn normalized(value: f64) -> String {
    format!("{value:.3}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks() {
        assert_eq!(clock(0.0), "0:00");
        assert_eq!(clock(32.9), "0:32");
        assert_eq!(clock(3600.0), "1:00:00");
        assert_eq!(clock(8.0 * 3600.0 - 1.0), "7:59:59");
        assert_eq!(clock(-5.0), "0:00");
        assert_eq!(clock_hms(299.0), "0:04:59");
    }

    #[test]
    fn durations_and_numbers() {
        assert_eq!(human_duration(8.0 * 3600.0), "8h");
        assert_eq!(human_duration(9000.0), "2h 30m");
        assert_eq!(human_duration(900.0), "15m");
        assert_eq!(human_duration(45.0), "45s");
        assert_eq!(raw(142.7, "ms"), "142.7 ms");
        assert_eq!(raw(2.3, "ms"), "2.30 ms");
        assert_eq!(raw(0.5, ""), "0.500");
        assert_eq!(normalized(0.4567), "0.457");
    }
}
