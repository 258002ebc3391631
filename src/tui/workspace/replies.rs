//! How the workspace follows the server: replies to its requests, shell
//! output, and the session's events.

use serde::de::DeserializeOwned;

use crate::protocol::{
    AttachMode, AttachReply, Audience, ErrorCode, InstructionsReply, Request, ScoreView,
    SessionView, ShellInfo,
};
use crate::session::{Event, EventKind, PauseReason, Phase};

use super::app::{Action, App, Effect, Exit, Pending, ReplyError, Screen};
use crate::tui::widgets::format;
use crate::tui::widgets::shell_tab::ShellTab;

impl App {
    pub(super) fn on_server(&mut self, action: Action, effects: &mut Vec<Effect>) {
        match action {
            Action::Resync => {
                effects.push(self.request(Pending::Show, |session| Request::Show { session }))
            }
            Action::InputRefused {
                shell,
                code,
                message,
            } => match code {
                // The server drops a driver that falls behind: attach again
                // (the reply redraws the screen), unless another client took over.
                ErrorCode::Forbidden => self.reattach(shell, effects),
                // Typing while the clock stops (a race with a pause): say it once, politely.
                _ => self.notify(format!("not sent: {message}")),
            },
            Action::Reply { pending, result } => match result {
                Ok(value) => self.on_reply(pending, value, effects),
                Err(e) => self.on_error(pending, e, effects),
            },
            Action::ShellOutput { shell, data } => {
                let mut bells = 0;
                if let Some(tab) = self.tabs.iter_mut().find(|t| t.shell == shell)
                    && tab.gone.is_none()
                {
                    tab.feed(&data);
                    bells = tab.take_bells();
                }
                if bells > 0 {
                    effects.push(Effect::Bell);
                }
            }
            Action::ShellExited { shell } => self.remove_tab(shell, effects),
            Action::ShellDetached {
                shell,
                fell_behind: true,
                ..
            } => {
                // The screen we show missed output: take the shell back,
                // which brings its current screen.
                self.reattach(shell, effects);
                self.notify(
                    "output came faster than this terminal could show it; the screen was redrawn",
                );
            }
            Action::ShellDetached { shell, reason, .. } => {
                if let Some(tab) = self.tabs.iter_mut().find(|t| t.shell == shell) {
                    tab.gone = Some(format!(
                        "{reason}. {} r takes it back.",
                        self.prefix.key.label()
                    ));
                    tab.detach_locally();
                }
                self.notify_error(reason);
            }
            Action::SessionEvent(event) => self.on_event(*event, effects),
            Action::ScoringStarted => {
                if self.scoring_since_s.is_none() {
                    self.scoring_since_s = Some(self.now_s);
                }
            }
            Action::Disconnected(why) => effects.push(Effect::Exit(self.exit_for_lost(why))),
            Action::ServerShutdown => effects.push(Effect::Exit(Exit::ServerShutdown)),
            Action::Key(_)
            | Action::Paste(_)
            | Action::Mouse(_)
            | Action::Resize(..)
            | Action::Tick => {}
        }
    }

    /// How to leave when the connection broke: the server says why it goes
    /// before it goes (its shutdown pause arrives first).
    pub fn exit_for_lost(&self, why: String) -> Exit {
        let shut_down = self
            .view
            .as_ref()
            .is_some_and(|v| v.pause_reason == Some(PauseReason::ServerShutdown));
        if shut_down {
            Exit::ServerShutdown
        } else {
            Exit::Lost(why)
        }
    }

