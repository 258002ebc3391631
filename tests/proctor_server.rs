//! The dashboard against a real server: its actions change the session and
//! are recorded with the reason and the proctor's name; participants cannot
//! reach proctor operations; the mirror shows what the driver's shell printed.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::time::{Duration, Instant};

use chrono::Utc;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tokio::sync::mpsc;

use common::{TestServer, fixture_env};
use rebench::client::Client;
use rebench::protocol::{AttachMode, ErrorCode, Request, SessionView, ShellInfo, b64_encode};
use rebench::session::{Event, EventKind, Kind, PauseReason, Phase};
use rebench::tui::connection::{Connection, Incoming};
use rebench::tui::proctor::access;
use rebench::tui::proctor::app::{Action, App, Effect, Pending};
use rebench::tui::proctor::settings::Thresholds;
use rebench::tui::proctor::ui;
use rebench::tui::runtime::ClientApp;
use rebench::tui::widgets::theme::Theme;

const ME: &str = "ana (proctor)";

/// The dashboard without a terminal: effects go to the server, its lines
/// come back as actions.
struct Proctor {
    app: App,
    conn: Connection<Pending>,
    lines: mpsc::Receiver<Incoming>,
    /// Every request the dashboard sent.
    sent: Vec<Request>,
}

impl Proctor {
    async fn connect(server: &TestServer) -> Proctor {
        let client = access::connect_admin(&server.paths, ME)
            .await
            .expect("admin connection");
        let (conn, lines) = Connection::start(client);
        let mut app = App::new(
            ME,
            Thresholds::default(),
            Theme { color: false },
            Utc::now(),
        );
        app.update(Action::Resize(160, 40));
        let first = app.start();
        let mut p = Proctor {
            app,
            conn,
            lines,
            sent: Vec::new(),
        };
        p.perform(first).await;
        p
    }

    async fn perform(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            if let Effect::Send(pending, request) = effect {
                self.sent.push(request.clone());
                self.conn.send(pending, request).await.expect("send");
            }
        }
    }

    async fn act(&mut self, action: Action) {
        self.app.now = Utc::now();
        let effects = self.app.update(action);
        self.perform(effects).await;
    }

    async fn key(&mut self, code: KeyCode) {
        self.act(Action::Key(KeyEvent::new(code, KeyModifiers::NONE)))
            .await;
    }

    async fn typed(&mut self, text: &str) {
        for c in text.chars() {
            self.key(KeyCode::Char(c)).await;
        }
    }

    /// Handles server lines until `done` holds (panics after 20 s).
    async fn until(&mut self, what: &str, done: impl Fn(&App) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(&self.app) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "timed out waiting for {what}");
            match tokio::time::timeout(left, self.lines.recv()).await {
                Ok(Some(line)) => {
                    if let Some(action) = self.conn.route(line).and_then(App::server_action) {
                        self.act(action).await;
                    }
                }
                Ok(None) => panic!("the connection closed while waiting for {what}"),
                Err(_) => panic!("timed out waiting for {what}"),
            }
        }
    }

    fn state(&self, id: &str) -> Option<Phase> {
        self.app.fleet.get(id).map(|t| t.view.state)
    }

    fn screen(&self) -> String {
        let mut terminal = Terminal::new(TestBackend::new(160, 40)).expect("terminal");
        terminal
            .draw(|frame| ui::draw(&self.app, frame))
            .expect("draw");
        terminal.backend().to_string()
    }
}

async fn events(server: &TestServer, id: &str) -> Vec<Event> {
    server
        .admin()
        .await
        .call(Request::Events { session: id.into() })
        .await
        .expect("events")
}

