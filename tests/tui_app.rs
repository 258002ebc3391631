//! The workspace's behaviour without a server: actions in, effects out.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;

use rebench::protocol::{ErrorCode, Request, b64_decode};

#[path = "common/attach.rs"]
mod attach;
use attach::attach_reply;
use rebench::session::Phase;
use rebench::session::{Event, EventKind, PauseReason};
use rebench::tui::widgets::shell_tab::ShellTab;
use rebench::tui::widgets::theme::Theme;
use rebench::tui::workspace::app::{Action, App, Effect, Overlay, Pending, ReplyError, Screen};
use rebench::tui::workspace::config::Config;

fn view_json(state: &str, remaining_s: f64) -> serde_json::Value {
    let budget_s = 7200.0;
    // As the server's: a session past its start has a start time.
    let started_at = (state != "created").then_some("2027-01-15T08:01:00Z");
    serde_json::json!({
        "id": "s1", "environment": "prefix-sum", "title": "Prefix sum", "profile": null,
        "participant": "alice", "kind": "human", "state": state, "pause_reason": null,
        "end_reason": null, "workspace": "/w", "budget_s": budget_s,
        "active_s": budget_s - remaining_s, "remaining_s": remaining_s,
        "created_at": "2027-01-15T08:00:00Z", "started_at": started_at, "ended_at": null,
        "metric": "runtime", "unit": "ms", "visible": true, "aggregate": "best",
        "allow_missing_hardware": false, "hardware_missing": [], "pauses": [],
        "extensions": [], "notes": [], "score_count": 1,
        "scores": [{"seq": 1, "at": "2027-01-15T08:00:00Z", "active_s": 0.0, "phase": "starting",
                    "raw": 142.7, "normalized": 0.0, "valid": true, "message": "ok",
                    "hidden": false, "duration_ms": 10}],
        "final": null
    })
}

fn reply(pending: Pending, value: serde_json::Value) -> Action {
    Action::Reply {
        pending,
        result: Ok(value),
    }
}

/// A running workspace with one attached shell.
fn running_app(remaining_s: f64) -> App {
    let mut app = App::new(
        "s1",
        &Config::default(),
        Theme { color: false },
        Rect::new(0, 0, 140, 45),
    );
    app.now_s = 100.0;
    app.update(reply(Pending::Show, view_json("running", remaining_s)));
    assert_eq!(app.screen, Screen::Workspace);
    let pane = app.areas().pane;
    let mut tab = ShellTab::new(0, pane.height, pane.width);
    tab.load_screen(&attach_reply(pane.height, pane.width), b"$ ");
    app.tabs.push(tab);
    app
}

