//! The player's state and how each action changes it. Pure: no terminal,
//! no clock; time comes in as `Action::Tick`.

use std::time::Duration;

use super::action::Action;
use crate::recording::keyframes::{KeyframePolicy, Keyframes, TrackScreen};
use crate::recording::timeline::{Marker, Ms, Timeline, Track, clock_text};
use crate::recording::timemap::TimeMap;

pub const SPEEDS: [f64; 9] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
/// Idle-time limits `i` cycles through (None: real time).
pub const IDLE_LIMITS: [Option<Ms>; 7] = [
    Some(500),
    Some(1000),
    Some(2000),
    Some(5000),
    Some(10_000),
    Some(30_000),
    None,
];
pub const DEFAULT_IDLE_MS: Ms = 2000;
/// ←/→ move this much playback time.
const SEEK_STEP_MS: i64 = 5000;

#[derive(Debug, Clone, PartialEq)]
pub struct PlayerOptions {
    pub speed: f64,
    pub idle_limit_ms: Option<Ms>,
    /// The shell tab to open first.
    pub shell: Option<u32>,
}

impl Default for PlayerOptions {
    fn default() -> Self {
        PlayerOptions {
            speed: 1.0,
            idle_limit_ms: Some(DEFAULT_IDLE_MS),
            shell: None,
        }
    }
}

struct TrackPlayer {
    keys: Keyframes,
    screen: TrackScreen,
}

pub struct PlayerState {
    pub timeline: Timeline,
    tracks: Vec<TrackPlayer>,
    map: TimeMap,
    /// The active tab (index into `timeline.tracks`).
    pub tab: usize,
    /// The playhead, in recorded time.
    pub position: Ms,
    /// Playback progress below a millisecond, carried between ticks.
    carry: f64,
    pub playing: bool,
    pub speed_index: usize,
    pub idle_index: usize,
    pub help: bool,
    /// The `g` prompt's text while it is open.
    pub prompt: Option<String>,
    /// A one-line message (a marker's label after a jump, a bad time...).
    pub message: Option<String>,
    pub quit: bool,
}

impl PlayerState {
    pub fn new(timeline: Timeline, options: &PlayerOptions) -> PlayerState {
        Self::with_policy(timeline, options, KeyframePolicy::default())
    }

    pub fn with_policy(
        timeline: Timeline,
        options: &PlayerOptions,
        policy: KeyframePolicy,
    ) -> PlayerState {
        let tracks = timeline
            .tracks
            .iter()
            .map(|t| TrackPlayer {
                keys: Keyframes::build(t, policy),
                screen: TrackScreen::new(t),
            })
            .collect();
        let idle_index = IDLE_LIMITS
            .iter()
            .position(|l| *l == options.idle_limit_ms)
            .unwrap_or_else(|| {
                let wanted = options.idle_limit_ms.unwrap_or(Ms::MAX);
                IDLE_LIMITS
                    .iter()
                    .position(|l| l.unwrap_or(Ms::MAX) >= wanted)
                    .unwrap_or(IDLE_LIMITS.len() - 1)
            });
        let speed_index = SPEEDS
            .iter()
            .position(|s| *s >= options.speed)
            .unwrap_or(SPEEDS.len() - 1);
        let tab = options
            .shell
            .and_then(|s| timeline.tracks.iter().position(|t| t.shell == Some(s)))
            .unwrap_or(0);
        let map = TimeMap::new(&timeline, IDLE_LIMITS[idle_index]);
        let message = timeline.damage.clone();
        let mut state = PlayerState {
            timeline,
            tracks,
            map,
            tab,
            position: 0,
            carry: 0.0,
            playing: true,
            speed_index,
            idle_index,
            help: false,
            prompt: None,
            message,
            quit: false,
        };
        state.sync();
        state
    }

    pub fn speed(&self) -> f64 {
        SPEEDS[self.speed_index]
    }

