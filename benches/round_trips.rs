//! Round trips of the workspace: how many lines a keystroke, a score and a
//! pause cost between the real workspace app (no terminal) and a real
//! server. Run with `cargo bench --bench round_trips`; it prints what it
//! counted (no assertion: numbers, not pass/fail).
//!
//! Before the shared reducer and one-way input (issue 17), as filed: a
//! keystroke was one request and one reply; a score from the prefix key
//! cost the score request and two `show` round trips; a pause three.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::time::{Duration, Instant};

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use rebench::client::Client;
use rebench::protocol::{Credentials, Request, ServerLine};
use rebench::session::Kind;
use rebench::tui::connection::{Connection, Incoming};
use rebench::tui::runtime::{ClientApp, Effect, Now};
use rebench::tui::widgets::theme::Theme;
use rebench::tui::workspace::app::{App, Pending};
use rebench::tui::workspace::config::Config;
use tokio::sync::mpsc;

const KEYS: usize = 200;
const SCORES: usize = 3;

/// What crossed the socket.
#[derive(Default, Debug, Clone, Copy)]
struct Count {
    requests: usize,
    one_way: usize,
    replies: usize,
    pushes: usize,
    shows: usize,
}

struct Harness {
    app: App,
    conn: Connection<Pending>,
    lines: mpsc::Receiver<Incoming>,
    count: Count,
    started: Instant,
}

impl Harness {
    fn now(&self) -> Now {
        Now {
            since_start_s: self.started.elapsed().as_secs_f64(),
            wall: chrono::Utc::now(),
        }
    }

    async fn perform(&mut self, effects: Vec<Effect<Pending, rebench::tui::workspace::app::Exit>>) {
        for effect in effects {
            match effect {
                Effect::Send(pending, request) => {
                    self.count.requests += 1;
                    if matches!(request, Request::Show { .. }) {
                        self.count.shows += 1;
                    }
                    self.conn.send(pending, request).await.unwrap();
                }
                Effect::Post(request) => {
                    self.count.one_way += 1;
                    self.conn.post(request).await.unwrap();
                }
                Effect::Bell | Effect::Copy(_) | Effect::Exit(_) => {}
            }
        }
    }

    async fn act(&mut self, action: rebench::tui::workspace::app::Action) {
        let now = self.now();
        self.app.set_now(now);
        let effects = ClientApp::update(&mut self.app, action);
        self.perform(effects).await;
    }

    /// Handles server lines until none came for `quiet`.
    async fn drain(&mut self, quiet: Duration) {
        while let Ok(Some(line)) = tokio::time::timeout(quiet, self.lines.recv()).await {
            match &line {
                Incoming::Line(ServerLine::Response { .. } | ServerLine::Error { .. }) => {
                    self.count.replies += 1
                }
                Incoming::Line(ServerLine::Event { .. }) => self.count.pushes += 1,
                Incoming::Closed(_) => {}
            }
            if let Some(action) = self.conn.route(line).and_then(App::server_action) {
                self.act(action).await;
            }
        }
    }

    async fn key(&mut self, code: KeyCode, modifiers: KeyModifiers) {
        self.act(rebench::tui::workspace::app::Action::Key(KeyEvent::new(
            code, modifiers,
        )))
        .await;
    }
}

fn per(n: usize, what: usize) -> f64 {
    what as f64 / n as f64
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut bench = common::BenchServer::start("rt", &[("REBENCH_BACKEND", "local")]).await?;
    let session = bench.running_session(Kind::Human).await?;
    let admin = &mut bench.admin;
    let creds: Credentials = admin
        .call(Request::Credentials {
            session: session.id.clone(),
        })
        .await?;
    let client = Client::connect(
        std::path::Path::new(&creds.socket),
        Some(&creds.token),
        "bench workspace",
    )
    .await?;
    let (conn, lines) = Connection::start(client);
    let app = App::new(
        &session.id,
        &Config::default(),
        Theme { color: false },
        Rect::new(0, 0, 140, 45),
    );
    let mut h = Harness {
        app,
        conn,
        lines,
        count: Count::default(),
        started: Instant::now(),
    };
    let first = h.app.start();
    h.perform(first).await;
    // Connected, a shell open and attached.
    h.drain(Duration::from_millis(1500)).await;
    let setup = h.count;
    println!("opening the workspace: {setup:?}");

    h.count = Count::default();
    for i in 0..KEYS {
        let c = if i % 20 == 19 { '\n' } else { 'x' };
        let code = if c == '\n' {
            KeyCode::Enter
        } else {
            KeyCode::Char(c)
        };
        h.key(code, KeyModifiers::NONE).await;
    }
    h.drain(Duration::from_millis(800)).await;
    let keys = h.count;
    println!(
        "{KEYS} keystrokes: {:.2} requests with a reply, {:.2} one-way lines and {:.2} replies per keystroke ({} output pushes in all)",
        per(KEYS, keys.requests),
        per(KEYS, keys.one_way),
        per(KEYS, keys.replies),
        keys.pushes
    );

    h.count = Count::default();
    for _ in 0..SCORES {
        h.key(KeyCode::Char('g'), KeyModifiers::CONTROL).await;
        h.key(KeyCode::Char('s'), KeyModifiers::NONE).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        while h.app.scoring_since_s.is_some() && Instant::now() < deadline {
            h.drain(Duration::from_millis(200)).await;
        }
        h.drain(Duration::from_millis(500)).await;
    }
    let scores = h.count;
    println!(
        "{SCORES} scores from the prefix key: {:.2} requests ({:.2} of them show) and {:.2} replies per score",
        per(SCORES, scores.requests),
        per(SCORES, scores.shows),
        per(SCORES, scores.replies)
    );

    h.count = Count::default();
    h.key(KeyCode::Char('g'), KeyModifiers::CONTROL).await;
    h.key(KeyCode::Char('p'), KeyModifiers::NONE).await;
    h.key(KeyCode::Char('b'), KeyModifiers::NONE).await; // a break
    h.drain(Duration::from_millis(800)).await;
    let pause = h.count;
    println!(
        "a pause: {} requests ({} show), {} replies",
        pause.requests, pause.shows, pause.replies
    );

    bench.stop().await;
    Ok(())
}