    fn on_reply(&mut self, pending: Pending, value: serde_json::Value, effects: &mut Vec<Effect>) {
        match pending {
            Pending::Show | Pending::Pause | Pending::Resume | Pending::Note => {
                if let Some(view) = self.decode::<SessionView>(value) {
                    if pending == Pending::Note {
                        self.notify("note saved");
                    }
                    self.apply_view(view, effects);
                }
            }
            Pending::Begin => {
                if let Some(view) = self.decode::<SessionView>(value) {
                    self.notify("the clock is running");
                    self.apply_view(view, effects);
                }
            }
            Pending::Submit => {
                self.submitting_since_s = None;
                if let Some(view) = self.decode::<SessionView>(value) {
                    self.apply_view(view, effects);
                }
            }
            Pending::Score => {
                self.scoring_since_s = None;
                if let Some(score) = self.decode::<ScoreView>(value) {
                    let unit = self
                        .view
                        .as_ref()
                        .map(|v| v.unit.clone())
                        .unwrap_or_default();
                    self.notify(score_summary(&score, &unit));
                }
                // The entry itself arrives as a pushed event (on_event).
            }
            Pending::Instructions => {
                if let Some(reply) = self.decode::<InstructionsReply>(value) {
                    self.instructions = Some(if reply.instructions.is_empty() {
                        "(this environment has no instructions)".to_string()
                    } else {
                        reply.instructions
                    });
                }
            }
            Pending::ShellList => {
                if let Some(shells) = self.decode::<Vec<ShellInfo>>(value) {
                    let mut live: Vec<&ShellInfo> = shells.iter().filter(|s| s.alive).collect();
                    live.sort_by_key(|s| s.shell);
                    let fresh = self.tabs.is_empty();
                    for info in &live {
                        self.add_tab(info.shell, effects);
                    }
                    // Coming back: the tab last typed into is the one shown.
                    let last_used = live
                        .iter()
                        .filter_map(|s| s.last_input_at.map(|at| (at, s.shell)))
                        .max()
                        .and_then(|(_, shell)| self.tabs.iter().position(|t| t.shell == shell));
                    if fresh && let Some(index) = last_used {
                        self.active_tab = index;
                    }
                    if self.tabs.is_empty() && self.opening_shells == 0 {
                        self.open_shell(effects);
                    }
                }
            }
            Pending::ShellOpen => {
                self.opening_shells = self.opening_shells.saturating_sub(1);
                if let Some(info) = self.decode::<ShellInfo>(value) {
                    self.add_tab(info.shell, effects);
                    self.active_tab = self.tabs.len().saturating_sub(1);
                }
            }
            Pending::ShellAttach(shell) => {
                if let Some(reply) = self.decode::<AttachReply>(value) {
                    let screen = crate::protocol::b64_decode(&reply.screen).unwrap_or_default();
                    if let Some(tab) = self.tabs.iter_mut().find(|t| t.shell == shell) {
                        tab.load_screen(&reply, &screen);
                        tab.alive = reply.alive;
                    }
                }
            }
            Pending::Subscribe | Pending::ShellClose(_) => {}
        }
    }

    fn on_error(&mut self, pending: Pending, e: ReplyError, effects: &mut Vec<Effect>) {
        match pending {
            Pending::Score => {
                self.scoring_since_s = None;
                self.notify_error(format!("score: {}", e.message));
            }
            Pending::Submit => {
                self.submitting_since_s = None;
                self.notify_error(format!("submit: {}", e.message));
                effects.push(self.request(Pending::Show, |session| Request::Show { session }));
            }
            Pending::Begin => {
                self.begin_sent = false;
                self.notify_error(format!("cannot start the clock: {}", e.message));
                effects.push(self.request(Pending::Show, |session| Request::Show { session }));
            }
            Pending::ShellOpen => {
                self.opening_shells = self.opening_shells.saturating_sub(1);
                self.notify_error(format!("cannot open a shell: {}", e.message));
            }
            Pending::ShellAttach(shell) => {
                self.notify_error(format!("cannot attach shell {shell}: {}", e.message));
                self.tabs.retain(|t| t.shell != shell);
                self.clamp_active_tab();
            }
            Pending::Instructions => {
                self.instructions =
                    Some(format!("(the instructions cannot be read: {})", e.message));
            }
            Pending::Show if self.view.is_none() => {
                effects.push(Effect::Exit(Exit::Failed(e.message)));
            }
            _ => self.notify_error(e.message),
        }
    }

    fn decode<T: DeserializeOwned>(&mut self, value: serde_json::Value) -> Option<T> {
        match serde_json::from_value(value) {
            Ok(v) => Some(v),
            Err(e) => {
                self.notify_error(format!("unexpected reply from the server: {e}"));
                None
            }
        }
    }

    /// Takes a fresh view: the clock re-syncs, and the screen follows the state.
    pub fn apply_view(&mut self, mut view: SessionView, effects: &mut Vec<Effect>) {
        let first = self.view.is_none();
        if view.scores.is_none() {
            // Some replies leave the score log out: keep ours (the pushed
            // events keep it current), or fetch it when we have none.
            view.scores = self.view.as_mut().and_then(|v| v.scores.take());
            if view.scores.is_none() {
                effects.push(self.request(Pending::Show, |session| Request::Show { session }));
            }
        }
        if let Some(since) = view.scoring_since {
            // A run already going when we attached: show it with its age.
            let age_s = (self.wall_now - since).num_milliseconds().max(0) as f64 / 1000.0;
            self.scoring_since_s.get_or_insert(self.now_s - age_s);
        }
        self.view = Some(view);
        self.synced_at_s = self.now_s;
        if first {
            // Thresholds already passed do not warn again on attach.
            let remaining = self.remaining_s();
            self.armed_warnings = super::app::WARNING_THRESHOLDS
                .into_iter()
                .filter(|t| remaining > *t as f64)
                .collect();
        } else {
            self.check_warnings(effects);
        }
        self.follow_state(effects);
    }

