//! The one event loop under every connected UI (workspace, proctor):
//! terminal events and server lines become the app's actions, its effects
//! become requests, a bell or an exit, and the screen is drawn only when
//! something changed, paced by `pacing` (a few frames at once after a quiet
//! spell, then at most one per frame gap). A lost server is the
//! app's to handle: it may leave, or wait and be reconnected here.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::Event;
use ratatui::layout::Rect;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{MissedTickBehavior, interval, sleep_until};

use super::connection::{Connection, Incoming, Routed};
use super::frames::{Frames, PartialFrame};
use super::pacing::Pacer;
use super::terminal::{self, Screen, drain_queued};
use crate::client::Client;
use crate::protocol::{Request, b64_decode, b64_encode};

/// The shortest time between two frames (~60 fps).
pub const FRAME_GAP: Duration = Duration::from_millis(16);

/// What an app asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect<P, X> {
    Send(P, Request),
    /// A request that wants no response (shell input, resizes): its
    /// failure comes back as a push.
    Post(Request),
    /// Ring the real terminal's bell.
    Bell,
    /// Put text on the outer terminal's clipboard.
    Copy(String),
    Exit(X),
}

/// The time as the loop hands it to the app: seconds since the UI
/// started (monotonic) and the wall clock.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub since_start_s: f64,
    pub wall: DateTime<Utc>,
}

/// A UI the loop can run: state in, effects out, drawn by a pure function.
pub trait ClientApp {
    type Action;
    /// What a request was for, so its reply can be routed.
    type Pending;
    type Exit;

    /// How often time alone moves the screen.
    const TICK: Duration;
    /// How often everything is read again from the server.
    const RESYNC: Duration;
    /// Lines taken from a queue before looking at the other queues again.
    const BATCH: usize;

    fn set_area(&mut self, area: Rect);
    fn set_now(&mut self, now: Now);
    /// The first requests.
    fn start(&mut self) -> Vec<Effect<Self::Pending, Self::Exit>>;
    fn update(&mut self, action: Self::Action) -> Vec<Effect<Self::Pending, Self::Exit>>;

    fn terminal_action(event: Event) -> Option<Self::Action>;
    fn server_action(routed: Routed<Self::Pending>) -> Option<Self::Action>;
    fn tick_action() -> Self::Action;
    fn resync_action() -> Self::Action;
    /// Whether the user did this (the next frame comes sooner).
    fn is_input(action: &Self::Action) -> bool;
    /// Folds `next` into `last` where both can be handled as one (e.g.
    /// output of the same shell); else gives `next` back.
    fn merge(last: &mut Self::Action, next: Self::Action) -> Option<Self::Action> {
        let _ = last;
        Some(next)
    }
    /// The exit for a connection that broke (sending failed, or the
    /// terminal closed).
    fn lost(why: String) -> Self::Exit;

    /// The wait between frames: after input, or after server events alone.
    fn frame_gap(&self, after_input: bool) -> Duration {
        let _ = after_input;
        FRAME_GAP
    }
    /// Whether a frame is wanted (the loop wakes for it).
    fn wants_frame(&self) -> bool;
    /// Whether, after `before_frame`, the screen must be drawn again.
    fn needs_draw(&self) -> bool;
    /// Work put off until a frame is due (e.g. recomputing rows).
    fn before_frame(&mut self) -> Vec<Effect<Self::Pending, Self::Exit>> {
        Vec::new()
    }
    fn draw(&self, frame: &mut Frame);
    /// A frame that redraws only some rows, when nothing else on the screen
    /// changed since the last frame (None: draw it all).
    fn partial_frame(&self) -> Option<PartialFrame> {
        None
    }
    /// Draws the rows `partial_frame` named into `buf`, which holds the
    /// last frame.
    fn draw_partial(&self, buf: &mut Buffer, frame: &PartialFrame) {
        let _ = (buf, frame);
    }
    fn drawn(&mut self);

    /// The app's answer to an exit: `Some` leaves, `None` stays (waiting
    /// for the server to come back: then `reconnect_at` says when to try).
    fn leaving(&mut self, exit: Self::Exit) -> Option<Self::Exit> {
        Some(exit)
    }
    /// When to try to reconnect, in seconds since start (None: connected).
    fn reconnect_at(&self) -> Option<f64> {
        None
    }
    fn reconnected(&mut self) -> Vec<Effect<Self::Pending, Self::Exit>> {
        Vec::new()
    }
    fn reconnect_failed(&mut self, why: String) {
        let _ = why;
    }
}

