//! The dashboard's state, and the vocabulary that changes it: `Action`s in
//! (keys, server lines, ticks), `Effect`s out (requests, exit). No I/O, so
//! every screen is built and tested without a server.

use std::collections::HashSet;

use chrono::{DateTime, FixedOffset, Offset, Utc};
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::Rect;

use super::alerts::{Alert, AlertKind};
use super::detail::Detail;
use super::dialog::{ActionKind, Dialog};
use super::model::Fleet;
use super::rows::{self, Row, View};
use super::settings::Thresholds;
use crate::protocol::{Push, Request};
use crate::tui::reconnect::Reconnect;
use crate::tui::widgets::theme::Theme;

/// How long a message stays in the footer (seconds).
pub const NOTICE_SECONDS: i64 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    Table,
    Detail,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help,
    Dialog(Dialog),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Table,
    Alerts,
}

/// What a request was for, so its reply can be routed.
#[derive(Debug, Clone, PartialEq)]
pub enum Pending {
    Subscribe,
    List,
    Show(String),
    /// Shells of a session at start-up: exited ones raise an alert.
    ShellCheck(String),
    /// Shells of the session in the detail view.
    DetailShells(String),
    Attach(String, u32),
    Detach,
    Events(String),
    Act {
        kind: ActionKind,
        session: String,
        then_note: Option<String>,
    },
    /// The note recording why a resume, end or score was done.
    ReasonNote(String),
}

pub type Effect = crate::tui::runtime::Effect<Pending, Exit>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Quit,
    Lost(String),
    /// The server is stopping in order; the sessions wait, paused.
    ServerShutdown,
}

pub use crate::tui::connection::ReplyError;

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Key(KeyEvent),
    Paste(String),
    Resize(u16, u16),
    /// A second passed (clocks move; alerts may start).
    Tick,
    /// Time to re-read every session (activity times are not pushed).
    Resync,
    Reply {
        pending: Pending,
        result: Result<serde_json::Value, ReplyError>,
    },
    Push(Box<Push>),
    Disconnected(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub text: String,
    pub error: bool,
    pub at: DateTime<Utc>,
}

/// One entry of the alert list.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertLine {
    pub session: String,
    pub participant: String,
    pub alert: Alert,
}

pub struct App {
    pub fleet: Fleet,
    pub limits: Thresholds,
    pub view: View,
    /// The visible rows, filtered and sorted (recomputed on change and each tick).
    pub rows: Vec<Row>,
    /// Every session's alerts (not only the filtered ones), newest first.
    pub alert_list: Vec<AlertLine>,
    /// Alerts the proctor has seen: (session, kind, since) hides them from the list.
    pub acknowledged: HashSet<(String, AlertKind, i64)>,
    pub screen: Screen,
    pub overlay: Option<Overlay>,
    pub focus: Focus,
    /// Typing into the participant search.
    pub searching: bool,
    /// The selected session, by id, so it stays selected when rows move.
    pub selected: Option<String>,
    /// Sessions marked for a bulk action (Space, `*`): pause, resume,
    /// extend and note then act on all of them at once.
    pub marked: std::collections::BTreeSet<String>,
    pub alert_selected: usize,
    pub detail: Option<Detail>,
    pub notice: Option<Notice>,
    /// The proctor's name as the server records it.
    pub me: String,
    pub now: DateTime<Utc>,
    /// Seconds since the dashboard started (monotonic; for reconnecting).
    pub since_start_s: f64,
    /// Set while the server is away: the dashboard waits and tries again.
    pub reconnect: Option<Reconnect>,
    /// Wall times are shown in this zone (local at run time, UTC in tests).
    pub tz: FixedOffset,
    pub theme: Theme,
    pub area: Rect,
    /// Whether the first listing has come.
    pub loaded: bool,
    /// The fleet changed since the rows were computed.
    pub stale: bool,
    /// The time signature at the last tick.
    pub signature: (String, bool, i64),
    /// Redraw needed.
    pub dirty: bool,
    /// Alerts already announced (session, kind, since): each new one rings
    /// the bell once.
    pub announced: HashSet<(String, AlertKind, i64)>,
    /// A new alert arrived since the runtime last rang.
    pub bell: bool,
    /// The alerts of the first listing are in `announced`.
    pub alerts_primed: bool,
}

impl App {
    pub fn new(me: &str, limits: Thresholds, theme: Theme, now: DateTime<Utc>) -> App {
        App {
            fleet: Fleet::default(),
            limits,
            view: View::default(),
            rows: Vec::new(),
            alert_list: Vec::new(),
            acknowledged: HashSet::new(),
            screen: Screen::Table,
            overlay: None,
            focus: Focus::Table,
            searching: false,
            selected: None,
            marked: std::collections::BTreeSet::new(),
            alert_selected: 0,
            detail: None,
            notice: None,
            me: me.to_string(),
            now,
            since_start_s: 0.0,
            reconnect: None,
            tz: Utc.fix(),
            theme,
            area: Rect::default(),
            loaded: false,
            stale: false,
            signature: (String::new(), false, -1),
            dirty: true,
            announced: HashSet::new(),
            bell: false,
            alerts_primed: false,
        }
    }

    /// The first requests: every session's events, then every session.
    pub fn start(&mut self) -> Vec<Effect> {
        vec![
            Effect::Send(Pending::Subscribe, Request::Subscribe { session: None }),
            Effect::Send(Pending::List, Request::ListSessions),
        ]
    }

    /// Recomputes the rows if the fleet changed.
    pub fn settle(&mut self) {
        if self.stale {
            self.recompute();
        }
    }

