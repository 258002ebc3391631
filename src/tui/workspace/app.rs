//! The workspace's state, and the vocabulary that changes it: `Action`s come
//! in (keys, server lines, timers), `Effect`s go out (requests, a bell, exit).
//! No I/O here, so every screen can be built and tested without a server.

use std::collections::BTreeSet;

use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;

use crate::protocol::{ErrorCode, Request, SessionView};
use crate::session::Event;
use crate::session::Phase;

use super::config::Config;
use super::layout;
use super::prefix::PrefixMachine;
use crate::tui::widgets::shell_tab::ShellTab;
use crate::tui::widgets::theme::Theme;

/// Rows of the view being selected with the mouse (to copy on release).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selection {
    /// The scrollback offset the rows belong to.
    pub offset: usize,
    pub from: u16,
    pub to: u16,
}

/// A search of the scrollback: what is looked for, and where it was last found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Search {
    pub query: String,
    /// The query is being typed (in the footer).
    pub editing: bool,
    /// The last match: its line, and where it shows (to highlight it).
    pub found: Option<crate::tui::widgets::shell_tab::Found>,
}

/// Remaining-time thresholds that get a warning (seconds).
pub const WARNING_THRESHOLDS: [u64; 3] = [3600, 900, 300];
/// How long a warning banner stays up.
pub const BANNER_SECONDS: f64 = 30.0;
/// How long a status message stays in the footer.
pub const NOTICE_SECONDS: f64 = 8.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    /// Waiting for the first view of the session.
    Connecting,
    /// Before the clock starts: what the session is, press Enter.
    Start,
    /// The shells.
    Workspace,
    /// The session has ended.
    Summary,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    Help,
    Instructions {
        scroll: u16,
    },
    /// The one-line note editor.
    Note {
        text: String,
    },
    /// Pick a pause reason.
    PauseChoice,
    ConfirmClose {
        shell: u32,
    },
    ConfirmSubmit,
    /// A name for the active tab.
    RenameTab {
        text: String,
    },
    /// The answer a task scored from its answer is submitted with.
    Answer {
        text: String,
    },
}

/// What a request was for, so its reply can be routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    Subscribe,
    Show,
    Begin,
    Score,
    Pause,
    Resume,
    Note,
    Submit,
    Instructions,
    ShellList,
    ShellOpen,
    ShellAttach(u32),
    ShellClose(u32),
}

pub type Effect = crate::tui::runtime::Effect<Pending, Exit>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// The expert detached; the session goes on.
    Detached,
    /// Left from the start or summary screen.
    Quit,
    /// The connection to the server broke.
    Lost(String),
    /// The server was shut down in order: the session is paused
    /// (`server_shutdown`) until someone resumes it.
    ServerShutdown,
    /// The session could not be opened (the server's reason).
    Failed(String),
}

pub use crate::tui::connection::ReplyError;

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Key(KeyEvent),
    Paste(String),
    Mouse(MouseEvent),
    /// The terminal's new size (cols, rows).
    Resize(u16, u16),
    /// Time passed (the clock and timers are redrawn).
    Tick,
    /// Time to re-read the session from the server.
    Resync,
    Reply {
        pending: Pending,
        result: Result<serde_json::Value, ReplyError>,
    },
    ShellOutput {
        shell: u32,
        data: Vec<u8>,
    },
    ShellExited {
        shell: u32,
    },
    ShellDetached {
        shell: u32,
        reason: String,
        /// Dropped for being slow, not taken over: attach again at once.
        fell_behind: bool,
    },
    /// Input or a resize (sent without a reply) was refused.
    InputRefused {
        shell: u32,
        code: ErrorCode,
        message: String,
    },
    SessionEvent(Box<Event>),
    /// A scoring run began (ours, or `score` typed in a shell).
    ScoringStarted,
    Disconnected(String),
    /// The server is stopping in order (its connection closes next).
    ServerShutdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeLevel {
    Info,
    Error,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub text: String,
    pub level: NoticeLevel,
    pub since_s: f64,
}

/// A time warning on screen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Banner {
    pub threshold_s: u64,
    pub since_s: f64,
}

pub use crate::tui::reconnect::Reconnect;