    /// The screen follows the session's state: the start screen before the
    /// clock, the shells while it runs or pauses, the summary at the end.
    fn follow_state(&mut self, effects: &mut Vec<Effect>) {
        let target = match self.state() {
            Some(Phase::Created | Phase::Queued) => Screen::Start,
            Some(Phase::Ended) => Screen::Summary,
            _ => Screen::Workspace,
        };
        if target != self.screen {
            if target == Screen::Workspace && self.tabs.is_empty() {
                effects.push(
                    self.request(Pending::ShellList, |session| Request::ShellList { session }),
                );
            }
            if target == Screen::Summary {
                self.scroll_mode = false;
                self.prefix.disarm();
                self.overlay = None;
            }
            self.screen = target;
        }
    }

    fn add_tab(&mut self, shell: u32, effects: &mut Vec<Effect>) {
        if self.tabs.iter().any(|t| t.shell == shell) {
            return;
        }
        let pane = self.areas().pane;
        self.tabs
            .push(ShellTab::new(shell, pane.height, pane.width));
        effects.push(self.request(Pending::ShellAttach(shell), |session| {
            Request::ShellAttach {
                session,
                shell,
                mode: AttachMode::Driver,
            }
        }));
    }

    /// Attaches a tab's shell again, as its driver.
    pub fn reattach(&mut self, shell: u32, effects: &mut Vec<Effect>) {
        let Some(tab) = self.tabs.iter_mut().find(|t| t.shell == shell) else {
            return;
        };
        if !tab.attached && tab.gone.is_none() {
            return; // a reattach is already on its way
        }
        tab.gone = None;
        tab.detach_locally();
        effects.push(self.request(Pending::ShellAttach(shell), |session| {
            Request::ShellAttach {
                session,
                shell,
                mode: AttachMode::Driver,
            }
        }));
    }

    fn remove_tab(&mut self, shell: u32, effects: &mut Vec<Effect>) {
        let Some(index) = self.tabs.iter().position(|t| t.shell == shell) else {
            return;
        };
        self.tabs.remove(index);
        if index < self.active_tab {
            self.active_tab -= 1;
        }
        self.clamp_active_tab();
        self.scroll_mode = false;
        if self.tabs.is_empty() && self.screen == Screen::Workspace && !self.ended() {
            // Never leave the expert without a shell.
            self.notify("the last shell exited; opened a new one");
            if self.opening_shells == 0 {
                self.open_shell(effects);
            }
        } else if !self.ended() {
            self.notify("a shell exited; its tab is closed");
        }
    }

    fn clamp_active_tab(&mut self) {
        if self.active_tab >= self.tabs.len() {
            self.active_tab = self.tabs.len().saturating_sub(1);
        }
    }

    /// A pushed event of this session: our copy of the view follows the
    /// log through the shared reducer (`protocol::reduce`), with no request;
    /// only the end reads the view again, for the server's final score.
    fn on_event(&mut self, event: Event, effects: &mut Vec<Effect>) {
        let Some(view) = &mut self.view else {
            return; // the first view is on its way and will have it
        };
        let applied = view.apply_here(&event, Audience::Participant);
        if applied.clock_at_event {
            self.synced_at_s = self.now_s;
        }
        if !applied.new {
            return;
        }
        match &event.kind {
            // The server's warning; ours may have fired already.
            EventKind::Warning { threshold_s, .. } if self.armed_warnings.remove(threshold_s) => {
                self.warn(*threshold_s, effects);
            }
            EventKind::Scored { .. } => {
                // Ends the indicator for runs we did not ask for (typed `score`).
                self.scoring_since_s = None;
            }
            // A note by someone else (a proctor's message) is shown, with
            // the bell: the participant may be looking at the shell.
            EventKind::Note { text, by } => {
                let mine = self.view.as_ref().is_some_and(|v| v.participant == *by);
                if by == crate::session::SYSTEM {
                    // What the server says about the session (a process
                    // killed for memory, the recording quota used up).
                    self.notify(text.clone());
                } else if !mine {
                    self.notify(format!("message from {by}: {text}"));
                    effects.push(Effect::Bell);
                }
            }
            EventKind::Ended { .. } => {
                effects.push(self.request(Pending::Show, |session| Request::Show { session }));
            }
            // Out of the queue: the participant may have stepped away.
            EventKind::Granted { grant } => {
                self.notify(format!(
                    "your hardware is ready ({}): press Enter to start the clock",
                    grant.describe()
                ));
                effects.push(Effect::Bell);
            }
            EventKind::Extended { .. } => self.check_warnings(effects),
            _ => {}
        }
        self.follow_state(effects);
    }
}

/// One line about a finished score, for the footer.
pub fn score_summary(score: &ScoreView, unit: &str) -> String {
    if score.hidden {
        return "score recorded (hidden)".into();
    }
    match (score.valid, score.raw, score.normalized) {
        (Some(true), Some(raw), Some(n)) => format!(
            "score: {} (normalized {})",
            format::raw(raw, unit),
            format::normalized(n)
        ),
        (Some(false), ..) => format!("invalid score: {}", score.message),
        _ => format!("score: {}", score.message),
    }
}
