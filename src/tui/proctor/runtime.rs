//! The event loop: terminal events and server lines become `Action`s, the
//! app's `Effect`s become requests. Frames are drawn at most every 16 ms
//! and only when something changed; a 1 s tick moves the clocks and a slow
//! resync re-reads activity times (keystrokes are not pushed).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
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

/// The shortest time between two frames after a key (~60 fps)…
const FRAME_GAP: Duration = Duration::from_millis(16);
/// …and after server events alone: a busy fleet redraws at most 20 times a
/// second, and the rows are recomputed only for a frame.
const PUSH_FRAME_GAP: Duration = Duration::from_millis(50);
const TICK: Duration = Duration::from_secs(1);
/// How often every session is re-read (idle times, lost events).
const RESYNC_EVERY: Duration = Duration::from_secs(20);
/// Lines taken from a queue before looking at the other queues again.
const BATCH: usize = 1024;

pub enum Ending {
    App(Exit),
    Signal(&'static str),
}

pub async fn run(
    mut terminal: DefaultTerminal,
    mut app: App,
    mut conn: Connection,
    mut server: mpsc::Receiver<Incoming>,
) -> anyhow::Result<Ending> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut keys = terminal::spawn_event_reader(stop.clone());
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let mut tick = interval(TICK);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut resync = interval(RESYNC_EVERY);
    resync.set_missed_tick_behavior(MissedTickBehavior::Skip);
    resync.tick().await;

    let size = terminal.size()?;
    app.area = Rect::new(0, 0, size.width, size.height);
    app.now = Utc::now();
    let first = app.start();
    if let Some(exit) = perform(&mut conn, first).await? {
        stop.store(true, Ordering::Relaxed);
        return Ok(Ending::App(exit));
    }
    let mut last_draw: Option<Instant> = None;
    // Whether the proctor did something since the last frame (answer fast).
    let mut keyed = false;
    let ending = loop {
        let gap = if keyed { FRAME_GAP } else { PUSH_FRAME_GAP };
        let next_frame = last_draw.map(|t| t + gap).unwrap_or_else(Instant::now);
        let mut actions: Vec<Action> = Vec::new();
        tokio::select! {
            ev = keys.recv() => match ev {
                Some(ev) => {
                    actions.extend(terminal_action(ev));
                    drain_queued(&mut keys, &mut actions, BATCH, terminal_action);
                }
                None => break Ending::App(Exit::Lost("the terminal closed".into())),
            },
            line = server.recv() => match line {
                Some(line) => {
                    actions.extend(conn.route(line));
                    // A burst of events (200 agents) becomes one recompute and one frame.
                    drain_queued(&mut server, &mut actions, BATCH, |line| conn.route(line));
                }
                None => break Ending::App(Exit::Lost("the server closed the connection".into())),
            },
            _ = tick.tick() => actions.push(Action::Tick),
            _ = resync.tick() => actions.push(Action::Resync),
            _ = sleep_until(next_frame.into()), if app.dirty || app.stale => {}
            _ = sigterm.recv() => break Ending::Signal("SIGTERM"),
            _ = sighup.recv() => break Ending::Signal("SIGHUP"),
        }
        app.now = Utc::now();
        keyed |= actions
            .iter()
            .any(|a| matches!(a, Action::Key(_) | Action::Paste(_) | Action::Resize(..)));
        let mut exit = None;
        for action in actions {
            let effects = app.handle(action);
            if let Some(e) = perform(&mut conn, effects).await? {
                exit = Some(e);
                break;
            }
        }
        if let Some(e) = exit {
            break Ending::App(e);
        }
        let gap = if keyed { FRAME_GAP } else { PUSH_FRAME_GAP };
        let due = last_draw.is_none_or(|t| t.elapsed() >= gap);
        if due {
            app.settle();
        }
        if std::mem::take(&mut app.bell) {
            crate::tui::terminal::bell();
        }
        if app.dirty && due {
            terminal.draw(|frame| ui::draw(&app, frame))?;
            app.dirty = false;
            keyed = false;
            last_draw = Some(Instant::now());
        }
    };
    stop.store(true, Ordering::Relaxed);
    Ok(ending)
}

async fn perform(conn: &mut Connection, effects: Vec<Effect>) -> anyhow::Result<Option<Exit>> {
    for effect in effects {
        match effect {
            Effect::Send(pending, request) => {
                if let Err(e) = conn.send(pending, request).await {
                    return Ok(Some(Exit::Lost(e.to_string())));
                }
            }
            Effect::Exit(exit) => return Ok(Some(exit)),
        }
    }
    Ok(None)
}

fn terminal_action(event: Event) -> Option<Action> {
    match event {
        Event::Key(key) => Some(Action::Key(key)),
        Event::Paste(text) => Some(Action::Paste(text)),
        Event::Resize(cols, rows) => Some(Action::Resize(cols, rows)),
        Event::Mouse(_) | Event::FocusGained | Event::FocusLost => None,
    }
}
