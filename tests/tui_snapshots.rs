//! Snapshots of the workspace screens, drawn from hand-made session views
//! with fixed times (no server). Regenerate with `INSTA_UPDATE=always`.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use chrono::{DateTime, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;

use rebench::protocol::{FinalScore, NoteView, PauseView, ScoreView, SessionView};

#[path = "common/attach.rs"]
mod attach;
use attach::attach_reply;
use rebench::session::{EndReason, PauseReason, ScorePhase};
use rebench::tui::widgets::shell_tab::ShellTab;
use rebench::tui::widgets::theme::Theme;
use rebench::tui::workspace::app::{App, Banner, Overlay, Screen};
use rebench::tui::workspace::config::Config;
use rebench::tui::workspace::ui;

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
}

fn score(seq: u64, active_s: f64, phase: ScorePhase, raw: f64, normalized: f64) -> ScoreView {
    ScoreView {
        seq,
        run: 0,
        at: at(active_s as i64),
        active_s,
        phase,
        raw: Some(raw),
        normalized: Some(normalized),
        valid: Some(true),
        message: format!("ms: {raw}, n: 1000000"),
        hidden: false,
        details: None,
        output: None,
        duration_ms: 4000,
    }
}

fn invalid(seq: u64, active_s: f64, why: &str) -> ScoreView {
    ScoreView {
        raw: None,
        normalized: None,
        valid: Some(false),
        message: why.into(),
        ..score(seq, active_s, ScorePhase::Intermediate, 0.0, 0.0)
    }
}

fn hidden(seq: u64, active_s: f64, phase: ScorePhase) -> ScoreView {
    ScoreView {
        raw: None,
        normalized: None,
        valid: None,
        message: "score recorded (hidden)".into(),
        hidden: true,
        ..score(seq, active_s, phase, 0.0, 0.0)
    }
}

/// Built from JSON, so fields the server adds later (with defaults) do not break the fixture.
fn view(state: &str, active_s: f64, scores: Vec<ScoreView>) -> SessionView {
    let budget_s = 8.0 * 3600.0;
    let value = serde_json::json!({
        "id": "k3x9q2",
        "environment": "prefix-sum",
        "title": "Conditional prefix sum (CPU, pure Python)",
        "summary": "Make a conditional prefix sum over int32 values fast in pure Python.",
        "protected": ["score.py"],
        "profile": "full",
        "participant": "alice",
        "kind": "human",
        "state": state,
        "pause_reason": null,
        "end_reason": null,
        "workspace": "/data/workspaces/k3x9q2",
        "budget_s": budget_s,
        "active_s": active_s,
        "remaining_s": budget_s - active_s,
        "created_at": at(0),
        "started_at": (state != "created").then(|| at(60)),
        "ended_at": null,
        "metric": "runtime",
        "unit": "ms",
        "visible": true,
        "aggregate": "best",
        "allow_missing_hardware": false,
        "hardware_missing": [],
        "pauses": [],
        "extensions": [],
        "notes": [],
        "score_count": scores.len(),
        "scores": scores,
        "final": null,
    });
    serde_json::from_value(value).unwrap()
}

fn several_scores() -> Vec<ScoreView> {
    numbered(vec![
        score(1, 0.0, ScorePhase::Starting, 142.7, 0.0),
        score(5, 1800.0, ScorePhase::Intermediate, 120.4, 0.386),
        invalid(9, 4000.0, "wrong answer at index 17 (expected 3, got 4)"),
        score(12, 7200.0, ScorePhase::Intermediate, 101.9, 0.768),
        score(15, 9900.0, ScorePhase::Intermediate, 104.2, 0.713),
    ])
}

/// Runs numbered as the server numbers them: 0 for the start, then 1, 2, ….
fn numbered(mut scores: Vec<ScoreView>) -> Vec<ScoreView> {
    let mut next = 1;
    for s in &mut scores {
        if s.phase != ScorePhase::Starting {
            s.run = next;
            next += 1;
        }
    }
    scores
}

const SHELL_OUTPUT: &[u8] = b"[rebench k3x9q2] ~/workspace $ python3 score.py\r\n\
correct on 20 random inputs\r\n\
runtime: 101.9 ms (best of 5)\r\n\
[rebench k3x9q2] ~/workspace $ ";

fn app(view: SessionView, cols: u16, rows: u16) -> App {
    let mut app = App::new(
        &view.id.clone(),
        &Config::default(),
        Theme { color: true },
        Rect::new(0, 0, cols, rows),
    );
    app.now_s = 1000.0;
    app.apply_view(view, &mut Vec::new());
    app
}

fn with_shells(mut app: App, count: u32) -> App {
    let pane = app.areas().pane;
    for shell in 0..count {
        let mut tab = ShellTab::new(shell, pane.height, pane.width);
        tab.load_screen(&attach_reply(pane.height, pane.width), SHELL_OUTPUT);
        app.tabs.push(tab);
    }
    app
}

fn render(app: &App) -> TestBackend {
    let mut terminal = Terminal::new(TestBackend::new(app.area.width, app.area.height)).unwrap();
    terminal.draw(|frame| ui::draw(app, frame)).unwrap();
    terminal.backend().clone()
}