    pub fn idle_limit(&self) -> Option<Ms> {
        IDLE_LIMITS[self.idle_index]
    }

    pub fn duration(&self) -> Ms {
        self.timeline.duration()
    }

    pub fn track(&self) -> &Track {
        &self.timeline.tracks[self.tab]
    }

    pub fn screen(&self) -> &vt100::Screen {
        self.tracks[self.tab].screen.screen()
    }

    /// The last marker at or before the playhead.
    pub fn current_marker(&self) -> Option<&Marker> {
        let i = self
            .timeline
            .markers
            .partition_point(|m| m.t <= self.position);
        i.checked_sub(1).map(|i| &self.timeline.markers[i])
    }

    pub fn update(&mut self, action: Action) {
        if !matches!(action, Action::Tick(_)) && self.prompt.is_none() {
            self.message = None;
        }
        match action {
            Action::Tick(dt) => self.tick(dt),
            Action::TogglePlay => {
                if !self.playing && self.position >= self.duration() {
                    self.jump(0);
                }
                self.playing = !self.playing;
            }
            Action::Faster => self.speed_index = (self.speed_index + 1).min(SPEEDS.len() - 1),
            Action::Slower => self.speed_index = self.speed_index.saturating_sub(1),
            Action::CycleIdle => {
                self.idle_index = (self.idle_index + 1) % IDLE_LIMITS.len();
                self.map = TimeMap::new(&self.timeline, self.idle_limit());
            }
            Action::SeekBy(step) => {
                let play = self.map.to_play(self.position) as i64 + step * SEEK_STEP_MS;
                let raw = self.map.to_raw(play.max(0) as Ms);
                self.jump(raw);
            }
            Action::SeekFraction(tenths) => {
                let delta = self.duration() as i64 * tenths / 10;
                self.jump((self.position as i64 + delta).max(0) as Ms);
            }
            Action::JumpPercent(tenth) => {
                self.jump(self.duration() * u64::from(tenth.min(9)) / 10);
            }
            Action::PrevMarker => {
                let i = self
                    .timeline
                    .markers
                    .partition_point(|m| m.t < self.position);
                match i.checked_sub(1) {
                    Some(i) => self.jump_to_marker(i),
                    None => self.jump(0),
                }
            }
            Action::NextMarker => {
                let i = self
                    .timeline
                    .markers
                    .partition_point(|m| m.t <= self.position);
                if i < self.timeline.markers.len() {
                    self.jump_to_marker(i);
                } else {
                    self.message = Some("no later marker".into());
                }
            }
            Action::StepForward => self.step(true),
            Action::StepBack => self.step(false),
            Action::BestScore => match self.timeline.best_score() {
                Some(best) => {
                    let (t, value) = (best.t, best.normalized.unwrap_or(0.0));
                    self.jump(t);
                    self.playing = false;
                    self.message = Some(format!("best score {value:.3} at {}", clock_text(t)));
                }
                None => self.message = Some("no valid score in this recording".into()),
            },
            Action::NextTab => self.switch_tab(1),
            Action::PrevTab => self.switch_tab(self.timeline.tracks.len().saturating_sub(1)),
            Action::ToggleHelp => self.help = !self.help,
            Action::Quit => self.quit = true,
            Action::StartGoto => self.prompt = Some(String::new()),
            Action::PromptChar(c) => {
                if let Some(p) = &mut self.prompt {
                    p.push(c);
                }
            }
            Action::PromptBackspace => {
                if let Some(p) = &mut self.prompt {
                    p.pop();
                }
            }
            Action::PromptCancel => self.prompt = None,
            Action::PromptSubmit => {
                if let Some(text) = self.prompt.take() {
                    match parse_time(&text, self.duration()) {
                        Ok(t) => self.jump(t),
                        Err(e) => self.message = Some(e),
                    }
                }
            }
        }
    }