pub struct App {
    pub session: String,
    pub screen: Screen,
    /// Set while the server is away.
    pub reconnect: Option<Reconnect>,
    pub overlay: Option<Overlay>,
    /// The latest view of the session from the server.
    pub view: Option<SessionView>,
    /// App time (seconds since start) when `view` arrived: the clock counts on from there.
    pub synced_at_s: f64,
    /// App time now (monotonic seconds; set by the runtime, fixed in tests).
    pub now_s: f64,
    /// The wall clock now (set with `now_s`), for the server's wall times.
    pub wall_now: chrono::DateTime<chrono::Utc>,
    pub tabs: Vec<ShellTab>,
    pub active_tab: usize,
    pub prefix: PrefixMachine,
    /// Scrollback mode: keys scroll the active tab instead of reaching the shell.
    pub scroll_mode: bool,
    /// Searching the active tab's scrollback (`/` in scrollback mode).
    pub search: Option<Search>,
    /// Rows being selected with the mouse.
    pub selection: Option<Selection>,
    pub side_panel: bool,
    pub mouse: bool,
    /// The terminal size.
    pub area: Rect,
    /// When the score this UI asked for started (None: none running).
    pub scoring_since_s: Option<f64>,
    pub submitting_since_s: Option<f64>,
    pub begin_sent: bool,
    pub instructions: Option<String>,
    pub notice: Option<Notice>,
    pub banner: Option<Banner>,
    /// Thresholds the remaining time has been seen above (so each warns once).
    pub armed_warnings: BTreeSet<u64>,
    pub theme: Theme,
    /// Shells being opened (replies pending), so the empty-workspace rule does not fire twice.
    pub opening_shells: usize,
    /// Redraw needed.
    pub dirty: bool,
    /// The active shell printed, and nothing else changed: its rows alone
    /// may be redrawn (a partial frame), if the last frame showed the pane
    /// plain.
    pub pane_dirty: bool,
    /// The pane's rows that changed, found just before the frame.
    pub pane_rows: Vec<u16>,
    /// The last frame showed the shell's screen with nothing over it.
    pub plain_pane_drawn: bool,
    /// The last key went to the shell and changed nothing of ours.
    pub keyed_through: bool,
}

impl App {
    pub fn new(session: &str, config: &Config, theme: Theme, area: Rect) -> App {
        App {
            session: session.to_string(),
            screen: Screen::Connecting,
            reconnect: None,
            overlay: None,
            view: None,
            synced_at_s: 0.0,
            now_s: 0.0,
            wall_now: chrono::DateTime::UNIX_EPOCH,
            tabs: Vec::new(),
            active_tab: 0,
            prefix: PrefixMachine::new(config.prefix),
            scroll_mode: false,
            search: None,
            selection: None,
            side_panel: config.side_panel,
            mouse: config.mouse,
            area,
            scoring_since_s: None,
            submitting_since_s: None,
            begin_sent: false,
            instructions: None,
            notice: None,
            banner: None,
            armed_warnings: BTreeSet::new(),
            theme,
            opening_shells: 0,
            dirty: true,
            pane_dirty: false,
            pane_rows: Vec::new(),
            plain_pane_drawn: false,
            keyed_through: false,
        }
    }

    /// The first requests: events of this session, its view, its instructions.
    /// The server went away: wait for it on the connecting screen instead
    /// of leaving (its shells are gone; the session, if it was running, is
    /// paused by the shutdown or by the restart's crash recovery).
    pub fn lost_server(&mut self, exit: &Exit) {
        let (why, shutdown) = match exit {
            Exit::ServerShutdown => ("the server was shut down".to_string(), true),
            Exit::Lost(why) => (why.clone(), false),
            Exit::Detached | Exit::Quit | Exit::Failed(_) => return,
        };
        self.reconnect = Some(Reconnect::lost(
            self.reconnect.as_ref(),
            why,
            shutdown,
            self.now_s,
        ));
        self.screen = Screen::Connecting;
        // No clock runs for us while the server is away (a shutdown paused
        // the session; a restart after a crash pauses it too).
        if let Some(v) = &mut self.view
            && v.state == Phase::Running
        {
            v.state = Phase::Paused;
            v.pause_reason = shutdown.then_some(crate::session::PauseReason::ServerShutdown);
        }
        self.tabs.clear();
        self.active_tab = 0;
        self.overlay = None;
        self.scroll_mode = false;
        self.prefix.disarm();
        self.scoring_since_s = None;
        self.submitting_since_s = None;
        self.dirty = true;
    }

    /// A try failed: the next one after a longer wait.
    pub fn reconnect_failed(&mut self, why: String) {
        if let Some(r) = &mut self.reconnect {
            r.failed(why, self.now_s);
            self.dirty = true;
        }
    }

    /// Connected again: read everything anew (the first view re-attaches
    /// or opens the shells).
    pub fn reconnected(&mut self) -> Vec<Effect> {
        self.reconnect = None;
        self.screen = Screen::Connecting;
        self.notify("reconnected to the server");
        self.dirty = true;
        self.start()
    }

