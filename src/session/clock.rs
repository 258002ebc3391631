//! Monotonic time for budgets. Durations come from a monotonic source so that
//! wall-clock jumps never change a budget; tests inject a manual clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Milliseconds on a monotonic clock with an arbitrary origin.
pub trait MonotonicClock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> u64;
}

/// The real monotonic clock, counting from its creation.
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl MonotonicClock for SystemClock {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
}

/// A clock that only moves when told to (tests).
#[derive(Debug, Default, Clone)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn advance_ms(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
}

impl MonotonicClock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

/// The active-time counter of one session: accumulated time plus the
/// current running interval, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveClock {
    accumulated_ms: u64,
    running_since_ms: Option<u64>,
}

impl LiveClock {
    /// A stopped clock showing `active_ms`.
    pub fn stopped(active_ms: u64) -> Self {
        Self {
            accumulated_ms: active_ms,
            running_since_ms: None,
        }
    }

    pub fn is_running(&self) -> bool {
        self.running_since_ms.is_some()
    }

    pub fn active_ms(&self, now_ms: u64) -> u64 {
        match self.running_since_ms {
            Some(since) => self.accumulated_ms + now_ms.saturating_sub(since),
            None => self.accumulated_ms,
        }
    }

    pub fn start(&mut self, now_ms: u64) {
        if self.running_since_ms.is_none() {
            self.running_since_ms = Some(now_ms);
        }
    }

    /// Stops the clock; returns the active time it stopped at.
    pub fn stop(&mut self, now_ms: u64) -> u64 {
        self.accumulated_ms = self.active_ms(now_ms);
        self.running_since_ms = None;
        self.accumulated_ms
    }

    /// Stops the clock at no more than `cap_ms` (a budget is never overrun on record).
    pub fn stop_capped(&mut self, now_ms: u64, cap_ms: u64) -> u64 {
        let active = self.stop(now_ms).min(cap_ms);
        self.accumulated_ms = active;
        active
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_clock_counts_only_running_time() {
        let clock = ManualClock::new();
        let mut live = LiveClock::stopped(0);
        clock.advance_ms(1000);
        assert_eq!(live.active_ms(clock.now_ms()), 0);
        live.start(clock.now_ms());
        clock.advance_ms(2500);
        assert_eq!(live.active_ms(clock.now_ms()), 2500);
        assert_eq!(live.stop(clock.now_ms()), 2500);
        clock.advance_ms(10_000);
        assert_eq!(live.active_ms(clock.now_ms()), 2500);
        live.start(clock.now_ms());
        live.start(clock.now_ms() + 5); // starting twice does not reset
        clock.advance_ms(500);
        assert_eq!(live.active_ms(clock.now_ms()), 3000);
    }

    #[test]
    fn stop_capped_never_exceeds_the_cap() {
        let mut live = LiveClock::stopped(900);
        live.start(0);
        assert_eq!(live.stop_capped(400, 1000), 1000);
        assert_eq!(live.active_ms(10_000), 1000);
    }
}