fn key(code: KeyCode) -> Action {
    Action::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn ctrl(c: char) -> Action {
    Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

fn sent_input(effects: &[Effect]) -> Vec<u8> {
    effects
        .iter()
        .filter_map(|e| match e {
            // Input is one-way: no reply to route.
            Effect::Post(Request::ShellInput { data, .. }) => b64_decode(data).ok(),
            _ => None,
        })
        .flatten()
        .collect()
}

fn event(kind: EventKind) -> Action {
    Action::SessionEvent(Box::new(Event {
        seq: 9,
        at: chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
        active_ms: 1000,
        origin: None,
        kind,
    }))
}

#[test]
fn keys_reach_the_shell_encoded() {
    let mut app = running_app(3600.0 * 1.5);
    assert_eq!(sent_input(&app.update(key(KeyCode::Char('l')))), b"l");
    assert_eq!(sent_input(&app.update(key(KeyCode::Enter))), b"\r");
    assert_eq!(sent_input(&app.update(key(KeyCode::Up))), b"\x1b[A");
    assert_eq!(sent_input(&app.update(ctrl('c'))), [0x03]);
    // The prefix twice sends the prefix key itself.
    assert!(sent_input(&app.update(ctrl('g'))).is_empty());
    assert_eq!(sent_input(&app.update(ctrl('g'))), [0x07]);
    // A key that only goes to the shell asks for no frame (its echo will);
    // one that changes our screen (the prefix badge) does.
    app.dirty = false;
    app.update(key(KeyCode::Char('x')));
    assert!(!app.dirty);
    app.update(ctrl('g'));
    assert!(app.dirty);
}

#[test]
fn application_cursor_mode_changes_the_arrows() {
    let mut app = running_app(5000.0);
    app.update(Action::ShellOutput {
        shell: 0,
        data: b"\x1b[?1h".to_vec(),
    });
    assert_eq!(sent_input(&app.update(key(KeyCode::Up))), b"\x1bOA");
}

#[test]
fn scoring_from_the_prefix_runs_once_at_a_time() {
    let mut app = running_app(5000.0);
    app.update(ctrl('g'));
    let effects = app.update(key(KeyCode::Char('s')));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Send(Pending::Score, Request::Score { .. })))
    );
    assert_eq!(app.scoring_since_s, Some(100.0));
    app.update(ctrl('g'));
    let again = app.update(key(KeyCode::Char('s')));
    assert!(
        !again
            .iter()
            .any(|e| matches!(e, Effect::Send(Pending::Score, _)))
    );
    // The shell stays usable while the score runs.
    assert_eq!(sent_input(&app.update(key(KeyCode::Char('x')))), b"x");
    app.update(Action::Reply {
        pending: Pending::Score,
        result: Err(ReplyError {
            code: None,
            message: "boom".into(),
        }),
    });
    assert_eq!(app.scoring_since_s, None);
}

#[test]
fn nothing_is_typed_into_a_paused_session() {
    let mut app = running_app(5000.0);
    app.update(event(EventKind::Paused {
        reason: PauseReason::Break,
        by: "alice".into(),
        note: None,
    }));
    assert_eq!(app.state(), Some(Phase::Paused));
    assert!(sent_input(&app.update(key(KeyCode::Char('a')))).is_empty());
    let notice = app.visible_notice().unwrap().text.clone();
    assert!(notice.contains("C-g p"), "{notice}");
    // Prefix p resumes.
    app.update(ctrl('g'));
    let effects = app.update(key(KeyCode::Char('p')));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Send(Pending::Resume, _)))
    );
}

#[test]
fn pausing_asks_for_a_reason() {
    let mut app = running_app(5000.0);
    app.update(ctrl('g'));
    app.update(key(KeyCode::Char('p')));
    assert_eq!(app.overlay, Some(Overlay::PauseChoice));
    let effects = app.update(key(KeyCode::Char('t')));
    let reason = effects.iter().find_map(|e| match e {
        Effect::Send(Pending::Pause, Request::Pause { reason, .. }) => Some(*reason),
        _ => None,
    });
    assert_eq!(reason, Some(PauseReason::TechnicalIssue));
    assert_eq!(app.overlay, None);
}

#[test]
fn notes_are_edited_then_sent() {
    let mut app = running_app(5000.0);
    app.update(ctrl('g'));
    app.update(key(KeyCode::Char('n')));
    for c in "try simd".chars() {
        app.update(key(KeyCode::Char(c)));
    }
    app.update(key(KeyCode::Backspace));
    app.update(Action::Paste("d!".into()));
    let effects = app.update(key(KeyCode::Enter));
    let text = effects.iter().find_map(|e| match e {
        Effect::Send(Pending::Note, Request::Note { text, .. }) => Some(text.clone()),
        _ => None,
    });
    assert_eq!(text.as_deref(), Some("try simd!"));
}

#[test]
fn warnings_ring_once_per_threshold() {
    let mut app = running_app(301.0);
    app.now_s += 2.0;
    let effects = app.update(Action::Tick);
    assert_eq!(effects, vec![Effect::Bell]);
    assert_eq!(app.visible_banner().unwrap().threshold_s, 300);
    // The server's own warning for the same threshold does not ring again.
    let effects = app.update(event(EventKind::Warning {
        threshold_s: 300,
        remaining_s: 299,
    }));
    assert!(!effects.contains(&Effect::Bell));
    app.now_s += 1.0;
    assert!(!app.update(Action::Tick).contains(&Effect::Bell));
}