    /// Rows, alert list and selection, again from the fleet at `now`.
    pub fn recompute(&mut self) {
        self.stale = false;
        let all = rows::all_rows(&self.fleet, &self.limits, self.now);
        let mut list: Vec<AlertLine> = all
            .iter()
            .flat_map(|r| {
                r.alerts.iter().map(|a| AlertLine {
                    session: r.id.clone(),
                    participant: r.participant.clone(),
                    alert: a.clone(),
                })
            })
            .filter(|l| !self.is_acknowledged(&l.session, &l.alert))
            .collect();
        list.sort_by(|a, b| {
            b.alert
                .since
                .cmp(&a.alert.since)
                .then(a.alert.kind.cmp(&b.alert.kind))
                .then(a.participant.cmp(&b.participant))
        });
        let rows = rows::select(all, &self.view);
        // Redraw only when what is shown changed (ticks often change nothing).
        if rows != self.rows || list != self.alert_list {
            self.dirty = true;
        }
        // The bell for alerts new since the first listing (what was there
        // when the dashboard opened is not news).
        if self.loaded {
            for l in &list {
                let key = (l.session.clone(), l.alert.kind, l.alert.since.timestamp());
                if self.announced.insert(key) && self.alerts_primed {
                    self.bell = true;
                }
            }
            self.alerts_primed = true;
        }
        self.alert_list = list;
        self.alert_selected = self
            .alert_selected
            .min(self.alert_list.len().saturating_sub(1));
        self.rows = rows;
        let still_there = self
            .selected
            .as_ref()
            .is_some_and(|id| self.rows.iter().any(|r| &r.id == id));
        if !still_there {
            self.selected = self.rows.first().map(|r| r.id.clone());
        }
    }

    /// What the screen shows that depends on the time alone, beside the
    /// rows: the header clock (minutes) and whether a notice is up.
    pub fn time_signature(&self) -> (String, bool, i64) {
        let wait = self
            .reconnect
            .as_ref()
            .map_or(-1, |r| r.wait_s(self.since_start_s).ceil() as i64);
        (
            self.clock_minute(self.now),
            self.visible_notice().is_some(),
            wait,
        )
    }

    /// The server went away: keep the last known fleet on screen and wait
    /// for it (dialogs close: nothing can be sent meanwhile).
    pub fn lost_server(&mut self, exit: &Exit) {
        let (why, shutdown) = match exit {
            Exit::ServerShutdown => ("the server was shut down".to_string(), true),
            Exit::Lost(why) => (why.clone(), false),
            Exit::Quit => return,
        };
        self.reconnect = Some(Reconnect::lost(
            self.reconnect.as_ref(),
            why,
            shutdown,
            self.since_start_s,
        ));
        self.overlay = None;
        self.dirty = true;
    }

    pub fn reconnect_failed(&mut self, why: String) {
        if let Some(r) = &mut self.reconnect {
            r.failed(why, self.since_start_s);
            self.dirty = true;
        }
    }

    /// Connected again: every session and the open detail view are read
    /// anew (the server's shells are new after a restart).
    pub fn reconnected(&mut self) -> Vec<Effect> {
        self.reconnect = None;
        self.notify("reconnected to the server");
        let mut effects = self.start();
        if let Some(d) = &self.detail {
            let (id, agent) = (d.session.clone(), d.pane == super::detail::Pane::Execs);
            self.detail = Some(super::detail::Detail::new(&id, agent));
            effects.extend(self.detail_requests(&id));
        }
        effects
    }

    /// The header clock (`14:03`).
    pub fn clock_minute(&self, at: DateTime<Utc>) -> String {
        at.with_timezone(&self.tz).format("%H:%M").to_string()
    }

    pub fn ack_key(session: &str, alert: &Alert) -> (String, AlertKind, i64) {
        // Alerts whose start moves with the clock are acknowledged as a kind.
        let since = match alert.kind {
            AlertKind::BudgetLow => 0,
            _ => alert.since.timestamp(),
        };
        (session.to_string(), alert.kind, since)
    }

    pub fn is_acknowledged(&self, session: &str, alert: &Alert) -> bool {
        self.acknowledged.contains(&Self::ack_key(session, alert))
    }

    pub fn selected_index(&self) -> Option<usize> {
        let id = self.selected.as_ref()?;
        self.rows.iter().position(|r| &r.id == id)
    }

    pub fn selected_row(&self) -> Option<&Row> {
        self.selected_index().map(|i| &self.rows[i])
    }

    /// The session actions apply to: the detail view's, else the selected row's.
    pub fn target(&self) -> Option<String> {
        match (&self.screen, &self.detail) {
            (Screen::Detail, Some(d)) => Some(d.session.clone()),
            _ => match self.focus {
                Focus::Alerts => self
                    .alert_list
                    .get(self.alert_selected)
                    .map(|l| l.session.clone()),
                Focus::Table => self.selected.clone(),
            },
        }
    }

    pub fn notify(&mut self, text: impl Into<String>) {
        self.notice = Some(Notice {
            text: text.into(),
            error: false,
            at: self.now,
        });
        self.dirty = true;
    }

    pub fn notify_error(&mut self, text: impl Into<String>) {
        self.notice = Some(Notice {
            text: text.into(),
            error: true,
            at: self.now,
        });
        self.dirty = true;
    }

    pub fn visible_notice(&self) -> Option<&Notice> {
        self.notice
            .as_ref()
            .filter(|n| (self.now - n.at).num_seconds() < NOTICE_SECONDS)
    }

    /// A wall time as the proctor reads it (`14:03:27`).
    pub fn clock_time(&self, at: DateTime<Utc>) -> String {
        at.with_timezone(&self.tz).format("%H:%M:%S").to_string()
    }
}
