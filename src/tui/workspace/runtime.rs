//! The event loop: terminal events and server lines become `Action`s, the
//! app's `Effect`s become requests, and the screen is drawn at most ~60
//! times a second, only when something changed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ratatui::DefaultTerminal;
use ratatui::crossterm::event::Event;
use ratatui::layout::Rect;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::time::{MissedTickBehavior, interval, sleep_until};

use super::app::{Action, App, Effect, Exit};
use super::connection::{Connection, Incoming};
use super::ui;
use crate::tui::terminal::{self, drain_queued};

/// The shortest time between two frames (~60 fps).
const FRAME_GAP: Duration = Duration::from_millis(16);
/// How often the session is re-read from the server.
const RESYNC_EVERY: Duration = Duration::from_secs(10);
/// Lines taken from a queue before looking at the other queues again.
const BATCH: usize = 512;

/// Why the loop ended.
pub enum Ending {
    App(Exit),
    Signal(&'static str),
}

pub async fn run(
    mut terminal: DefaultTerminal,
    mut app: App,
    mut conn: Connection,
    mut server: mpsc::Receiver<Incoming>,
    paths: &crate::paths::DataPaths,
) -> anyhow::Result<Ending> {
    let started = Instant::now();
    let now = move || started.elapsed().as_secs_f64();
    let stop = Arc::new(AtomicBool::new(false));
    let mut keys = terminal::spawn_event_reader(stop.clone());
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let mut tick = interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut resync = interval(RESYNC_EVERY);
    resync.set_missed_tick_behavior(MissedTickBehavior::Skip);
    resync.tick().await;

    let size = terminal.size()?;
    app.area = Rect::new(0, 0, size.width, size.height);
    app.now_s = now();
    let first = app.start();
    let mut last_draw: Option<Instant> = None;
    if let Some(exit) = perform(&mut conn, first).await? {
        stop.store(true, Ordering::Relaxed);
        return Ok(Ending::App(exit));
    }

    let ending = loop {
        let next_frame = last_draw
            .map(|t| t + FRAME_GAP)
            .unwrap_or_else(Instant::now);
        let mut actions: Vec<Action> = Vec::new();
        tokio::select! {
            ev = keys.recv() => match ev {
                Some(ev) => {
                    actions.extend(terminal_action(ev));
                    drain_queued(&mut keys, &mut actions, BATCH, terminal_action);
                }
                None => break Ending::App(Exit::Lost("the terminal closed".into())),
            },
            line = server.recv(), if app.reconnect.is_none() => match line {
                Some(line) => {
                    actions.extend(conn.route(line));
                    // Coalesce an output flood: everything queued, then one frame.
                    drain_queued(&mut server, &mut actions, BATCH, |line| conn.route(line));
                }
                None => actions.push(Action::Disconnected("the server closed the connection".into())),
            },
            _ = sleep_until(reconnect_due(&app, started)), if app.reconnect.is_some() => {
                app.now_s = now();
                // Never starts a server: the operator stopped it, or it crashed.
                match Connection::reopen(paths, &app.session).await {
                    Ok((new_conn, new_server)) => {
                        conn = new_conn;
                        server = new_server;
                        let effects = app.reconnected();
                        if let Some(e) = perform(&mut conn, effects).await? {
                            break Ending::App(e);
                        }
                    }
                    Err(e) => app.reconnect_failed(format!("{e:#}")),
                }
            },
            _ = tick.tick() => actions.push(Action::Tick),
            _ = resync.tick() => actions.push(Action::Resync),
            _ = sleep_until(next_frame.into()), if app.dirty => {}
            _ = sigterm.recv() => break Ending::Signal("SIGTERM"),
            _ = sighup.recv() => break Ending::Signal("SIGHUP"),
        }
        let mut exit = None;
        for action in actions {
            app.now_s = now();
            let effects = app.update(action);
            // Keystrokes go out now, not at the next frame.
            if let Some(e) = perform(&mut conn, effects).await? {
                exit = Some(match e {
                    Exit::Lost(why) => app.exit_for_lost(why),
                    other => other,
                });
                break;
            }
        }
        match exit {
            // The server went away: wait for it rather than leave.
            Some(e @ (Exit::Lost(_) | Exit::ServerShutdown)) => app.lost_server(&e),
            Some(e) => break Ending::App(e),
            None => {}
        }
        let due = last_draw.is_none_or(|t| t.elapsed() >= FRAME_GAP);
        if app.dirty && due {
            app.now_s = now();
            terminal.draw(|frame| ui::draw(&app, frame))?;
            app.dirty = false;
            last_draw = Some(Instant::now());
        }
    };
    stop.store(true, Ordering::Relaxed);
    Ok(ending)
}

/// When the next reconnection try is due, as a tokio instant.
fn reconnect_due(app: &App, started: Instant) -> tokio::time::Instant {
    let at_s = app.reconnect.as_ref().map_or(0.0, |r| r.next_s).max(0.0);
    (started + Duration::from_secs_f64(at_s)).into()
}

/// Carries out effects; returns an exit if one was asked for.
async fn perform(conn: &mut Connection, effects: Vec<Effect>) -> anyhow::Result<Option<Exit>> {
    for effect in effects {
        match effect {
            Effect::Send(pending, request) => {
                if let Err(e) = conn.send(pending, request).await {
                    return Ok(Some(Exit::Lost(e.to_string())));
                }
            }
            Effect::Bell => terminal::bell(),
            Effect::Exit(exit) => return Ok(Some(exit)),
        }
    }
    Ok(None)
}

fn terminal_action(event: Event) -> Option<Action> {
    match event {
        Event::Key(key) => Some(Action::Key(key)),
        Event::Paste(text) => Some(Action::Paste(text)),
        Event::Mouse(mouse) => Some(Action::Mouse(mouse)),
        Event::Resize(cols, rows) => Some(Action::Resize(cols, rows)),
        Event::FocusGained | Event::FocusLost => None,
    }
}
