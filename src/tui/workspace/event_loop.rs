//! How the workspace plugs into the shared event loop (`tui::runtime`):
//! which terminal events and server lines are its actions, its pacing, and
//! waiting for a lost server instead of leaving.

use std::time::Duration;

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::Event;
use ratatui::layout::Rect;

use super::app::{Action, App, Effect, Exit, Pending};
use crate::protocol::{Push, b64_decode};
use crate::tui::connection::Routed;
use crate::tui::frames::PartialFrame;
use crate::tui::runtime::{ClientApp, Now};

impl ClientApp for App {
    type Action = Action;
    type Pending = Pending;
    type Exit = Exit;

    const TICK: Duration = Duration::from_millis(250);
    const RESYNC: Duration = Duration::from_secs(10);
    const BATCH: usize = 512;

    fn set_area(&mut self, area: Rect) {
        self.area = area;
    }

    fn set_now(&mut self, now: Now) {
        self.now_s = now.since_start_s;
        self.wall_now = now.wall;
    }

    fn start(&mut self) -> Vec<Effect> {
        App::start(self)
    }

    fn update(&mut self, action: Action) -> Vec<Effect> {
        App::update(self, action)
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

    fn server_action(routed: Routed<Pending>) -> Option<Action> {
        Some(match routed {
            Routed::Reply { pending, result } => Action::Reply { pending, result },
            // An error for no request in particular: show it.
            Routed::Stray(error) => Action::Reply {
                pending: Pending::Subscribe,
                result: Err(error),
            },
            Routed::Closed(why) => Action::Disconnected(why),
            Routed::Push(push) => match push {
                Push::ShellOutput { shell, data, .. } => Action::ShellOutput {
                    shell,
                    data: b64_decode(&data).ok()?,
                },
                Push::ShellExited { shell, .. } => Action::ShellExited { shell },
                Push::ShellDetached {
                    shell,
                    reason,
                    fell_behind,
                    ..
                } => Action::ShellDetached {
                    shell,
                    reason,
                    fell_behind,
                },
                Push::SessionEvent { event, .. } => Action::SessionEvent(Box::new(event)),
                Push::ScoringStarted { .. } => Action::ScoringStarted,
                // Events were dropped on the way: re-read the session.
                Push::EventsSkipped { .. } => Action::Resync,
                Push::ServerShutdown { .. } => Action::ServerShutdown,
                Push::InputRefused {
                    shell,
                    code,
                    message,
                    ..
                } => Action::InputRefused {
                    shell,
                    code,
                    message,
                },
            },
        })
    }

    fn tick_action() -> Action {
        Action::Tick
    }

    fn resync_action() -> Action {
        Action::Resync
    }

    fn merge(last: &mut Action, next: Action) -> Option<Action> {
        match (last, next) {
            (
                Action::ShellOutput { shell, data },
                Action::ShellOutput {
                    shell: next_shell,
                    data: more,
                },
            ) if *shell == next_shell => {
                data.extend_from_slice(&more);
                None
            }
            (_, next) => Some(next),
        }
    }

    fn is_input(action: &Action) -> bool {
        matches!(
            action,
            Action::Key(_) | Action::Paste(_) | Action::Mouse(_) | Action::Resize(..)
        )
    }

    fn lost(why: String) -> Exit {
        Exit::Lost(why)
    }

    /// After a key, the next frame (its echo, most often a partial frame
    /// that costs little) is drawn as soon as it is due; output alone is
    /// paced at the frame gap (`pacing`: a command's few bursts of output
    /// right away, a flood at most 60 times a second).
    fn frame_gap(&self, after_input: bool) -> Duration {
        if after_input {
            Duration::ZERO
        } else {
            crate::tui::runtime::FRAME_GAP
        }
    }

    fn wants_frame(&self) -> bool {
        self.dirty || self.pane_dirty
    }

    fn needs_draw(&self) -> bool {
        self.dirty || self.pane_dirty
    }

    fn before_frame(&mut self) -> Vec<Effect> {
        self.prepare_frame();
        Vec::new()
    }

    fn draw(&self, frame: &mut Frame) {
        super::ui::draw(self, frame);
    }

    fn partial_frame(&self) -> Option<PartialFrame> {
        if self.dirty || !self.pane_dirty {
            return None;
        }
        let pane = self.areas().pane;
        Some(PartialFrame {
            rows: self.pane_rows.iter().map(|row| pane.y + row).collect(),
            cursor: super::ui::pane::shell_cursor(self, pane),
        })
    }

    fn draw_partial(&self, buf: &mut Buffer, _frame: &PartialFrame) {
        super::ui::pane::draw_rows(self, buf, self.areas().pane, &self.pane_rows);
    }

    fn drawn(&mut self) {
        self.dirty = false;
        self.pane_dirty = false;
        self.pane_rows.clear();
        self.plain_pane_drawn = self.pane_is_plain();
    }

    /// The server went away: wait for it rather than leave.
    fn leaving(&mut self, exit: Exit) -> Option<Exit> {
        let exit = match exit {
            Exit::Lost(why) => self.exit_for_lost(why),
            other => other,
        };
        match exit {
            Exit::Lost(_) | Exit::ServerShutdown => {
                self.lost_server(&exit);
                None
            }
            other => Some(other),
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
