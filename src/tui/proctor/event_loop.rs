//! How the dashboard plugs into the shared event loop (`tui::runtime`):
//! its actions, and its pacing: a 1 s tick moves the clocks, a slow resync
//! re-reads activity times (keystrokes are not pushed), and after server
//! events alone a busy fleet redraws at most 20 times a second, the rows
//! recomputed only for a frame.

use std::time::Duration;

use ratatui::Frame;
use ratatui::crossterm::event::Event;
use ratatui::layout::Rect;

use super::app::{Action, App, Effect, Exit, Pending};
use crate::tui::connection::Routed;
use crate::tui::runtime::{ClientApp, FRAME_GAP, Now};

/// The frame gap after server events alone.
const PUSH_FRAME_GAP: Duration = Duration::from_millis(50);

impl ClientApp for App {
    type Action = Action;
    type Pending = Pending;
    type Exit = Exit;

    const TICK: Duration = Duration::from_secs(1);
    const RESYNC: Duration = Duration::from_secs(20);
    const BATCH: usize = 1024;

    fn set_area(&mut self, area: Rect) {
        self.area = area;
    }

    fn set_now(&mut self, now: Now) {
        self.now = now.wall;
        self.since_start_s = now.since_start_s;
    }

    fn start(&mut self) -> Vec<Effect> {
        App::start(self)
    }

    /// Pushed events only mark the rows stale: a burst costs one recompute
    /// (`before_frame`), not one each.
    fn update(&mut self, action: Action) -> Vec<Effect> {
        let effects = self.handle(action);
        if self.reconnect.is_none() {
            return effects;
        }
        // Nothing reaches a server that is away: say so rather than lose it.
        let (sends, rest): (Vec<Effect>, Vec<Effect>) = effects
            .into_iter()
            .partition(|e| matches!(e, Effect::Send(..)));
        if sends
            .iter()
            .any(|e| !matches!(e, Effect::Send(Pending::List, _)))
        {
            self.notify_error("not sent: the server is away (the dashboard reconnects by itself)");
        }
        rest
    }

    fn terminal_action(event: Event) -> Option<Action> {
        match event {
            Event::Key(key) => Some(Action::Key(key)),
            Event::Paste(text) => Some(Action::Paste(text)),
            Event::Resize(cols, rows) => Some(Action::Resize(cols, rows)),
            Event::Mouse(_) | Event::FocusGained | Event::FocusLost => None,
        }
    }

    fn server_action(routed: Routed<Pending>) -> Option<Action> {
        Some(match routed {
            Routed::Reply { pending, result } => Action::Reply { pending, result },
            // An error for no request in particular is shown like a failed listing.
            Routed::Stray(error) => Action::Reply {
                pending: Pending::List,
                result: Err(error),
            },
            Routed::Push(push) => Action::Push(Box::new(push)),
            Routed::Closed(why) => Action::Disconnected(why),
        })
    }

    fn tick_action() -> Action {
        Action::Tick
    }

    fn resync_action() -> Action {
        Action::Resync
    }

    fn is_input(action: &Action) -> bool {
        matches!(
            action,
            Action::Key(_) | Action::Paste(_) | Action::Resize(..)
        )
    }

    fn lost(why: String) -> Exit {
        Exit::Lost(why)
    }

    fn frame_gap(&self, after_input: bool) -> Duration {
        if after_input {
            FRAME_GAP
        } else {
            PUSH_FRAME_GAP
        }
    }

    fn wants_frame(&self) -> bool {
        self.dirty || self.stale
    }

    fn needs_draw(&self) -> bool {
        self.dirty
    }

    fn before_frame(&mut self) -> Vec<Effect> {
        self.settle();
        if std::mem::take(&mut self.bell) {
            vec![Effect::Bell]
        } else {
            Vec::new()
        }
    }

    fn draw(&self, frame: &mut Frame) {
        super::ui::draw(self, frame);
    }

    fn drawn(&mut self) {
        self.dirty = false;
    }

    /// The server went away: wait for it rather than leave.
    fn leaving(&mut self, exit: Exit) -> Option<Exit> {
        match exit {
            Exit::Quit => Some(Exit::Quit),
            lost => {
                self.lost_server(&lost);
                None
            }
        }
    }

    fn reconnect_at(&self) -> Option<f64> {
        self.reconnect.as_ref().map(|r| r.next_s)
    }

    fn reconnected(&mut self) -> Vec<Effect> {
        App::reconnected(self)
    }

    fn reconnect_failed(&mut self, why: String) {
        App::reconnect_failed(self, why);
    }
}