#[tokio::test]
async fn actions_change_the_session_and_are_recorded_with_reason_and_author() {
    let server = TestServer::start();
    let (_env_dir, env) = fixture_env(|m| m);
    let view = server.create_running(&env, Some(3600)).await;
    let id = view.id.clone();
    let mut p = Proctor::connect(&server).await;
    p.until("the session's score log", |a| {
        a.fleet.get(&id).is_some_and(|t| t.scores_loaded)
    })
    .await;
    p.app.selected = Some(id.clone());

    p.key(KeyCode::Char('p')).await;
    p.typed("fire alarm").await;
    p.key(KeyCode::Enter).await;
    p.until("the pause", |a| {
        a.fleet
            .get(&id)
            .is_some_and(|t| t.view.state == Phase::Paused)
    })
    .await;
    assert_eq!(
        p.app.fleet.get(&id).and_then(|t| t.view.pause_reason),
        Some(PauseReason::Proctor)
    );

    p.key(KeyCode::Char('r')).await;
    p.typed("alarm over").await;
    p.key(KeyCode::Enter).await;
    p.until("the resume and its note", |a| {
        a.fleet.get(&id).is_some_and(|t| {
            t.view.state == Phase::Running
                && t.view.notes.iter().any(|n| n.text.contains("alarm over"))
        })
    })
    .await;

    // Extend: the duration field first (30m is offered), then the reason.
    p.key(KeyCode::Char('x')).await;
    p.key(KeyCode::Enter).await;
    p.typed("network outage").await;
    p.key(KeyCode::Enter).await;
    p.until("the extension", |a| {
        a.fleet.get(&id).is_some_and(|t| t.view.budget_s == 5400.0)
    })
    .await;

    p.key(KeyCode::Char('n')).await;
    p.typed("asked about the scorer").await;
    p.key(KeyCode::Enter).await;

    let scores_before = p.app.fleet.get(&id).map(|t| t.scores.len()).unwrap_or(0);
    p.key(KeyCode::Char('s')).await;
    p.key(KeyCode::Enter).await;
    p.until("the proctor's score", |a| {
        a.fleet
            .get(&id)
            .is_some_and(|t| t.scores.len() > scores_before)
    })
    .await;

    p.key(KeyCode::Char('E')).await;
    p.typed("caught copying").await;
    p.key(KeyCode::Enter).await;
    assert_eq!(
        p.state(&id),
        Some(Phase::Running),
        "ending waits for the confirmation"
    );
    p.key(KeyCode::Char('y')).await;
    p.until("the end and its note", |a| {
        a.fleet.get(&id).is_some_and(|t| {
            t.view.state == Phase::Ended && t.view.end_note.as_deref() == Some("caught copying")
        })
    })
    .await;

    let log = events(&server, &id).await;
    let has = |check: &dyn Fn(&EventKind) -> bool| log.iter().any(|e| check(&e.kind));
    assert!(has(
        &|k| matches!(k, EventKind::Paused { reason: PauseReason::Proctor, by, note }
        if by == ME && note.as_deref() == Some("fire alarm"))
    ));
    assert!(has(&|k| matches!(k, EventKind::Resumed { by } if by == ME)));
    assert!(has(&|k| matches!(k, EventKind::Note { text, by }
        if by == ME && text == "resumed the session: alarm over")));
    assert!(has(
        &|k| matches!(k, EventKind::Extended { by_ms: 1_800_000, reason, by }
        if by == ME && reason == "network outage")
    ));
    assert!(has(&|k| matches!(k, EventKind::Note { text, by }
        if by == ME && text == "asked about the scorer")));
    assert!(has(
        &|k| matches!(k, EventKind::Scored { entry } if entry.requested_by == ME)
    ));
    // The reason travels with the end (the participant's summary shows it).
    assert!(has(&|k| matches!(k, EventKind::Ended { reason, by, note }
        if by == ME && reason.as_str() == "ended_by_proctor"
            && note.as_deref() == Some("caught copying"))));
    let shown = p.screen();
    assert!(shown.contains("ENDED by proctor"), "{shown}");
}

#[tokio::test]
async fn a_participant_token_cannot_reach_proctor_operations() {
    let server = TestServer::start();
    let (_env_dir, env) = fixture_env(|m| m);
    let view = server.create_running(&env, None).await;
    let id = view.id.clone();
    let mut participant = server.participant(&id).await;
    assert_eq!(participant.hello.role, "participant");
    let refused = [
        Request::Subscribe { session: None },
        Request::ListSessions,
        Request::Extend {
            session: id.clone(),
            by_s: 600,
            reason: "more please".into(),
        },
        Request::End {
            session: id.clone(),
            reason: None,
            note: None,
        },
        Request::Events {
            session: id.clone(),
        },
    ];
    for request in refused {
        let err = participant
            .request(request.clone())
            .await
            .expect_err("refused");
        assert_eq!(err.code(), Some(ErrorCode::Forbidden), "{request:?}: {err}");
    }
    // Pausing as "the proctor" is not a participant's pause either.
    let err = participant
        .request(Request::Pause {
            session: id.clone(),
            reason: PauseReason::Proctor,
            note: None,
        })
        .await
        .expect_err("refused");
    assert!(
        matches!(
            err.code(),
            Some(ErrorCode::Forbidden | ErrorCode::BadRequest)
        ),
        "{err}"
    );
    let after = server.show(&id).await;
    assert_eq!(after.state, Phase::Running);
    assert_eq!(after.budget_s, view.budget_s);

    // A proctor's pause cannot be lifted by the participant.
    let mut admin = Client::connect(&server.paths.socket(), None, ME)
        .await
        .expect("admin");
    // Not even an admin may record the system's own reasons: a fake
    // crash would raise a CRASH alert, a fake scoring pause hide time.
    for reason in [PauseReason::CrashRecovery, PauseReason::Scoring] {
        let err = admin
            .request(Request::Pause {
                session: id.clone(),
                reason,
                note: None,
            })
            .await
            .expect_err("refused");
        assert_eq!(err.code(), Some(ErrorCode::Forbidden), "{reason}: {err}");
        assert!(
            err.to_string().contains("recorded by the server itself"),
            "{err}"
        );
    }
    assert_eq!(server.show(&id).await.state, Phase::Running);
    let _: SessionView = admin
        .call(Request::Pause {
            session: id.clone(),
            reason: PauseReason::Proctor,
            note: Some("check".into()),
        })
        .await
        .expect("pause");
    let err = participant
        .request(Request::Resume {
            session: id.clone(),
        })
        .await
        .expect_err("refused");
    assert!(err.code().is_some(), "{err}");
    assert_eq!(server.show(&id).await.state, Phase::Paused);

    // The participant socket does not make an admin either.
    let text = access::describe(
        &server.paths.participant_socket(),
        &rebench::client::ClientError::Server {
            code: ErrorCode::Forbidden,
            message: err.to_string(),
        },
    );
    assert!(text.contains("admin socket"), "{text}");
}

