//! Snapshots of the proctor's dashboard, drawn from made-up sessions at
//! fixed times (no server). Regenerate with `INSTA_UPDATE=always` and
//! review the diff.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use rebench::protocol::{AttachReply, Push, ShellInfo, b64_encode};
use rebench::session::Kind;
use rebench::tui::proctor::app::{Action, App, Effect, Overlay};
use rebench::tui::proctor::detail::Pane;
use rebench::tui::proctor::dialog::{ActionKind, Dialog};
use rebench::tui::proctor::sample;
use rebench::tui::proctor::settings::Thresholds;
use rebench::tui::proctor::ui;
use rebench::tui::widgets::theme::Theme;

fn app(cols: u16, rows: u16) -> App {
    let mut app = App::new(
        "ana (proctor)",
        Thresholds::default(),
        Theme { color: true },
        sample::now(),
    );
    app.fleet = sample::showcase();
    app.loaded = true;
    app.update(Action::Resize(cols, rows));
    app.recompute();
    app
}

fn render(app: &App) -> String {
    let mut terminal =
        Terminal::new(TestBackend::new(app.area.width, app.area.height)).expect("test terminal");
    terminal.draw(|frame| ui::draw(app, frame)).expect("draws");
    terminal.backend().to_string()
}

fn key(app: &mut App, code: KeyCode) -> Vec<Effect> {
    app.update(Action::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

fn reply<T: serde::Serialize>(
    app: &mut App,
    pending: rebench::tui::proctor::app::Pending,
    value: T,
) {
    let value = serde_json::to_value(value).expect("json");
    app.update(Action::Reply {
        pending,
        result: Ok(value),
    });
}

#[test]
fn dashboard_with_many_sessions_and_alerts() {
    let a = app(180, 34);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn dashboard_filtered_and_searched() {
    let mut a = app(180, 20);
    key(&mut a, KeyCode::Char('t'));
    key(&mut a, KeyCode::Char('t'));
    // Agents only; then the alert list gets the focus.
    assert!(a.rows.iter().all(|r| r.kind == Kind::Agent));
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, "claude");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.rows.len(), 1);
    key(&mut a, KeyCode::Tab);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn detail_view_mirrors_a_shell_beside_the_scores() {
    let mut a = app(170, 36);
    let effects = a.open_detail("a1k9qz");
    assert_eq!(effects.len(), 3, "show, shell list, events");
    reply(
        &mut a,
        rebench::tui::proctor::app::Pending::DetailShells("a1k9qz".into()),
        vec![
            ShellInfo {
                shell: 0,
                cols: 100,
                rows: 30,
                alive: true,
                has_driver: true,
                last_input_at: None,
            },
            ShellInfo {
                shell: 1,
                cols: 100,
                rows: 30,
                alive: true,
                has_driver: false,
                last_input_at: None,
            },
        ],
    );
    let screen = b"[rebench a1k9qz] ~/workspace $ python3 score.py\r\n\
correct on 20 random inputs\r\nruntime: 2.31 ms (best of 5)\r\n\
[rebench a1k9qz] ~/workspace $ ";
    reply(
        &mut a,
        rebench::tui::proctor::app::Pending::Attach("a1k9qz".into(), 0),
        AttachReply {
            shell: 0,
            cols: 100,
            rows: 30,
            screen: b64_encode(screen),
            alive: true,
            scrollback_lines: Some(2000),
        },
    );
    a.update(Action::Push(Box::new(Push::ShellOutput {
        session: "a1k9qz".into(),
        shell: 0,
        data: b64_encode(b"vim kernel.py"),
    })));
    let shown = render(&a);
    assert!(shown.contains("vim kernel.py"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn detail_view_of_an_agent_shows_its_exec_history() {
    let mut a = app(150, 30);
    a.open_detail("e2s6hb");
    let events = vec![
        sample::exec_event(30, 6100, "ls", "kernel.py\nscore.py\n"),
        sample::exec_event(31, 6150, "python3 bench.py --n 4096", "4096: 3.10 ms\n"),
        sample::exec_event(
            32,
            6190,
            "make -j8 && ./run_tests",
            "cc -O3 kernel.c\nall 12 tests passed\n",
        ),
        sample::model_call_event(33, 6195, "The tests pass; let me score it.", "score"),
    ];
    reply(
        &mut a,
        rebench::tui::proctor::app::Pending::Events("e2s6hb".into()),
        events,
    );
    let d = a.detail.as_ref().expect("detail open");
    assert_eq!(d.pane, Pane::Execs, "agents open on their exec history");
    key(&mut a, KeyCode::Down);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn hidden_scores_are_shown_to_the_proctor() {
    let mut a = app(170, 30);
    a.open_detail("j8x2nh");
    let shown = render(&a);
    assert!(shown.contains("hidden from the participant"), "{shown}");
    assert!(shown.contains("0.655"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn pause_dialog_asks_for_a_reason() {
    let mut a = app(120, 24);
    a.selected = Some("a1k9qz".into());
    key(&mut a, KeyCode::Char('p'));
    key(&mut a, KeyCode::Enter);
    insta::assert_snapshot!("pause_dialog_empty", render(&a));
    typed(&mut a, "fire alarm in building B");
    insta::assert_snapshot!("pause_dialog_typed", render(&a));
}

#[test]
fn extend_dialog_checks_the_duration() {
    let mut a = app(120, 24);
    a.overlay = Some(Overlay::Dialog(Dialog::new(
        ActionKind::Extend,
        "f9t4jc",
        "farah",
    )));
    typed(&mut a, "x");
    key(&mut a, KeyCode::Enter);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn extend_dialog_shows_the_new_total_before_it_is_applied() {
    let mut a = app(120, 24);
    a.overlay = Some(Overlay::Dialog(
        Dialog::new(ActionKind::Extend, "f9t4jc", "farah").with_budget(8.0 * 3600.0, 7.5 * 3600.0),
    ));
    // Typing replaces the suggested 30m; a slip (315m) shows before Enter.
    typed(&mut a, "315m");
    insta::assert_snapshot!(render(&a));
}

#[test]
fn end_dialog_confirms() {
    let mut a = app(120, 24);
    a.selected = Some("b7m2xd".into());
    key(&mut a, KeyCode::Char('E'));
    typed(&mut a, "left the room for good");
    key(&mut a, KeyCode::Enter);
    insta::assert_snapshot!(render(&a));
}

#[test]
fn help() {
    let mut a = app(120, 34);
    key(&mut a, KeyCode::Char('?'));
    insta::assert_snapshot!(render(&a));
}

#[test]
fn dashboard_at_80_columns_keeps_the_session_id() {
    let a = app(80, 24);
    let screen = render(&a);
    // Every session's id is there to act on, and no state is cut.
    for id in ["h6v3lf", "d5r1nv", "k2y5pj", "m3a8rl"] {
        assert!(screen.contains(id), "{id} missing:\n{screen}");
    }
    assert!(screen.contains("PAUSED crash recovery"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn a_window_below_the_minimum_says_so() {
    let a = app(60, 10);
    let screen = render(&a);
    assert!(screen.contains("at least 80×16 (it is 60×10)"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn marked_sessions_get_one_bulk_dialog() {
    let mut a = app(120, 24);
    // The fire-alarm case: everything shown, then one pause for all.
    a.update(Action::Key(KeyEvent::new(
        KeyCode::Char('*'),
        KeyModifiers::NONE,
    )));
    key(&mut a, KeyCode::Char('p'));
    typed(&mut a, "fire alarm");
    insta::assert_snapshot!(render(&a));
}
