//! Playback time versus recorded time: paused stretches of a session are
//! skipped and idle gaps are cut to the idle-time limit (as asciinema's
//! `idle_time_limit`), so an 8-hour session plays without dead air.

use super::timeline::{Ms, Timeline};

pub struct TimeMap {
    /// Recorded times of every event and marker, sorted, unique.
    raw: Vec<Ms>,
    /// Playback time at each of them.
    play: Vec<Ms>,
}

impl TimeMap {
    pub fn new(timeline: &Timeline, idle_limit: Option<Ms>) -> TimeMap {
        let mut raw: Vec<Ms> = timeline
            .tracks
            .iter()
            .flat_map(|t| t.events.iter().map(|e| e.t))
            .chain(timeline.markers.iter().map(|m| m.t))
            .chain([0, timeline.duration()])
            .collect();
        raw.sort_unstable();
        raw.dedup();
        let mut play = Vec::with_capacity(raw.len());
        let mut now = 0;
        play.push(0);
        for w in raw.windows(2) {
            let live = (w[1] - w[0]).saturating_sub(paused_overlap(timeline, w[0], w[1]));
            now += idle_limit.map_or(live, |limit| live.min(limit));
            play.push(now);
        }
        TimeMap { raw, play }
    }

    pub fn play_duration(&self) -> Ms {
        self.play.last().copied().unwrap_or(0)
    }

    pub fn to_play(&self, t: Ms) -> Ms {
        let i = self.raw.partition_point(|&r| r <= t);
        let Some(i) = i.checked_sub(1) else { return 0 };
        let Some(&next) = self.raw.get(i + 1) else {
            return self.play[i];
        };
        let (r0, p0, p1) = (self.raw[i], self.play[i], self.play[i + 1]);
        p0 + ((t - r0) as u128 * (p1 - p0) as u128 / (next - r0) as u128) as Ms
    }

    /// The recorded time at playback time `p`; across a skipped stretch,
    /// its end (so playback lands after a pause, not in it).
    pub fn to_raw(&self, p: Ms) -> Ms {
        let i = self.play.partition_point(|&q| q <= p);
        let Some(i) = i.checked_sub(1) else { return 0 };
        let Some(&next) = self.play.get(i + 1) else {
            return self.raw[i];
        };
        let (p0, r0, r1) = (self.play[i], self.raw[i], self.raw[i + 1]);
        r0 + ((p - p0) as u128 * (r1 - r0) as u128 / (next - p0) as u128) as Ms
    }
}

fn paused_overlap(timeline: &Timeline, a: Ms, b: Ms) -> Ms {
    timeline
        .pauses
        .iter()
        .map(|p| b.min(p.end).saturating_sub(a.max(p.start)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::timeline::{Span, TermEvent, TermKind, Track};

    #[test]
    fn idle_gaps_shrink_and_pauses_vanish() {
        let mut track = Track::new(None, "t", 10, 2);
        for t in [0, 1000, 61_000, 62_000, 200_000] {
            track.events.push(TermEvent {
                t,
                kind: TermKind::Output(b"x".to_vec()),
            });
        }
        let timeline = Timeline {
            tracks: vec![track],
            pauses: vec![Span {
                start: 100_000,
                end: 190_000,
            }],
            ..Timeline::default()
        };
        let map = TimeMap::new(&timeline, Some(2000));
        // 1s, then 60s idle cut to 2s, 1s, then 138s of which 90s paused → 2s.
        assert_eq!(map.play_duration(), 1000 + 2000 + 1000 + 2000);
        assert_eq!(map.to_play(61_000), 3000);
        assert_eq!(map.to_raw(3000), 61_000);
        assert_eq!(map.to_raw(map.to_play(500)), 500);
        let unlimited = TimeMap::new(&timeline, None);
        assert_eq!(unlimited.play_duration(), 200_000 - 90_000);
    }
}
