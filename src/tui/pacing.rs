//! When the next frame may be drawn. Frames are paced like a token bucket
//! (the generic cell rate algorithm): after a quiet spell up to `BURST`
//! frames go out at once, then one per frame gap. A command's output and
//! the prompt after it (a few small bursts right after the Enter's echo)
//! are then drawn as they come instead of each waiting out a whole gap,
//! while a flood is still drawn at most once per gap once the burst is
//! spent. The caller passes the time, so tests drive it with their own.

use std::time::{Duration, Instant};

/// Frames a quiet screen may draw back to back.
pub const BURST: u32 = 4;

#[derive(Debug, Default, Clone)]
pub struct Pacer {
    /// When the bucket is empty again at one frame per gap (the "theoretical
    /// arrival time"): None before the first frame.
    empty_at: Option<Instant>,
}

impl Pacer {
    /// The earliest a frame may be drawn, for frames `gap` apart. A zero gap
    /// (a frame answering a key) is never held back.
    pub fn next_at(&self, now: Instant, gap: Duration) -> Instant {
        match self.empty_at {
            Some(empty_at) if !gap.is_zero() => {
                let allowance = gap * (BURST - 1);
                empty_at.checked_sub(allowance).unwrap_or(now).max(now)
            }
            _ => now,
        }
    }

    /// Whether a frame may be drawn at `now`.
    pub fn due(&self, now: Instant, gap: Duration) -> bool {
        self.next_at(now, gap) <= now
    }

    /// A frame was drawn at `now`; it spends one gap of the bucket (a
    /// zero-gap frame spends nothing).
    pub fn drawn(&mut self, now: Instant, gap: Duration) {
        let from = self.empty_at.map_or(now, |at| at.max(now));
        self.empty_at = Some(from + gap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GAP: Duration = Duration::from_millis(16);

    /// Draws whenever due, asking every millisecond for `ms`; the times drawn.
    fn draw_whenever_due(pacer: &mut Pacer, start: Instant, ms: u64) -> Vec<u64> {
        let mut drawn = Vec::new();
        for t in 0..ms {
            let now = start + Duration::from_millis(t);
            if pacer.due(now, GAP) {
                pacer.drawn(now, GAP);
                drawn.push(t);
            }
        }
        drawn
    }

    #[test]
    fn a_quiet_screen_draws_a_burst_at_once_then_one_frame_per_gap() {
        let start = Instant::now();
        let mut pacer = Pacer::default();
        let drawn = draw_whenever_due(&mut pacer, start, 100);
        assert_eq!(drawn, vec![0, 1, 2, 3, 16, 32, 48, 64, 80, 96]);
    }

    #[test]
    fn after_a_quiet_spell_the_whole_burst_is_back() {
        let start = Instant::now();
        let mut pacer = Pacer::default();
        draw_whenever_due(&mut pacer, start, 100);
        // Nothing drawn for a while: the bucket refills, up to BURST frames.
        let later = start + Duration::from_millis(1000);
        let drawn = draw_whenever_due(&mut pacer, later, 20);
        assert_eq!(drawn, vec![0, 1, 2, 3, 16]);
    }

    #[test]
    fn a_partly_refilled_bucket_gives_only_what_it_earned() {
        let start = Instant::now();
        let mut pacer = Pacer::default();
        draw_whenever_due(&mut pacer, start, 4); // the burst, spent
        // 40 ms later: the frame due at 16 and at 32 were earned, not more.
        let later = start + Duration::from_millis(40);
        let drawn = draw_whenever_due(&mut pacer, later, 10);
        assert_eq!(drawn, vec![0, 1, 8]);
    }

    #[test]
    fn a_frame_answering_a_key_is_never_held_back_and_spends_nothing() {
        let start = Instant::now();
        let mut pacer = Pacer::default();
        draw_whenever_due(&mut pacer, start, 4); // the burst, spent
        let now = start + Duration::from_millis(5);
        assert!(!pacer.due(now, GAP));
        assert!(pacer.due(now, Duration::ZERO));
        assert_eq!(pacer.next_at(now, Duration::ZERO), now);
        pacer.drawn(now, Duration::ZERO);
        // The next output frame waits exactly as long as before the key.
        assert_eq!(pacer.next_at(now, GAP), start + Duration::from_millis(16));
    }

    #[test]
    fn a_flood_is_drawn_about_once_per_gap() {
        let start = Instant::now();
        let mut pacer = Pacer::default();
        let drawn = draw_whenever_due(&mut pacer, start, 10_000);
        // 10 s at 16 ms a frame is 625 frames, plus the first burst's 3.
        assert_eq!(drawn.len(), 625 + 3);
    }
}