#[test]
fn thresholds_passed_before_attaching_do_not_ring() {
    let mut app = running_app(200.0);
    app.now_s += 1.0;
    assert!(app.update(Action::Tick).is_empty());
}

#[test]
fn the_end_stops_input_and_shows_the_summary() {
    let mut app = running_app(5000.0);
    app.update(event(EventKind::Ended {
        reason: rebench::session::EndReason::BudgetExhausted,
        by: "system".into(),
        note: None,
    }));
    assert!(sent_input(&app.update(key(KeyCode::Char('a')))).is_empty());
    app.update(reply(Pending::Show, view_json("ended", 0.0)));
    assert_eq!(app.screen, Screen::Summary);
}

#[test]
fn resizes_reach_the_pty_and_the_screen_together() {
    let mut app = running_app(5000.0);
    let effects = app.update(Action::Resize(100, 30));
    let pane = app.areas().pane;
    assert_eq!(app.tabs[0].size(), (pane.height, pane.width));
    assert!(effects.iter().any(|e| matches!(
        e,
        Effect::Post(Request::ShellResize { shell: 0, cols, rows, .. })
            if *cols == pane.width && *rows == pane.height
    )));
}

#[test]
fn replies_without_a_score_log_keep_ours() {
    let mut app = running_app(5000.0);
    let mut paused = view_json("paused", 5000.0);
    paused["scores"] = serde_json::Value::Null;
    paused["pause_reason"] = "break".into();
    let effects = app.update(reply(Pending::Pause, paused.clone()));
    assert_eq!(app.view.as_ref().unwrap().scores.as_ref().unwrap().len(), 1);
    // Pushed events keep our log current: no second round trip for it.
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::Send(Pending::Show, _)))
    );
    // Without a log of our own, it is read.
    app.view.as_mut().unwrap().scores = None;
    let effects = app.update(reply(Pending::Pause, paused));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Send(Pending::Show, _)))
    );
}

#[test]
fn refused_input_is_reported_once() {
    let mut app = running_app(5000.0);
    for _ in 0..5 {
        let effects = app.update(Action::InputRefused {
            shell: 0,
            code: ErrorCode::InvalidState,
            message: "the session is not running".into(),
        });
        assert!(effects.is_empty());
    }
    assert!(app.visible_notice().unwrap().text.contains("not running"));
    // Refused because another client drives the shell now: attach again.
    let effects = app.update(Action::InputRefused {
        shell: 0,
        code: ErrorCode::Forbidden,
        message: "attach as driver to send input".into(),
    });
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Send(_, Request::ShellAttach { shell: 0, .. }))),
        "{effects:?}"
    );
}

#[test]
fn the_last_shell_exiting_opens_a_new_one() {
    let mut app = running_app(5000.0);
    let effects = app.update(Action::ShellExited { shell: 0 });
    assert!(app.tabs.is_empty());
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Send(Pending::ShellOpen, _)))
    );
}

#[test]
fn a_score_typed_in_the_shell_shows_the_scoring_indicator_until_its_entry_arrives() {
    let mut app = running_app(3600.0);
    assert_eq!(app.scoring_since_s, None);
    app.update(Action::ScoringStarted);
    assert_eq!(app.scoring_since_s, Some(100.0));
    let entry: rebench::session::ScoreEntry = serde_json::from_value(serde_json::json!({
        "phase": "intermediate", "requested_by": "alice", "requested_active_ms": 1000,
        "valid": true, "raw": 100.0, "normalized": 0.5, "message": "ok",
        "exit_code": 0, "duration_ms": 5
    }))
    .unwrap();
    let event = Event {
        seq: 9,
        at: chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
        active_ms: 2000,
        origin: None,
        kind: EventKind::Scored {
            entry: Box::new(entry),
        },
    };
    let effects = app.update(Action::SessionEvent(Box::new(event)));
    assert_eq!(app.scoring_since_s, None);
    // The entry joins our log from the push alone: no request for it.
    let view = app.view.as_ref().unwrap();
    let last = view.scores.as_ref().unwrap().last().unwrap();
    assert_eq!((last.run, last.raw), (1, Some(100.0)));
    assert_eq!(view.score_count, 2);
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::Send(..))),
        "{effects:?}"
    );
}