    pub fn start(&mut self) -> Vec<Effect> {
        vec![
            self.request(Pending::Subscribe, |s| Request::Subscribe {
                session: Some(s),
            }),
            self.request(Pending::Show, |session| Request::Show { session }),
            self.request(Pending::Instructions, |session| Request::Instructions {
                session,
            }),
        ]
    }

    pub fn request(&self, pending: Pending, build: impl FnOnce(String) -> Request) -> Effect {
        Effect::Send(pending, build(self.session.clone()))
    }

    /// The session's state (None before the first view).
    pub fn state(&self) -> Option<Phase> {
        self.view.as_ref().map(|v| v.state)
    }

    pub fn running(&self) -> bool {
        self.state() == Some(Phase::Running)
    }

    pub fn ended(&self) -> bool {
        self.state() == Some(Phase::Ended)
    }

    /// Whether the participant may end the current pause themselves (not a
    /// proctor's, not the system's scoring run).
    pub fn pause_is_mine(&self) -> bool {
        self.view
            .as_ref()
            .and_then(|v| v.pause_reason)
            .is_none_or(|r| r.participant_may_resume())
    }

    /// The note of the pause in force (a proctor's "why").
    pub fn open_pause_note(&self) -> Option<&str> {
        let v = self.view.as_ref().filter(|v| v.state == Phase::Paused)?;
        v.pauses
            .iter()
            .rev()
            .find(|p| p.end.is_none())
            .and_then(|p| p.note.as_deref())
    }

    /// Seconds of the session's clock since the view arrived (0 unless running).
    fn elapsed_since_sync(&self) -> f64 {
        if self.running() {
            (self.now_s - self.synced_at_s).max(0.0)
        } else {
            0.0
        }
    }

    /// Remaining budget now, counted on locally between views.
    pub fn remaining_s(&self) -> f64 {
        self.view
            .as_ref()
            .map(|v| (v.remaining_s - self.elapsed_since_sync()).max(0.0))
            .unwrap_or(0.0)
    }

    pub fn active_s(&self) -> f64 {
        self.view
            .as_ref()
            .map(|v| (v.active_s + self.elapsed_since_sync()).min(v.budget_s.max(v.active_s)))
            .unwrap_or(0.0)
    }

    pub fn active_tab(&self) -> Option<&ShellTab> {
        self.tabs.get(self.active_tab)
    }

    /// Whether the pane shows the active shell's live screen and nothing
    /// else: no overlay, selection, search, scrollback or pause over it.
    pub fn pane_is_plain(&self) -> bool {
        self.screen == Screen::Workspace
            && !layout::too_small(self.area)
            && self.overlay.is_none()
            && self.submitting_since_s.is_none()
            && self.selection.is_none()
            && !self.scroll_mode
            && self.state() != Some(Phase::Paused)
            && self
                .active_tab()
                .is_some_and(|tab| tab.attached && tab.scrolled() == 0)
    }

    pub fn active_tab_mut(&mut self) -> Option<&mut ShellTab> {
        self.tabs.get_mut(self.active_tab)
    }

    pub fn areas(&self) -> layout::Areas {
        layout::workspace(self.area, self.side_panel)
    }

    pub fn notify(&mut self, text: impl Into<String>) {
        self.set_notice(text.into(), NoticeLevel::Info);
    }

    pub fn notify_error(&mut self, text: impl Into<String>) {
        self.set_notice(text.into(), NoticeLevel::Error);
    }

    fn set_notice(&mut self, text: String, level: NoticeLevel) {
        // The same message again (a key while paused) only keeps it up.
        if let Some(n) = &mut self.notice
            && n.text == text
        {
            n.since_s = self.now_s;
            return;
        }
        self.notice = Some(Notice {
            text,
            level,
            since_s: self.now_s,
        });
    }

    pub fn visible_notice(&self) -> Option<&Notice> {
        self.notice
            .as_ref()
            .filter(|n| self.now_s - n.since_s < NOTICE_SECONDS)
    }

    pub fn visible_banner(&self) -> Option<&Banner> {
        self.banner
            .as_ref()
            .filter(|b| self.now_s - b.since_s < BANNER_SECONDS)
    }

    /// What the screen shows that depends on time alone: when it changes, redraw.
    pub fn time_signature(&self) -> (i64, i64, i64, bool, bool) {
        let secs = |since: Option<f64>| since.map(|s| (self.now_s - s) as i64).unwrap_or(-1);
        (
            self.remaining_s().ceil() as i64,
            secs(self.scoring_since_s),
            secs(self.submitting_since_s),
            self.visible_notice().is_some(),
            self.visible_banner().is_some(),
        )
    }
}