#[tokio::test]
async fn the_mirror_shows_what_the_drivers_shell_printed_and_sends_nothing() {
    let server = TestServer::start();
    let (_env_dir, env) = fixture_env(|m| m);
    let view = server.create(&env, None, Kind::Human).await;
    let id = view.id.clone();
    let _: SessionView = server
        .admin()
        .await
        .call(Request::Begin {
            session: id.clone(),
        })
        .await
        .expect("begin");

    // The participant opens a shell, drives it, and types.
    let mut driver = server.participant(&id).await;
    let shell: ShellInfo = driver
        .call(Request::ShellOpen {
            session: id.clone(),
            cols: 80,
            rows: 24,
        })
        .await
        .expect("shell");
    let _: serde_json::Value = driver
        .call(Request::ShellAttach {
            session: id.clone(),
            shell: shell.shell,
            mode: AttachMode::Driver,
        })
        .await
        .expect("attach");
    let input = |text: &str| Request::ShellInput {
        session: id.clone(),
        shell: shell.shell,
        data: b64_encode(text.as_bytes()),
    };
    driver
        .send(input("seq -f 'hist-%g' 1 60; echo before-$((6*7))\r"))
        .await
        .expect("input");

    let mut p = Proctor::connect(&server).await;
    p.until("the session", |a| a.fleet.get(&id).is_some()).await;
    p.act(Action::Tick).await;
    let effects = p.app.open_detail(&id);
    p.perform(effects).await;
    let mirror_has = |text: &'static str| {
        move |a: &App| {
            a.detail
                .as_ref()
                .and_then(|d| d.mirrors.first())
                .is_some_and(|m| m.tab.parser.screen().contents().contains(text))
        }
    };
    // What was printed before the proctor came is in the attach screen…
    p.until("the earlier output", mirror_has("before-42")).await;
    // …and what scrolled off it is in the mirror's history.
    assert!(!mirror_has("hist-1\n")(&p.app));
    p.key(KeyCode::Char('g')).await;
    let top = p.app.detail.as_ref().unwrap().mirrors[0]
        .tab
        .parser
        .screen()
        .contents();
    assert!(
        top.contains("hist-1\n") && top.contains("hist-2\n"),
        "{top}"
    );
    assert!(p.screen().contains("lines back"));
    p.key(KeyCode::Char('G')).await;
    assert_eq!(p.app.detail.as_ref().unwrap().mirrors[0].tab.scrolled(), 0);

    driver
        .send(input("echo after-$((7*8))\r"))
        .await
        .expect("input");
    p.until("the live output", mirror_has("after-56")).await;
    let shown = p.screen();
    assert!(shown.contains("after-56"), "{shown}");
    assert!(shown.contains("read-only mirror"), "{shown}");

    // Keys in the detail view are commands, never shell input.
    for c in ['l', 'z', '1', ']', 'v', 'v'] {
        p.key(KeyCode::Char(c)).await;
    }
    p.key(KeyCode::Enter).await;
    p.key(KeyCode::Esc).await;
    assert!(
        !p.sent
            .iter()
            .any(|r| matches!(r, Request::ShellInput { .. } | Request::ShellResize { .. })),
        "the mirror sent input: {:?}",
        p.sent
    );
    assert!(p.sent.iter().any(|r| matches!(
        r,
        Request::ShellAttach {
            mode: AttachMode::Watch,
            ..
        }
    )));
    assert!(
        !p.sent.iter().any(|r| matches!(
            r,
            Request::ShellAttach {
                mode: AttachMode::Driver,
                ..
            }
        )),
        "the proctor must never take the shell over"
    );
}