#[test]
fn pushed_pauses_and_resumes_cost_no_request() {
    let mut app = running_app(5000.0);
    let effects = app.update(event(EventKind::Paused {
        reason: PauseReason::Proctor,
        by: "ana (proctor)".into(),
        note: Some("fire alarm".into()),
    }));
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(app.state(), Some(Phase::Paused));
    assert_eq!(app.open_pause_note(), Some("fire alarm"));
    assert!(!app.pause_is_mine());
    let effects = app.update(event(EventKind::Resumed {
        by: "ana (proctor)".into(),
    }));
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(app.state(), Some(Phase::Running));
}

#[test]
fn a_tab_dropped_for_falling_behind_attaches_again_by_itself() {
    let mut app = running_app(3600.0);
    let effects = app.update(Action::ShellDetached {
        shell: 0,
        reason: "this client fell behind the shell's output".into(),
        fell_behind: true,
    });
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Send(_, Request::ShellAttach { shell: 0, .. }))),
        "{effects:?}"
    );
    assert!(app.tabs[0].gone.is_none());
    // Taken over by another client: the tab says so and waits for the key.
    let mut app = running_app(3600.0);
    let effects = app.update(Action::ShellDetached {
        shell: 0,
        reason: "another client took over this shell".into(),
        fell_behind: false,
    });
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::Send(_, Request::ShellAttach { .. }))),
        "{effects:?}"
    );
    assert!(
        app.tabs[0]
            .gone
            .as_deref()
            .unwrap_or("")
            .contains("took over")
    );
}

#[test]
fn a_server_shutdown_is_told_apart_from_a_lost_connection() {
    use rebench::tui::workspace::app::Exit;
    let exits = |effects: Vec<Effect>| -> Vec<Exit> {
        effects
            .into_iter()
            .filter_map(|e| match e {
                Effect::Exit(exit) => Some(exit),
                _ => None,
            })
            .collect()
    };
    // The server's notice.
    let mut app = running_app(5000.0);
    assert_eq!(
        exits(app.update(Action::ServerShutdown)),
        [Exit::ServerShutdown]
    );
    // A connection that just breaks is lost...
    let mut app = running_app(5000.0);
    assert_eq!(
        exits(app.update(Action::Disconnected("gone".into()))),
        [Exit::Lost("gone".into())]
    );
    // ...unless the session was just paused for the shutdown (the notice
    // did not make it).
    app.update(event(EventKind::Paused {
        reason: PauseReason::ServerShutdown,
        by: "rebench".into(),
        note: None,
    }));
    assert_eq!(
        exits(app.update(Action::Disconnected("gone".into()))),
        [Exit::ServerShutdown]
    );
}

#[test]
fn a_proctors_note_reaches_the_participant_with_the_bell() {
    let mut app = running_app(5000.0);
    let effects = app.update(event(EventKind::Note {
        text: "10 minutes to the fire drill".into(),
        by: "ana (proctor)".into(),
    }));
    assert!(effects.iter().any(|e| matches!(e, Effect::Bell)));
    let notice = app.visible_notice().unwrap().text.clone();
    assert_eq!(
        notice,
        "message from ana (proctor): 10 minutes to the fire drill"
    );
    // The participant's own note is not announced back to them.
    let effects = app.update(event(EventKind::Note {
        text: "mine".into(),
        by: "alice".into(),
    }));
    assert!(!effects.iter().any(|e| matches!(e, Effect::Bell)));
}

