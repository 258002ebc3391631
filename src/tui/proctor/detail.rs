//! The detail view of one session: its shells mirrored read-only (the
//! proctor watches, never drives), and an agent's exec history.

use chrono::{DateTime, Utc};

use crate::protocol::{AttachReply, ShellInfo};
use crate::session::event::ExecRecord;
use crate::session::{Event, EventKind};
use crate::tui::widgets::shell_tab::ShellTab;

/// Execs kept for the history (the newest; older ones are in the event log).
pub const EXEC_HISTORY_MAX: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Shells,
    Execs,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExecItem {
    pub at: DateTime<Utc>,
    pub active_ms: u64,
    pub record: ExecRecord,
}

pub struct Mirror {
    pub tab: ShellTab,
    pub has_driver: bool,
}

pub struct Detail {
    pub session: String,
    pub pane: Pane,
    pub mirrors: Vec<Mirror>,
    pub active: usize,
    /// Whether the shell list has come back.
    pub shells_loaded: bool,
    /// Oldest first.
    pub execs: Vec<ExecItem>,
    pub events_loaded: bool,
    /// Which exec is shown, counted from the newest.
    pub exec_selected: usize,
    /// Lines scrolled in the score log.
    pub score_scroll: usize,
    /// What the agent's model said last, and the tools it asked for.
    pub last_said: Option<String>,
}

impl Detail {
    pub fn new(session: &str, agent: bool) -> Detail {
        Detail {
            session: session.to_string(),
            pane: if agent { Pane::Execs } else { Pane::Shells },
            mirrors: Vec::new(),
            active: 0,
            shells_loaded: false,
            execs: Vec::new(),
            events_loaded: false,
            exec_selected: 0,
            score_scroll: 0,
            last_said: None,
        }
    }

    /// A shell list: returns the shells to attach (new, or resized since).
    pub fn load_shells(&mut self, infos: &[ShellInfo]) -> Vec<u32> {
        self.shells_loaded = true;
        let mut attach = Vec::new();
        for info in infos {
            match self.mirrors.iter_mut().find(|m| m.tab.shell == info.shell) {
                Some(m) => {
                    m.has_driver = info.has_driver;
                    m.tab.alive = info.alive;
                    // Watchers cannot resize; a new attach redraws at the new size.
                    if m.tab.size() != (info.rows, info.cols) && info.alive {
                        m.tab.detach_locally();
                        attach.push(info.shell);
                    }
                }
                None => {
                    let mut tab = ShellTab::new(info.shell, info.rows.max(1), info.cols.max(1));
                    tab.alive = info.alive;
                    self.mirrors.push(Mirror {
                        tab,
                        has_driver: info.has_driver,
                    });
                    attach.push(info.shell);
                }
            }
        }
        self.mirrors.sort_by_key(|m| m.tab.shell);
        attach
    }

    /// A new shell opened in the session: mirror it too.
    pub fn shell_opened(&mut self, shell: u32) -> bool {
        if self.mirror_mut(shell).is_some() {
            return false;
        }
        self.mirrors.push(Mirror {
            tab: ShellTab::new(shell, 24, 80),
            has_driver: true,
        });
        true
    }

    pub fn mirror_mut(&mut self, shell: u32) -> Option<&mut Mirror> {
        self.mirrors.iter_mut().find(|m| m.tab.shell == shell)
    }

    pub fn attached(&mut self, reply: &AttachReply, screen: &[u8]) {
        if let Some(m) = self.mirror_mut(reply.shell) {
            m.tab.load_screen(reply, screen);
            m.tab.alive = reply.alive;
        }
    }

    pub fn output(&mut self, shell: u32, data: &[u8]) {
        if let Some(m) = self.mirror_mut(shell) {
            m.tab.feed(data);
        }
    }

    pub fn exited(&mut self, shell: u32, how: String) {
        if let Some(m) = self.mirror_mut(shell) {
            m.tab.alive = false;
            m.tab.gone = Some(how);
        }
    }

    pub fn active_mirror(&self) -> Option<&Mirror> {
        self.mirrors.get(self.active)
    }

    /// Scrolls the shown mirror's history (the attach carries the server's
    /// recent history): `lines` back (positive) or forward; `None` = live.
    pub fn scroll_mirror(&mut self, lines: Option<isize>) {
        if let Some(m) = self.mirrors.get_mut(self.active) {
            match lines {
                Some(n) => m.tab.scroll_by(n),
                None => m.tab.scroll_to_bottom(),
            }
        }
    }