#[test]
fn start_screen() {
    let a = app(
        view(
            "created",
            0.0,
            vec![score(1, 0.0, ScorePhase::Starting, 142.7, 0.0)],
        ),
        120,
        40,
    );
    assert_eq!(a.screen, Screen::Start);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn running_with_scores_chart_and_log() {
    let mut v = view("running", 10_000.0, several_scores());
    v.notes = vec![NoteView {
        at: at(5000),
        active_s: 5000.0,
        text: "unrolled the loop: 15% faster".into(),
        by: "alice".into(),
    }];
    let mut a = with_shells(app(v, 140, 45), 2);
    // A score this UI asked for has been running for 32 s.
    a.scoring_since_s = Some(a.now_s - 32.0);
    assert_eq!(a.screen, Screen::Workspace);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn hidden_scores() {
    let mut v = view(
        "running",
        3000.0,
        numbered(vec![
            hidden(1, 0.0, ScorePhase::Starting),
            hidden(4, 2500.0, ScorePhase::Intermediate),
        ]),
    );
    v.visible = false;
    let a = with_shells(app(v, 140, 45), 1);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn paused() {
    let mut v = view("paused", 4000.0, several_scores());
    v.pause_reason = Some(PauseReason::Break);
    let a = with_shells(app(v, 140, 45), 1);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn paused_by_the_proctor_says_why_and_offers_no_resume() {
    let mut v = view("paused", 4000.0, several_scores());
    v.pause_reason = Some(PauseReason::Proctor);
    v.pauses = vec![PauseView {
        reason: PauseReason::Proctor,
        by: "ana (proctor)".into(),
        note: Some("fire alarm: leave the room, the clock is stopped".into()),
        start: at(4000),
        end: None,
    }];
    let a = with_shells(app(v, 140, 45), 1);
    let screen = format!("{:?}", render(&a).buffer());
    assert!(
        !screen.contains("p resume"),
        "no resume key for a proctor's pause"
    );
    insta::assert_snapshot!(render(&a));
}

#[test]
fn ended_by_the_proctor_says_why() {
    let mut v = view("ended", 2.0 * 3600.0, several_scores());
    v.end_reason = Some(EndReason::EndedByProctor);
    v.end_note = Some("copied the reference solution from another session".into());
    v.ended_at = Some(at(9_000));
    let a = app(v, 120, 40);
    assert_eq!(a.screen, Screen::Summary);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn five_minute_warning() {
    let v = view("running", 8.0 * 3600.0 - 290.0, several_scores());
    let mut a = with_shells(app(v, 140, 45), 1);
    a.banner = Some(Banner {
        threshold_s: 300,
        since_s: a.now_s - 2.0,
    });
    insta::assert_snapshot!(render(&a));
}

#[test]
fn end_summary() {
    let mut v = view("ended", 6.5 * 3600.0, several_scores());
    v.end_reason = Some(EndReason::Submitted);
    v.ended_at = Some(at(30_000));
    v.final_score = Some(FinalScore {
        raw: 101.9,
        normalized: 0.768,
    });
    v.pauses = vec![
        PauseView {
            reason: PauseReason::Break,
            by: "alice".into(),
            note: None,
            start: at(10_000),
            end: Some(at(10_900)),
        },
        PauseView {
            reason: PauseReason::Scoring,
            by: "system".into(),
            note: Some("final score".into()),
            start: at(29_990),
            end: None,
        },
    ];
    let a = app(v, 120, 40);
    assert_eq!(a.screen, Screen::Summary);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn tiny_window() {
    let a = with_shells(app(view("running", 100.0, several_scores()), 50, 12), 1);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn submit_confirmation() {
    let mut v = view("running", 10_000.0, several_scores());
    v.final_score = Some(FinalScore {
        raw: 101.9,
        normalized: 0.768,
    });
    let mut a = with_shells(app(v, 140, 45), 1);
    a.overlay = Some(Overlay::ConfirmSubmit);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn narrow_window_hides_the_panel() {
    let a = with_shells(app(view("running", 100.0, several_scores()), 90, 30), 1);
    assert_eq!(a.areas().side, None);
    insta::assert_snapshot!(render(&a));
}

/// The workspace at the sizes people use: the panel shrinks before it goes,
/// and without it the header carries the scores.
#[test]
fn the_workspace_at_common_sizes() {
    for (cols, rows) in [(80, 24), (100, 30), (120, 40), (200, 50)] {
        let mut v = view("running", 10_000.0, several_scores());
        v.final_score = Some(FinalScore {
            raw: 101.9,
            normalized: 0.768,
        });
        let a = with_shells(app(v, cols, rows), 1);
        let screen = format!("{:?}", render(&a).buffer());
        // The scores are somewhere at every size.
        assert!(screen.contains("0.768"), "{cols}x{rows}: {screen}");
        insta::assert_snapshot!(format!("workspace_{cols}x{rows}"), render(&a));
    }
}

/// Issue 19: while an `exclusive` score is timed the participant's shells
/// stop answering; the UI says why, beside the scoring clock.
#[test]
fn an_exclusive_score_says_the_processes_wait() {
    for exclusive in [false, true] {
        let mut v = view("running", 10_000.0, several_scores());
        v.exclusive_scoring = exclusive;
        let mut a = with_shells(app(v, 140, 45), 1);
        a.scoring_since_s = Some(a.now_s - 3.0);
        let screen = format!("{:?}", render(&a).buffer());
        assert_eq!(
            screen.contains("your processes wait"),
            exclusive,
            "exclusive={exclusive}: {screen}"
        );
    }
}
