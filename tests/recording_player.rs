//! The replay player: what its actions do, and how it looks (TestBackend
//! snapshots; regenerate with INSTA_UPDATE=always, review the .snap diffs).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use rebench::recording::timeline::{
    ClockPoint, Marker, MarkerKind, ScorePoint, Span, TermEvent, TermKind, Timeline, Track,
};
use rebench::tui::replay::{Action, PlayerOptions, PlayerState, draw};

const MIN: u64 = 60_000;

fn shell(id: u32, cols: u16, rows: u16, lines: &[(u64, &str)]) -> Track {
    let mut track = Track::new(Some(id), format!("shell {id}"), cols, rows);
    track.events = lines
        .iter()
        .map(|(t, text)| TermEvent {
            t: *t,
            kind: TermKind::Output(text.as_bytes().to_vec()),
        })
        .collect();
    track
}

fn marker(t: u64, kind: MarkerKind, label: &str) -> Marker {
    Marker {
        t,
        kind,
        label: label.into(),
    }
}

fn score(t: u64, value: f64) -> ScorePoint {
    ScorePoint {
        t,
        normalized: Some(value),
        raw: None,
        valid: true,
    }
}

/// A 40-minute session: two shells, three scores, a note, a 10-minute break.
fn session() -> Timeline {
    let prompt = "\x1b[1;32mtess@box\x1b[0m:\x1b[1;34m~/solution\x1b[0m$ ";
    let main = shell(
        0,
        72,
        16,
        &[
            (0, prompt),
            (2_000, "python bench.py\r\n"),
            (3_000, "\x1b[33mwarming up...\x1b[0m\r\n"),
            (5 * MIN, "runtime: 3.91 ms\r\n"),
            (5 * MIN + 10, prompt),
            (5 * MIN + 5_000, "score\r\n"),
            (5 * MIN + 9_000, "score: 0.412 (valid)\r\n"),
            (5 * MIN + 9_010, prompt),
            (25 * MIN, "vim prefix_sum.py\r\n"),
            (30 * MIN, "score: 0.731 (valid)\r\n"),
            (30 * MIN + 10, prompt),
            (39 * MIN, "score: 0.655 (valid)\r\n"),
            (39 * MIN + 10, prompt),
        ],
    );
    let logs = shell(
        1,
        72,
        16,
        &[
            (MIN, "tail -f train.log\r\n"),
            (2 * MIN, "step 1 loss 2.31\r\n"),
        ],
    );
    Timeline {
        title: "prefix-sum — tess (human)".into(),
        source: "s-demo".into(),
        tracks: vec![main, logs],
        markers: vec![
            marker(0, MarkerKind::Start, "session started by tess"),
            marker(
                5 * MIN + 9_000,
                MarkerKind::Score,
                "score 0.412 (raw 3.91, intermediate, by tess)",
            ),
            marker(
                12 * MIN,
                MarkerKind::Note,
                "note by proctor: asked about the GPU",
            ),
            marker(14 * MIN, MarkerKind::Pause, "paused (break) by tess"),
            marker(24 * MIN, MarkerKind::Resume, "resumed by tess"),
            marker(
                30 * MIN,
                MarkerKind::Score,
                "score 0.731 (raw 2.71, intermediate, by tess)",
            ),
            marker(
                39 * MIN,
                MarkerKind::Score,
                "score 0.655 (raw 2.95, final, by tess)",
            ),
            marker(
                40 * MIN,
                MarkerKind::End,
                "session ended (submitted) by tess",
            ),
        ],
        scores: vec![
            score(5 * MIN + 9_000, 0.412),
            score(30 * MIN, 0.731),
            score(39 * MIN, 0.655),
        ],
        pauses: vec![Span {
            start: 14 * MIN,
            end: 24 * MIN,
        }],
        clock: vec![
            ClockPoint { t: 0, active_ms: 0 },
            ClockPoint {
                t: 14 * MIN,
                active_ms: 14 * MIN,
            },
            ClockPoint {
                t: 24 * MIN,
                active_ms: 14 * MIN,
            },
            ClockPoint {
                t: 40 * MIN,
                active_ms: 30 * MIN,
            },
        ],
        base_budget_ms: Some(60 * MIN),
        extensions: vec![],
        ..Timeline::default()
    }
}

fn player() -> PlayerState {
    PlayerState::new(session(), &PlayerOptions::default())
}

fn render(state: &PlayerState, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| draw(state, f)).unwrap();
    format!("{}", terminal.backend())
}