fn typed(app: &mut App, text: &str) -> Vec<Effect> {
    let mut effects = Vec::new();
    for c in text.chars() {
        effects.extend(app.update(key(KeyCode::Char(c))));
    }
    effects
}

fn copied(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Copy(text) => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// A running workspace whose shell printed 200 numbered lines, one saying ERROR.
fn app_with_history() -> App {
    let mut app = running_app(5000.0);
    let mut out = String::new();
    for i in 0..200 {
        out.push_str(&format!(
            "output {i}{}\r\n",
            if i == 42 { " ERROR disk full" } else { "" }
        ));
    }
    app.update(Action::ShellOutput {
        shell: 0,
        data: out.into_bytes(),
    });
    app
}

#[test]
fn the_scrollback_is_searched_older_then_newer() {
    let mut app = app_with_history();
    app.update(ctrl('g'));
    app.update(key(KeyCode::Char('[')));
    assert!(app.scroll_mode);
    typed(&mut app, "/error");
    assert!(app.search.as_ref().unwrap().editing);
    assert!(
        sent_input(&app.update(key(KeyCode::Enter))).is_empty(),
        "nothing reaches the shell"
    );
    let found = app.search.as_ref().unwrap().found.expect("a match");
    assert_eq!(found.row, 0, "brought to the top of the view");
    assert!(
        app.tabs[0]
            .parser
            .screen()
            .contents()
            .starts_with("output 42 ERROR disk full")
    );
    // Nothing older; the footer says so and the view stays.
    app.update(key(KeyCode::Char('n')));
    assert!(
        app.visible_notice()
            .unwrap()
            .text
            .contains("no older match")
    );
    assert_eq!(app.search.as_ref().unwrap().found, Some(found));
    // Esc leaves the history and the search.
    app.update(key(KeyCode::Esc));
    assert!(!app.scroll_mode && app.search.is_none());
    assert_eq!(app.tabs[0].scrolled(), 0);
}

#[test]
fn the_view_and_a_mouse_drag_are_copied_to_the_terminal_clipboard() {
    use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mut app = app_with_history();
    app.update(ctrl('g'));
    app.update(key(KeyCode::Char('[')));
    let view = copied(&app.update(key(KeyCode::Char('y'))));
    assert_eq!(view.len(), 1);
    assert_eq!(view[0].lines().count(), app.areas().pane.height as usize);
    assert!(app.visible_notice().unwrap().text.starts_with("copied"));
    // A drag over two rows of the pane copies those two lines.
    let pane = app.areas().pane;
    let mouse = |kind, row| {
        Action::Mouse(MouseEvent {
            kind,
            column: pane.x + 2,
            row: pane.y + row,
            modifiers: KeyModifiers::NONE,
        })
    };
    app.update(mouse(MouseEventKind::Down(MouseButton::Left), 3));
    app.update(mouse(MouseEventKind::Drag(MouseButton::Left), 4));
    let dragged = copied(&app.update(mouse(MouseEventKind::Up(MouseButton::Left), 4)));
    let shown: Vec<String> = app.tabs[0]
        .parser
        .screen()
        .rows(0, pane.width)
        .map(|r| r.trim_end().to_string())
        .collect();
    assert_eq!(dragged, [format!("{}\n{}", shown[3], shown[4])]);
    assert!(app.selection.is_none());
}

#[test]
fn a_tab_can_be_named_and_given_back_its_title() {
    let mut app = running_app(5000.0);
    app.update(ctrl('g'));
    app.update(key(KeyCode::Char('t')));
    assert!(matches!(app.overlay, Some(Overlay::RenameTab { .. })));
    typed(&mut app, "training");
    app.update(key(KeyCode::Enter));
    assert_eq!(app.tabs[0].label(), "training");
    app.update(ctrl('g'));
    app.update(key(KeyCode::Char('t')));
    for _ in 0.."training".len() {
        app.update(key(KeyCode::Backspace));
    }
    app.update(key(KeyCode::Enter));
    assert_eq!(app.tabs[0].label(), "shell");
}

#[test]
fn attaching_again_opens_the_tab_last_typed_into() {
    let mut app = App::new(
        "s1",
        &Config::default(),
        Theme { color: false },
        Rect::new(0, 0, 140, 45),
    );
    app.update(reply(Pending::Show, view_json("running", 5000.0)));
    let shells = serde_json::json!([
        {"shell": 1, "cols": 80, "rows": 24, "alive": true, "has_driver": false,
         "last_input_at": "2027-01-15T09:00:00Z"},
        {"shell": 4, "cols": 80, "rows": 24, "alive": true, "has_driver": false,
         "last_input_at": "2027-01-15T09:30:00Z"},
        {"shell": 6, "cols": 80, "rows": 24, "alive": true, "has_driver": false}
    ]);
    app.update(reply(Pending::ShellList, shells));
    assert_eq!(app.tabs.len(), 3);
    assert_eq!(app.tabs[app.active_tab].shell, 4);
}

mod partial_frames {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use rebench::tui::frames::Frames;
    use rebench::tui::runtime::ClientApp;

    /// The frame the runtime would draw now: partial when the app says so.
    /// Returns whether it was partial.
    fn frame(app: &mut App, terminal: &mut Terminal<TestBackend>, frames: &mut Frames) -> bool {
        app.before_frame();
        assert!(app.needs_draw());
        let partly = match app.partial_frame() {
            Some(partial) => frames
                .partial(terminal, &partial, |buf| app.draw_partial(buf, &partial))
                .unwrap(),
            None => false,
        };
        if !partly {
            frames.full(terminal, |f| app.draw(f)).unwrap();
        }
        app.drawn();
        partly
    }

    /// The whole screen drawn afresh.
    fn fresh(app: &App) -> ratatui::buffer::Buffer {
        let area = app.area;
        let mut terminal = Terminal::new(TestBackend::new(area.width, area.height)).unwrap();
        terminal.draw(|f| app.draw(f)).unwrap();
        terminal.backend().buffer().clone()
    }

    fn output(app: &mut App, shell: u32, data: &[u8]) {
        app.update(Action::ShellOutput {
            shell,
            data: data.to_vec(),
        });
    }

    #[test]
    fn an_echo_redraws_its_row_alone_and_the_screen_stays_right() {
        let mut app = running_app(5000.0);
        let mut terminal = Terminal::new(TestBackend::new(140, 45)).unwrap();
        let mut frames = Frames::default();
        assert!(!frame(&mut app, &mut terminal, &mut frames));
        let pane = app.areas().pane;

        // A typed key's echo: only the prompt's row, and the cursor after it.
        output(&mut app, 0, b"l");
        assert!(!app.dirty && app.pane_dirty);
        app.before_frame();
        let partial = app.partial_frame().unwrap();
        assert_eq!(partial.rows, vec![pane.y]);
        assert_eq!(
            partial.cursor,
            Some(ratatui::layout::Position::new(pane.x + 3, pane.y))
        );
        assert!(frame(&mut app, &mut terminal, &mut frames));
        assert_eq!(terminal.backend().buffer(), &fresh(&app));

        // A screenful that scrolls, in colour: still partial, still right.
        for i in 0..60 {
            output(
                &mut app,
                0,
                format!("\x1b[3{}mline {i}\x1b[0m\r\n", i % 8).as_bytes(),
            );
        }
        assert!(frame(&mut app, &mut terminal, &mut frames));
        assert_eq!(terminal.backend().buffer(), &fresh(&app));

        // The clock moves: a full frame, drawn over what partial frames left.
        app.now_s += 30.0;
        app.dirty = true;
        output(&mut app, 0, b"\x1b[2J\x1b[Hcleared");
        assert!(!frame(&mut app, &mut terminal, &mut frames));
        assert_eq!(terminal.backend().buffer(), &fresh(&app));
    }

    #[test]
    fn output_that_changes_more_than_the_pane_draws_everything() {
        let mut app = running_app(5000.0);
        let mut terminal = Terminal::new(TestBackend::new(140, 45)).unwrap();
        let mut frames = Frames::default();
        frame(&mut app, &mut terminal, &mut frames);

        // A title renames the tab.
        output(&mut app, 0, b"\x1b]2;vim\x07");
        assert!(app.dirty);
        assert!(!frame(&mut app, &mut terminal, &mut frames));

        // Over an overlay, or scrolled back, the pane is not drawn alone.
        app.overlay = Some(Overlay::Help);
        app.dirty = true;
        frame(&mut app, &mut terminal, &mut frames);
        output(&mut app, 0, b"x");
        assert!(!frame(&mut app, &mut terminal, &mut frames));
        assert_eq!(terminal.backend().buffer(), &fresh(&app));
        // The overlay goes: the frame that removes it is full, the next echo partial.
        app.overlay = None;
        app.dirty = true;
        assert!(!frame(&mut app, &mut terminal, &mut frames));
        output(&mut app, 0, b"y");
        assert!(frame(&mut app, &mut terminal, &mut frames));
        assert_eq!(terminal.backend().buffer(), &fresh(&app));
    }

    #[test]
    fn after_a_key_the_echo_is_drawn_without_waiting_for_the_frame_gap() {
        let app = running_app(5000.0);
        assert_eq!(app.frame_gap(true), std::time::Duration::ZERO);
        assert_eq!(app.frame_gap(false), rebench::tui::runtime::FRAME_GAP);
    }

    #[test]
    fn a_shell_not_shown_asks_for_no_frame() {
        let mut app = running_app(5000.0);
        let pane = app.areas().pane;
        let mut other = ShellTab::new(1, pane.height, pane.width);
        other.load_screen(&attach_reply(pane.height, pane.width), b"$ ");
        app.tabs.push(other);
        app.dirty = false;
        output(&mut app, 1, b"busy\r\n");
        assert!(!app.dirty && !app.pane_dirty);
        assert!(!app.wants_frame());
    }
}

#[test]
fn a_queued_session_waits_on_the_start_screen_until_its_grant_rings() {
    let mut app = App::new(
        "s1",
        &Config::default(),
        Theme { color: false },
        Rect::new(0, 0, 140, 45),
    );
    app.now_s = 100.0;
    let mut queued = view_json("created", 7200.0);
    queued["state"] = "queued".into();
    queued["waiting_for"] = "1 GPU (H100) (0 free)".into();
    queued["queue_position"] = 2.into();
    queued["scores"] = serde_json::json!([]);
    app.update(reply(Pending::Show, queued));
    assert_eq!(app.screen, Screen::Start);
    assert_eq!(app.state(), Some(Phase::Queued));
    // Enter does not try to start a clock that cannot start.
    let effects = app.update(key(KeyCode::Enter));
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::Send(_, Request::Begin { .. }))),
        "{effects:?}"
    );
    // Its place in line is read again while it waits.
    app.now_s = 104.0;
    let effects = app.update(Action::Tick);
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Send(_, Request::Show { .. }))),
        "{effects:?}"
    );
    // The grant arrives: the bell, and the session can start.
    let grant = rebench::hardware::DeviceGrant {
        host: "local".into(),
        gpus: vec![rebench::hardware::GrantedGpu {
            index: 1,
            uuid: "GPU-1".into(),
            model: "H100".into(),
        }],
        cpus: vec![3],
        shared_cpus: false,
        cpu_weight: 1,
        memory_gb: 16.0,
    };
    let effects = app.update(event(EventKind::Granted { grant }));
    assert!(effects.contains(&Effect::Bell), "{effects:?}");
    assert_eq!(app.state(), Some(Phase::Created));
    assert_eq!(app.screen, Screen::Start);
    let effects = app.update(key(KeyCode::Enter));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Send(_, Request::Begin { .. }))),
        "{effects:?}"
    );
}