    pub fn next_tab(&mut self, step: isize) {
        let n = self.mirrors.len() as isize;
        if n > 0 {
            self.active = (self.active as isize + step).rem_euclid(n) as usize;
        }
    }

    /// The session's event log (the `events` reply): its execs.
    pub fn load_events(&mut self, events: &[Event]) {
        self.execs.clear();
        for e in events {
            self.push_event(e);
        }
        self.events_loaded = true;
    }

    pub fn push_event(&mut self, event: &Event) {
        if let EventKind::ModelCall(call) = &event.kind {
            let said = call
                .output
                .text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("");
            let tools: Vec<&str> = call
                .output
                .tool_calls
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            self.last_said = Some(if tools.is_empty() {
                said.to_string()
            } else {
                format!("{said} -> {}", tools.join(", "))
            });
        }
        if let EventKind::Exec(record) = &event.kind {
            self.execs.push(ExecItem {
                at: event.at,
                active_ms: event.active_ms,
                record: (**record).clone(),
            });
            if self.execs.len() > EXEC_HISTORY_MAX {
                let extra = self.execs.len() - EXEC_HISTORY_MAX;
                self.execs.drain(..extra);
            }
            // Keep looking at the same exec while new ones arrive.
            if self.exec_selected > 0 {
                self.exec_selected = (self.exec_selected + 1).min(self.execs.len() - 1);
            }
        }
    }

    pub fn selected_exec(&self) -> Option<&ExecItem> {
        self.execs.iter().rev().nth(self.exec_selected)
    }

    pub fn move_exec(&mut self, step: isize) {
        let max = self.execs.len().saturating_sub(1) as isize;
        self.exec_selected = (self.exec_selected as isize + step).clamp(0, max) as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(shell: u32, rows: u16, cols: u16) -> ShellInfo {
        ShellInfo {
            shell,
            cols,
            rows,
            alive: true,
            has_driver: true,
            last_input_at: None,
        }
    }

    fn exec(seq: u64, command: &str) -> Event {
        Event {
            seq,
            at: DateTime::from_timestamp(1_800_000_000 + seq as i64, 0).unwrap_or_default(),
            active_ms: seq * 1000,
            origin: None,
            kind: EventKind::Exec(Box::new(ExecRecord {
                command: command.into(),
                cwd: ".".into(),
                exit_code: Some(0),
                signal: None,
                timed_out: false,
                duration_ms: 5,
                stdout: String::new(),
                stderr: String::new(),
                stdout_truncated: false,
                stderr_truncated: false,
            })),
        }
    }

    #[test]
    fn shells_are_attached_once_and_again_after_a_resize() {
        let mut d = Detail::new("s", false);
        assert_eq!(d.load_shells(&[info(2, 24, 80), info(1, 24, 80)]), [2, 1]);
        assert_eq!(d.mirrors[0].tab.shell, 1);
        d.attached(
            &AttachReply {
                shell: 1,
                cols: 80,
                rows: 24,
                screen: String::new(),
                alive: true,
                scrollback_lines: Some(100),
            },
            b"$ ls",
        );
        d.output(1, b" -l");
        assert!(
            d.mirrors[0]
                .tab
                .parser
                .screen()
                .contents()
                .starts_with("$ ls -l")
        );
        assert!(
            d.load_shells(&[info(1, 24, 80), info(2, 24, 80)])
                .is_empty()
        );
        assert_eq!(d.load_shells(&[info(1, 30, 100), info(2, 24, 80)]), [1]);
        assert!(!d.mirrors[0].tab.attached);
        d.next_tab(-1);
        assert_eq!(d.active, 1);
    }

    #[test]
    fn exec_history_keeps_the_selection_while_new_execs_arrive() {
        let mut d = Detail::new("s", true);
        d.load_events(&[exec(1, "ls"), exec(2, "make")]);
        assert_eq!(
            d.selected_exec().map(|e| e.record.command.as_str()),
            Some("make")
        );
        d.move_exec(1);
        d.push_event(&exec(3, "pytest"));
        assert_eq!(
            d.selected_exec().map(|e| e.record.command.as_str()),
            Some("ls")
        );
        d.move_exec(-5);
        assert_eq!(
            d.selected_exec().map(|e| e.record.command.as_str()),
            Some("pytest")
        );
    }
}
