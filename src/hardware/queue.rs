//! The order of sessions waiting for hardware: highest priority first,
//! then first come, first served. The first in line that fits is granted
//! when hardware is freed (a small request does not wait behind a large
//! one that cannot start yet).

use chrono::{DateTime, Utc};

/// One queued session.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub session: String,
    pub priority: i32,
    pub since: DateTime<Utc>,
}

/// `waiting` in the order the queue serves them.
pub fn in_line(mut waiting: Vec<Waiting>) -> Vec<Waiting> {
    waiting.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.since.cmp(&b.since))
            .then(a.session.cmp(&b.session))
    });
    waiting
}

/// 1 for the next in line.
pub fn position(line: &[Waiting], session: &str) -> Option<usize> {
    line.iter()
        .position(|w| w.session == session)
        .map(|i| i + 1)
}

/// "1st", "2nd", "3rd", "11th".
pub fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(session: &str, priority: i32, secs: i64) -> Waiting {
        Waiting {
            session: session.into(),
            priority,
            since: DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap(),
        }
    }

    #[test]
    fn priority_first_then_arrival() {
        let line = in_line(vec![w("c", 0, 3), w("a", 0, 1), w("b", 5, 2), w("d", 0, 1)]);
        let order: Vec<&str> = line.iter().map(|w| w.session.as_str()).collect();
        assert_eq!(order, ["b", "a", "d", "c"]);
        assert_eq!(position(&line, "a"), Some(2));
        assert_eq!(position(&line, "zz"), None);
    }

    #[test]
    fn ordinals_read_as_english() {
        let words: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal).into();
        assert_eq!(
            words,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"
            ]
        );
    }
}