/// Why the loop ended.
pub enum Ending<X> {
    App(X),
    Signal(&'static str),
}

/// Runs `app` on `terminal` over `client` until it exits or a signal
/// ends it. `reopen` makes a new client after the server was lost (it must
/// never start a server: the operator decides when it comes back).
pub async fn run<A: ClientApp>(
    mut terminal: Screen,
    mut app: A,
    client: Client,
    mut reopen: impl AsyncFnMut() -> anyhow::Result<Client>,
) -> anyhow::Result<Ending<A::Exit>> {
    let started = Instant::now();
    let now = move || Now {
        since_start_s: started.elapsed().as_secs_f64(),
        wall: Utc::now(),
    };
    let (mut conn, mut server) = Connection::<A::Pending>::start(client);
    let mut keys = terminal::TerminalEvents::new()?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let mut tick = interval(A::TICK);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut resync = interval(A::RESYNC);
    resync.set_missed_tick_behavior(MissedTickBehavior::Skip);
    resync.tick().await;

    let size = terminal.size()?;
    app.set_area(Rect::new(0, 0, size.width, size.height));
    app.set_now(now());
    let first = app.start();
    if let Some(exit) = perform::<A>(&mut conn, first).await? {
        return Ok(Ending::App(exit));
    }
    let mut pacer = Pacer::default();
    let mut frames = Frames::default();
    // Whether the user did something since the last frame (answer fast).
    let mut after_input = false;
    let ending = loop {
        let next_frame = pacer.next_at(Instant::now(), app.frame_gap(after_input));
        let reconnect_at = app.reconnect_at();
        let mut actions: Vec<A::Action> = Vec::new();
        tokio::select! {
            ev = keys.next() => match ev {
                Ok(ev) => {
                    actions.extend(A::terminal_action(ev));
                    drain_queued(|| keys.try_next(), &mut actions, A::BATCH, A::terminal_action);
                }
                Err(e) => break Ending::App(A::lost(format!("the terminal closed ({e})"))),
            },
            line = server.recv(), if reconnect_at.is_none() => {
                let line = line.unwrap_or_else(|| Incoming::Closed("the server closed the connection".into()));
                actions.extend(conn.route(line).and_then(A::server_action));
                // A burst (an output flood, 200 agents) becomes one frame.
                drain_queued(|| server.try_recv().ok(), &mut actions, A::BATCH, |line| {
                    conn.route(line).and_then(A::server_action)
                });
            },
            _ = sleep_until(at(started, reconnect_at)), if reconnect_at.is_some() => {
                app.set_now(now());
                match reopen().await {
                    Ok(client) => {
                        (conn, server) = Connection::start(client);
                        let effects = app.reconnected();
                        if let Some(e) = perform::<A>(&mut conn, effects).await?
                            && let Some(e) = app.leaving(e)
                        {
                            break Ending::App(e);
                        }
                    }
                    Err(e) => app.reconnect_failed(format!("{e:#}")),
                }
            },
            _ = tick.tick() => actions.push(A::tick_action()),
            _ = resync.tick() => actions.push(A::resync_action()),
            _ = sleep_until(next_frame.into()), if app.wants_frame() => {}
            _ = sigterm.recv() => break Ending::Signal("SIGTERM"),
            _ = sighup.recv() => break Ending::Signal("SIGHUP"),
        }
        after_input |= actions.iter().any(A::is_input);
        let actions = merged::<A>(actions);
        let mut effects = Vec::new();
        for action in actions {
            app.set_now(now());
            let produced = app.update(action);
            let exits = produced.iter().any(|e| matches!(e, Effect::Exit(_)));
            effects.extend(produced);
            if exits {
                break;
            }
        }
        // Keystrokes go out now, not at the next frame; keys read together
        // go out as one input.
        let exit = perform::<A>(&mut conn, coalesce_input(effects)).await?;
        if let Some(e) = exit.and_then(|e| app.leaving(e)) {
            break Ending::App(e);
        }
        let gap = app.frame_gap(after_input);
        if pacer.due(Instant::now(), gap) && app.wants_frame() {
            app.set_now(now());
            let effects = app.before_frame();
            if let Some(e) = perform::<A>(&mut conn, effects).await?
                && let Some(e) = app.leaving(e)
            {
                break Ending::App(e);
            }
            if app.needs_draw() {
                let partly = match app.partial_frame() {
                    Some(partial) => frames.partial(&mut terminal, &partial, |buf| {
                        app.draw_partial(buf, &partial)
                    })?,
                    None => false,
                };
                if !partly {
                    frames.full(&mut terminal, |frame| app.draw(frame))?;
                }
                terminal::show(&mut terminal)?;
                app.drawn();
                after_input = false;
                pacer.drawn(Instant::now(), gap);
            }
        }
    };
    Ok(ending)
}

/// A batch with what can be handled as one folded together (a flood's
/// output is then one screen update, which can leave out what scrolls
/// away unseen).
fn merged<A: ClientApp>(actions: Vec<A::Action>) -> Vec<A::Action> {
    let mut out: Vec<A::Action> = Vec::with_capacity(actions.len());
    for action in actions {
        let rest = match out.last_mut() {
            Some(last) => A::merge(last, action),
            None => Some(action),
        };
        out.extend(rest);
    }
    out
}

/// `effects` with each run of input for one shell made one input, in order.
/// Keys read from the terminal at once (a fast typist, a terminal that
/// sends a word at a time, a key held down) were one request each: the
/// server woke and wrote to the shell once per byte, and readline echoed
/// byte by byte, each echo a frame of its own.
fn coalesce_input<P, X>(effects: Vec<Effect<P, X>>) -> Vec<Effect<P, X>> {
    let mut out = Vec::with_capacity(effects.len());
    // The run being gathered: whose input it is, and its bytes so far
    // (each input decoded once, each run encoded once).
    let mut run: Option<(String, u32, Vec<u8>)> = None;
    for effect in effects {
        if let Effect::Post(Request::ShellInput {
            session,
            shell,
            data,
        }) = &effect
            && let Ok(bytes) = b64_decode(data)
        {
            match &mut run {
                Some((of, at, gathered)) if of == session && at == shell => {
                    gathered.extend_from_slice(&bytes);
                }
                _ => {
                    out.extend(run.take().map(input_effect));
                    run = Some((session.clone(), *shell, bytes));
                }
            }
            continue;
        }
        out.extend(run.take().map(input_effect));
        out.push(effect);
    }
    out.extend(run.map(input_effect));
    out
}

/// A gathered run of input as the effect that sends it.
fn input_effect<P, X>((session, shell, bytes): (String, u32, Vec<u8>)) -> Effect<P, X> {
    Effect::Post(Request::ShellInput {
        session,
        shell,
        data: b64_encode(&bytes),
    })
}

/// `at_s` seconds after `started`, as a tokio instant.
fn at(started: Instant, at_s: Option<f64>) -> tokio::time::Instant {
    (started + Duration::from_secs_f64(at_s.unwrap_or(0.0).max(0.0))).into()
}

/// Carries out effects; returns an exit if one was asked for.
async fn perform<A: ClientApp>(
    conn: &mut Connection<A::Pending>,
    effects: Vec<Effect<A::Pending, A::Exit>>,
) -> anyhow::Result<Option<A::Exit>> {
    for effect in effects {
        match effect {
            Effect::Send(pending, request) => {
                if let Err(e) = conn.send(pending, request).await {
                    return Ok(Some(A::lost(e.to_string())));
                }
            }
            Effect::Post(request) => {
                if let Err(e) = conn.post(request).await {
                    return Ok(Some(A::lost(e.to_string())));
                }
            }
            Effect::Bell => terminal::bell(),
            Effect::Copy(text) => terminal::copy_to_clipboard(&text),
            Effect::Exit(exit) => return Ok(Some(exit)),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Effects = Vec<Effect<&'static str, ()>>;

    fn input(shell: u32, bytes: &[u8]) -> Effect<&'static str, ()> {
        Effect::Post(Request::ShellInput {
            session: "s".into(),
            shell,
            data: b64_encode(bytes),
        })
    }

    fn show() -> Effect<&'static str, ()> {
        Effect::Send(
            "show",
            Request::Show {
                session: "s".into(),
            },
        )
    }

    #[test]
    fn keys_read_together_go_out_as_one_input_per_run_in_order() {
        let effects: Effects = vec![
            input(1, b"ls"),
            input(1, b" -l"),
            input(1, b"\r"),
            input(2, b"top"),
            input(2, b"\r"),
            show(),
            input(2, b"q"),
            input(1, b"x"),
        ];
        let out = coalesce_input(effects);
        assert_eq!(
            out,
            vec![
                input(1, b"ls -l\r"),
                input(2, b"top\r"),
                show(),
                input(2, b"q"),
                input(1, b"x"),
            ]
        );
    }

    #[test]
    fn input_of_another_session_or_anything_else_is_left_as_it_is() {
        let other = Effect::Post(Request::ShellInput {
            session: "t".into(),
            shell: 1,
            data: b64_encode(b"b"),
        });
        let effects: Effects = vec![
            input(1, b"a"),
            other.clone(),
            Effect::Bell,
            Effect::Exit(()),
        ];
        assert_eq!(
            coalesce_input(effects),
            vec![input(1, b"a"), other, Effect::Bell, Effect::Exit(())]
        );
    }
}