    fn tick(&mut self, dt: Duration) {
        if !self.playing || self.help || self.prompt.is_some() {
            return;
        }
        let target = self.map.to_play(self.position) as f64
            + self.carry
            + dt.as_secs_f64() * 1000.0 * self.speed();
        let raw = self.map.to_raw(target as Ms);
        self.carry = (target - self.map.to_play(raw) as f64).clamp(0.0, 1000.0);
        self.position = raw.min(self.duration());
        if self.position >= self.duration() {
            self.playing = false;
            self.carry = 0.0;
        }
        self.sync();
    }

    /// Moves the playhead; the screen follows.
    pub fn jump(&mut self, t: Ms) {
        self.position = t.min(self.duration());
        self.carry = 0.0;
        self.sync();
    }

    fn jump_to_marker(&mut self, i: usize) {
        let marker = &self.timeline.markers[i];
        let (t, label) = (marker.t, marker.label.clone());
        self.jump(t);
        self.message = Some(format!("{} {label}", clock_text(t)));
    }

    /// One terminal event forward or back on the active tab; pauses playback.
    fn step(&mut self, forward: bool) {
        self.playing = false;
        let tab = self.tab;
        let track = &self.timeline.tracks[tab];
        let player = &mut self.tracks[tab];
        let applied = player.screen.applied();
        let target = if forward {
            (applied + 1).min(track.events.len())
        } else {
            applied.saturating_sub(1)
        };
        player.screen.seek(track, &player.keys, target);
        self.position = target.checked_sub(1).map_or(0, |i| track.events[i].t);
        self.carry = 0.0;
        self.message = Some(format!(
            "event {target} of {} at {}",
            track.events.len(),
            clock_text(self.position)
        ));
    }

    fn switch_tab(&mut self, by: usize) {
        let n = self.timeline.tracks.len();
        if n > 1 {
            self.tab = (self.tab + by) % n;
            self.sync();
        }
    }

    /// Brings the active tab's screen to the playhead.
    fn sync(&mut self) {
        let tab = self.tab;
        if let (Some(track), Some(player)) =
            (self.timeline.tracks.get(tab), self.tracks.get_mut(tab))
        {
            player.screen.seek_time(track, &player.keys, self.position);
        }
    }
}

/// A time typed at the `g` prompt: `1:02:03`, `12:30`, `90` (seconds),
/// `1h30m`, or `40%`.
pub fn parse_time(text: &str, duration: Ms) -> Result<Ms, String> {
    let text = text.trim();
    let bad = || format!("cannot read {text:?} as a time (try 1:02:03, 12:30, 1h30m or 40%)");
    if let Some(pct) = text.strip_suffix('%') {
        let p: f64 = pct.trim().parse().map_err(|_| bad())?;
        if !(0.0..=100.0).contains(&p) {
            return Err(bad());
        }
        return Ok((duration as f64 * p / 100.0) as Ms);
    }
    if text.contains(':') {
        let mut total: u64 = 0;
        for part in text.split(':') {
            let n: u64 = part.parse().map_err(|_| bad())?;
            total = total
                .checked_mul(60)
                .and_then(|t| t.checked_add(n))
                .ok_or_else(bad)?;
        }
        return Ok(total * 1000);
    }
    if let Ok(seconds) = text.parse::<f64>() {
        return if seconds >= 0.0 {
            Ok((seconds * 1000.0) as Ms)
        } else {
            Err(bad())
        };
    }
    crate::environment::duration::parse_duration(text)
        .map(|d| d.as_millis() as Ms)
        .map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_times_are_read_in_every_spelling() {
        assert_eq!(parse_time("1:02:03", 0), Ok(3_723_000));
        assert_eq!(parse_time("12:30", 0), Ok(750_000));
        assert_eq!(parse_time("90", 0), Ok(90_000));
        assert_eq!(parse_time("1h30m", 0), Ok(5_400_000));
        assert_eq!(parse_time("50%", 10_000), Ok(5000));
        assert!(parse_time("soon", 0).is_err());
    }
}