#[test]
fn snapshot_a_wide_window_shows_terminal_chart_and_markers() {
    let mut p = player();
    p.update(Action::JumpPercent(8)); // 32:00, after the best score
    p.update(Action::TogglePlay);
    insta::assert_snapshot!(render(&p, 130, 26));
}

#[test]
fn snapshot_a_small_window_crops_the_terminal_around_the_cursor() {
    let mut p = player();
    p.update(Action::JumpPercent(5));
    p.update(Action::TogglePlay);
    insta::assert_snapshot!(render(&p, 50, 14));
}

#[test]
fn snapshot_help_and_the_goto_prompt() {
    let mut p = player();
    p.update(Action::TogglePlay);
    p.update(Action::ToggleHelp);
    insta::assert_snapshot!("help", render(&p, 100, 26));
    p.update(Action::ToggleHelp);
    p.update(Action::StartGoto);
    for c in "12:30".chars() {
        p.update(Action::PromptChar(c));
    }
    insta::assert_snapshot!("goto", render(&p, 100, 26));
}

#[test]
fn playing_skips_the_pause_and_cuts_idle_time() {
    let mut p = player();
    assert!(p.playing);
    // 4:57 of recorded idle before 5:00, at the default 2 s limit.
    for _ in 0..100 {
        p.update(Action::Tick(Duration::from_millis(100)));
    }
    assert!(
        p.position >= 5 * MIN,
        "idle time is cut: at {} ms",
        p.position
    );
    // Through the break: 10 paused minutes take no playback time.
    p.jump(14 * MIN - 500);
    p.update(Action::Tick(Duration::from_millis(1000)));
    assert!(
        p.position > 24 * MIN,
        "the pause is skipped: at {} ms",
        p.position
    );
    // Faster is faster; the end stops playback.
    for _ in 0..4 {
        p.update(Action::Faster);
    }
    assert_eq!(p.speed(), 16.0);
    for _ in 0..200 {
        p.update(Action::Tick(Duration::from_millis(100)));
    }
    assert_eq!(p.position, 40 * MIN);
    assert!(!p.playing);
}

#[test]
fn markers_steps_best_score_and_tabs_move_the_playhead() {
    let mut p = player();
    p.update(Action::TogglePlay);
    // The start marker is at 0, where the playhead is: the next is the first score.
    p.update(Action::NextMarker);
    assert_eq!(p.position, 5 * MIN + 9_000);
    assert!(p.screen().contents().contains("score: 0.412"));
    assert!(p.message.as_deref().unwrap_or("").contains("score 0.412"));
    p.update(Action::PrevMarker);
    assert_eq!(p.position, 0);

    p.update(Action::BestScore);
    assert_eq!(p.position, 30 * MIN);
    assert!(p.screen().contents().contains("0.731"));
    assert!(!p.screen().contents().contains("0.655"));

    // One event at a time, both ways.
    p.update(Action::StepForward);
    assert_eq!(p.position, 30 * MIN + 10);
    p.update(Action::StepBack);
    p.update(Action::StepBack);
    assert_eq!(p.position, 25 * MIN);
    assert!(!p.screen().contents().contains("0.731"));

    // ±5 s of playback, ±10 % of the recording, and a typed time.
    p.jump(10 * MIN);
    p.update(Action::SeekFraction(1));
    assert_eq!(p.position, 14 * MIN);
    p.update(Action::StartGoto);
    for c in "1:00".chars() {
        p.update(Action::PromptChar(c));
    }
    p.update(Action::PromptSubmit);
    assert_eq!(p.position, MIN);
    // With the idle limit off, 5 s of playback are 5 s of recording.
    while p.idle_limit().is_some() {
        p.update(Action::CycleIdle);
    }
    p.update(Action::SeekBy(1));
    assert_eq!(p.position, MIN + 5_000);
    p.update(Action::SeekBy(-1));
    assert_eq!(p.position, MIN);

    // The other shell's tab shows its own screen at the same moment.
    p.jump(3 * MIN);
    p.update(Action::NextTab);
    assert_eq!(p.tab, 1);
    assert!(p.screen().contents().contains("step 1 loss"));
    p.update(Action::NextTab);
    assert_eq!(p.tab, 0);

    // Clock at the playhead: the break does not count.
    let t = &p.timeline;
    assert_eq!(t.active_ms_at(20 * MIN), Some(14 * MIN));
    assert_eq!(t.remaining_ms_at(30 * MIN), Some(40 * MIN as i64));
    p.update(Action::Quit);
    assert!(p.quit);
}
