//! The dashboard's alert thresholds, read from the command line.

use crate::environment::duration::parse_duration;

/// Below this much budget left a live session gets an alert.
pub const BUDGET_LOW_S: f64 = 15.0 * 60.0;
/// A session holding a GPU it has not used for this long gets an alert.
pub const GPU_IDLE_S: f64 = 30.0 * 60.0;
/// This many invalid entries in a row mean the scorer is failing, not the solution.
pub const FAILING_RUN: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// No keystroke or exec for this long while running: idle.
    pub idle_after_s: f64,
    /// Paused for this long: someone should look.
    pub paused_after_s: f64,
    pub budget_low_s: f64,
    pub failing_run: usize,
    /// Holding a GPU not used for this long: give it to someone who waits.
    pub gpu_idle_after_s: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            idle_after_s: 600.0,
            paused_after_s: 1800.0,
            budget_low_s: BUDGET_LOW_S,
            failing_run: FAILING_RUN,
            gpu_idle_after_s: GPU_IDLE_S,
        }
    }
}

impl Thresholds {
    /// From `--idle-after` and `--paused-after` ("10m", "1h30m").
    pub fn parse(idle_after: &str, paused_after: &str) -> Result<Thresholds, String> {
        let read = |flag: &str, text: &str| {
            parse_duration(text)
                .map(|d| d.as_secs_f64())
                .map_err(|e| format!("--{flag}: {e}"))
        };
        Ok(Thresholds {
            idle_after_s: read("idle-after", idle_after)?,
            paused_after_s: read("paused-after", paused_after)?,
            ..Thresholds::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_as_durations_and_name_the_flag_on_error() {
        let t = Thresholds::parse("5m", "1h").unwrap();
        assert_eq!(t.idle_after_s, 300.0);
        assert_eq!(t.paused_after_s, 3600.0);
        let err = Thresholds::parse("ten", "1h").unwrap_err();
        assert!(err.starts_with("--idle-after"), "{err}");
    }
}
