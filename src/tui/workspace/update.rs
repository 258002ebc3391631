//! How the workspace answers the expert: keys, pastes, the mouse, resizes.
//! (Server replies and events are in `replies`.)

use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::{Position, Rect};

use crate::protocol::{Request, b64_encode};
use crate::session::PauseReason;
use crate::session::Phase;

use super::app::{Action, App, Effect, Exit, Overlay, Pending, Screen, Search, Selection};
use super::prefix::{Command, Outcome};
use crate::tui::widgets::keys::{encode_key, encode_mouse, encode_paste, is_input};
use crate::tui::widgets::theme::Urgency;

/// Lines one wheel notch scrolls.
const WHEEL_LINES: isize = 3;
/// Seconds between reads of a queued session's place in line.
const QUEUE_REFRESH_S: f64 = 3.0;
/// Longest note accepted by the editor.
const NOTE_MAX_CHARS: usize = 2000;

impl App {
    /// Applies one action; returns what the runtime must do.
    pub fn update(&mut self, action: Action) -> Vec<Effect> {
        let mut effects = Vec::new();
        if self.reconnect.is_some() && matches!(action, Action::Resync) {
            // Nothing to re-read from a server that is away.
            return effects;
        }
        match action {
            Action::Tick => {
                let before = self.time_signature();
                self.check_warnings(&mut effects);
                // While it waits in line, its place is read again now and then.
                if self.state() == Some(Phase::Queued)
                    && self.now_s - self.synced_at_s >= QUEUE_REFRESH_S
                {
                    self.synced_at_s = self.now_s;
                    effects.push(self.request(Pending::Show, |session| Request::Show { session }));
                }
                // The reconnect screen counts down to the next try.
                if self.time_signature() != before || self.reconnect.is_some() {
                    self.dirty = true;
                }
                return effects;
            }
            Action::Key(key) => {
                if is_input(&key) {
                    self.on_key(key, &mut effects);
                }
                // A key that only went to the shell changes nothing on our
                // screen: its echo redraws (no frame now, so the echo's is
                // not held back by the frame gap).
                if std::mem::take(&mut self.keyed_through) {
                    return effects;
                }
            }
            Action::Paste(text) => self.on_paste(&text, &mut effects),
            Action::Mouse(event) => self.on_mouse(event, &mut effects),
            Action::Resize(cols, rows) => self.area = Rect::new(0, 0, cols, rows),
            Action::ShellOutput { shell, data } => {
                self.on_server(Action::ShellOutput { shell, data }, &mut effects);
                // Output changes its shell's screen, and its tab's label
                // when it sets a title; a screen not shown changes nothing.
                let tab = self.tabs.iter_mut().find(|tab| tab.shell == shell);
                if !tab.is_some_and(|tab| tab.take_retitled()) {
                    if self.active_tab().is_some_and(|tab| tab.shell == shell) {
                        self.pane_dirty = true;
                    }
                    return effects;
                }
            }
            other => self.on_server(other, &mut effects),
        }
        self.fit_shells(&mut effects);
        self.dirty = true;
        effects
    }

    /// Just before a frame: the pane's changed rows, when only they need
    /// drawing (else the whole frame is drawn).
    pub fn prepare_frame(&mut self) {
        if !self.pane_dirty || self.dirty {
            return;
        }
        if !(self.plain_pane_drawn && self.pane_is_plain()) {
            self.dirty = true;
            return;
        }
        if let Some(tab) = self.tabs.get(self.active_tab) {
            // Added to, not replaced: rows found by an earlier look are still
            // to be drawn.
            let changed = tab.rows.borrow_mut().update(tab.parser.screen());
            self.pane_rows.extend(changed);
            self.pane_rows.sort_unstable();
            self.pane_rows.dedup();
        }
    }

    /// Keeps every tab's screen, and its PTY, exactly the size of the pane.
    pub fn fit_shells(&mut self, effects: &mut Vec<Effect>) {
        if self.screen != Screen::Workspace || super::layout::too_small(self.area) {
            return;
        }
        let pane = self.areas().pane;
        for tab in &mut self.tabs {
            if tab.attached && tab.alive && tab.resize(pane.height, pane.width) {
                let shell = tab.shell;
                effects.push(Effect::Post(Request::ShellResize {
                    session: self.session.clone(),
                    shell,
                    cols: pane.width,
                    rows: pane.height,
                }));
            }
        }
    }

    fn on_key(&mut self, key: KeyEvent, effects: &mut Vec<Effect>) {
        if let Some(overlay) = self.overlay.take() {
            self.overlay_key(overlay, key, effects);
            return;
        }
        match self.screen {
            Screen::Connecting => {
                if is_plain(&key, 'q') || is_ctrl(&key, 'c') {
                    effects.push(Effect::Exit(Exit::Quit));
                }
            }
            Screen::Start => self.start_key(key, effects),
            Screen::Summary => self.summary_key(key, effects),
            Screen::Workspace => self.workspace_key(key, effects),
        }
    }

    fn start_key(&mut self, key: KeyEvent, effects: &mut Vec<Effect>) {
        match key.code {
            KeyCode::Enter if self.state() == Some(Phase::Queued) => {
                self.notify("waiting for the hardware: the clock can start once it is yours");
            }
            KeyCode::Enter if !self.begin_sent => {
                self.begin_sent = true;
                self.notify("starting the clock…");
                effects.push(self.request(Pending::Begin, |session| Request::Begin { session }));
            }
            KeyCode::Char('i') => self.open_instructions(),
            KeyCode::Char('q') | KeyCode::Esc => effects.push(Effect::Exit(Exit::Quit)),
            _ => {}
        }
    }

    fn summary_key(&mut self, key: KeyEvent, effects: &mut Vec<Effect>) {
        match key.code {
            KeyCode::Char('i') => self.open_instructions(),
            KeyCode::Char('q') | KeyCode::Esc | KeyCode::Enter => {
                effects.push(Effect::Exit(Exit::Quit))
            }
            _ => {}
        }
    }

    fn open_instructions(&mut self) {
        self.overlay = Some(Overlay::Instructions { scroll: 0 });
        if self.instructions.is_none() {
            self.notify("loading the instructions…");
        }
    }

    fn workspace_key(&mut self, key: KeyEvent, effects: &mut Vec<Effect>) {
        match self.prefix.feed(key) {
            Outcome::Armed | Outcome::Cancelled => {}
            Outcome::Unknown(k) => self.notify_error(format!(
                "{} {} is not a command ({} ? lists them)",
                self.prefix.key.label(),
                key_label(&k),
                self.prefix.key.label()
            )),
            Outcome::SendPrefix(byte) => self.send_to_shell(vec![byte], effects),
            Outcome::Command(c) => self.command(c, effects),
            Outcome::Forward(k) => {
                if self.scroll_mode {
                    self.scroll_key(k, effects);
                    return;
                }
                let Some(tab) = self.active_tab_mut() else {
                    return;
                };
                // Typing returns to the live screen, as in any terminal.
                let was_live = tab.scrolled() == 0;
                tab.scroll_to_bottom();
                if let Some(bytes) = encode_key(&k, &tab.modes()) {
                    let before = effects.len();
                    self.send_to_shell(bytes, effects);
                    let sent = effects.len() > before;
                    self.keyed_through = sent && was_live;
                }
            }
        }
    }

    /// Input for the active shell, unless the session is not taking any.
    fn send_to_shell(&mut self, bytes: Vec<u8>, effects: &mut Vec<Effect>) {
        if !self.running() {
            let why = match self.state() {
                // Not theirs to end: no resume key that would be refused.
                Some(Phase::Paused) if !self.pause_is_mine() => {
                    "paused: input is not sent until the pause ends".to_string()
                }
                Some(Phase::Paused) => format!(
                    "paused: input is not sent. {} p resumes",
                    self.prefix.key.label()
                ),
                Some(Phase::Ended) => "the session has ended".to_string(),
                _ => "the clock has not started".to_string(),
            };
            self.notify(why);
            return;
        }
        let Some(tab) = self.tabs.get(self.active_tab) else {
            return;
        };
        if !tab.alive || !tab.attached {
            return;
        }
        effects.push(Effect::Post(Request::ShellInput {
            session: self.session.clone(),
            shell: tab.shell,
            data: b64_encode(&bytes),
        }));
    }

    /// Text to the outer terminal's clipboard (OSC 52), said in the footer.
    fn copy(&mut self, text: String, effects: &mut Vec<Effect>) {
        if text.trim().is_empty() {
            return;
        }
        let lines = text.lines().count();
        effects.push(Effect::Copy(text));
        self.notify(match lines {
            1 => "copied 1 line (to your terminal's clipboard)".to_string(),
            n => format!("copied {n} lines (to your terminal's clipboard)"),
        });
    }

    /// A key while the search query is typed: `true` if it was the search's.
    fn search_key(&mut self, key: &KeyEvent) -> bool {
        let Some(search) = self.search.as_mut().filter(|s| s.editing) else {
            return false;
        };
        match key.code {
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                search.query.push(c)
            }
            KeyCode::Backspace => {
                search.query.pop();
            }
            KeyCode::Esc => self.search = None,
            KeyCode::Enter => {
                search.editing = false;
                search.found = None;
                if search.query.is_empty() {
                    self.search = None;
                } else {
                    self.find_next(true);
                }
            }
            _ => {}
        }
        true
    }

    /// The next match, older or newer than the last one (or than the view).
    fn find_next(&mut self, older: bool) {
        let Some(search) = self.search.clone().filter(|s| !s.query.is_empty()) else {
            self.notify("/ searches the scrollback");
            return;
        };
        let Some(tab) = self.tabs.get_mut(self.active_tab) else {
            return;
        };
        let from = match search.found {
            Some(found) => found.line,
            // From the view: older from its bottom line up (what is in view
            // first), newer from its top line down.
            None if older => tab.top_line() + tab.size().0 as usize,
            None => tab.top_line(),
        };
        match tab.find(&search.query, from, older) {
            Some(found) => {
                if let Some(s) = &mut self.search {
                    s.found = Some(found);
                }
            }
            None => self.notify(format!(
                "no {} match for “{}”",
                if older { "older" } else { "newer" },
                search.query
            )),
        }
    }

    fn scroll_key(&mut self, key: KeyEvent, effects: &mut Vec<Effect>) {
        if self.search_key(&key) {
            return;
        }
        match key.code {
            KeyCode::Char('/') => {
                self.search = Some(Search {
                    editing: true,
                    ..Search::default()
                });
                return;
            }
            KeyCode::Char('n') => return self.find_next(true),
            // The lines in view, to the outer terminal's clipboard.
            KeyCode::Char('y') => {
                if let Some(tab) = self.active_tab() {
                    let text = tab.view_text(0, tab.size().0.saturating_sub(1));
                    self.copy(text, effects);
                }
                return;
            }
            KeyCode::Char('N') => return self.find_next(false),
            _ => {}
        }
        let page = self.areas().pane.height.saturating_sub(1).max(1) as isize;
        let Some(tab) = self.active_tab_mut() else {
            self.scroll_mode = false;
            return;
        };
        match key.code {
            KeyCode::PageUp => tab.scroll_by(page),
            KeyCode::PageDown => tab.scroll_by(-page),
            KeyCode::Up | KeyCode::Char('k') => tab.scroll_by(1),
            KeyCode::Down | KeyCode::Char('j') => tab.scroll_by(-1),
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                tab.scroll_by(page / 2)
            }
            KeyCode::Char('d') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                tab.scroll_by(-page / 2)
            }
            KeyCode::Home | KeyCode::Char('g') => tab.scroll_to_top(),
            KeyCode::End | KeyCode::Char('G') => tab.scroll_to_bottom(),
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Enter => {
                tab.scroll_to_bottom();
                self.scroll_mode = false;
                self.search = None;
            }
            _ => {}
        }
    }

    fn command(&mut self, command: Command, effects: &mut Vec<Effect>) {
        match command {
            Command::Score => {
                if self.scoring_since_s.is_some() {
                    self.notify("a scoring run is already in progress");
                } else if !self.running() {
                    self.notify_error("scores are taken while the session runs");
                } else {
                    self.scoring_since_s = Some(self.now_s);
                    effects
                        .push(self.request(Pending::Score, |session| Request::Score { session }));
                }
            }
            Command::PauseResume => match self.state() {
                Some(Phase::Running) => self.overlay = Some(Overlay::PauseChoice),
                Some(Phase::Paused) => {
                    let reason = self.view.as_ref().and_then(|v| v.pause_reason);
                    match reason {
                        Some(r) if !r.participant_may_resume() => self.notify_error(format!(
                            "this pause ({r}) is not yours to end; the proctor resumes it"
                        )),
                        _ => effects.push(
                            self.request(Pending::Resume, |session| Request::Resume { session }),
                        ),
                    }
                }
                _ => self.notify_error("the session is not running"),
            },
            Command::Note => {
                self.overlay = Some(Overlay::Note {
                    text: String::new(),
                })
            }
            Command::Instructions => self.open_instructions(),
            Command::NewTab => self.open_shell(effects),
            Command::NextTab => self.switch_tab(1),
            Command::PrevTab => self.switch_tab(-1),
            Command::GoToTab(i) => {
                if i < self.tabs.len() {
                    self.active_tab = i;
                    self.scroll_mode = false;
                } else {
                    self.notify(format!("there is no tab {}", i + 1));
                }
            }
            Command::RenameTab => {
                if let Some(tab) = self.active_tab() {
                    self.overlay = Some(Overlay::RenameTab {
                        text: tab.name.clone().unwrap_or_default(),
                    });
                }
            }
            Command::CloseTab => {
                if let Some(tab) = self.active_tab() {
                    self.overlay = Some(Overlay::ConfirmClose { shell: tab.shell });
                }
            }
            Command::ToggleSidePanel => {
                self.side_panel = !self.side_panel;
                if self.side_panel && !super::layout::side_panel_fits(self.area) {
                    self.notify(format!(
                        "the score panel needs a window {} columns wide",
                        super::layout::SIDE_PANEL_MIN_TERMINAL_COLS
                    ));
                }
            }
            Command::Scrollback => {
                if let Some(tab) = self.active_tab_mut() {
                    tab.scroll_by(1);
                    self.scroll_mode = true;
                    self.search = None;
                }
            }
            Command::Submit => {
                if self.submitting_since_s.is_some() {
                    self.notify("submitting…");
                } else if self.ended() {
                    self.notify("the session has already ended");
                } else if self.view.as_ref().is_some_and(|v| v.answer_scored) {
                    self.overlay = Some(Overlay::Answer {
                        text: String::new(),
                    });
                } else {
                    self.overlay = Some(Overlay::ConfirmSubmit);
                }
            }
            Command::Detach => effects.push(Effect::Exit(Exit::Detached)),
            Command::Reattach => {
                if let Some(shell) = self.active_tab().map(|t| t.shell) {
                    self.reattach(shell, effects);
                }
            }
            Command::Help => self.overlay = Some(Overlay::Help),
        }
    }

    pub fn open_shell(&mut self, effects: &mut Vec<Effect>) {
        if self.ended() {
            self.notify_error("the session has ended");
            return;
        }
        let pane = self.areas().pane;
        self.opening_shells += 1;
        effects.push(Effect::Send(
            Pending::ShellOpen,
            Request::ShellOpen {
                session: self.session.clone(),
                cols: pane.width.max(2),
                rows: pane.height.max(2),
            },
        ));
    }

    fn switch_tab(&mut self, step: isize) {
        let n = self.tabs.len() as isize;
        if n == 0 {
            return;
        }
        self.active_tab = (self.active_tab as isize + step).rem_euclid(n) as usize;
        self.scroll_mode = false;
    }

    fn overlay_key(&mut self, overlay: Overlay, key: KeyEvent, effects: &mut Vec<Effect>) {
        // Returning the overlay keeps it open.
        let keep = match overlay {
            Overlay::Help => None,
            Overlay::Instructions { scroll } => self.instructions_key(scroll, key),
            Overlay::Note { text } => self.note_key(text, key, effects),
            Overlay::RenameTab { text } => match edit_line(text, &key) {
                LineEdit::Editing(text) => Some(Overlay::RenameTab { text }),
                LineEdit::Cancel => None,
                LineEdit::Enter(text) => {
                    if let Some(tab) = self.active_tab_mut() {
                        let name: String = text.trim().chars().take(40).collect();
                        tab.name = (!name.is_empty()).then_some(name);
                    }
                    None
                }
            },
            Overlay::PauseChoice => {
                let reason = match key.code {
                    KeyCode::Char('b') | KeyCode::Char('1') => Some(PauseReason::Break),
                    KeyCode::Char('t') | KeyCode::Char('2') => Some(PauseReason::TechnicalIssue),
                    _ => None,
                };
                if let Some(reason) = reason {
                    effects.push(self.request(Pending::Pause, |session| Request::Pause {
                        session,
                        reason,
                        note: None,
                    }));
                }
                None
            }
            Overlay::ConfirmClose { shell } => {
                if is_plain(&key, 'y') {
                    effects.push(self.request(Pending::ShellClose(shell), |session| {
                        Request::ShellClose { session, shell }
                    }));
                }
                None
            }
            Overlay::Answer { text } => match edit_line(text, &key) {
                LineEdit::Editing(text) => Some(Overlay::Answer { text }),
                LineEdit::Cancel => None,
                LineEdit::Enter(answer) if answer.is_empty() => {
                    self.notify_error("type the answer first (Esc: keep working)");
                    Some(Overlay::Answer { text: answer })
                }
                LineEdit::Enter(answer) => {
                    self.submitting_since_s = Some(self.now_s);
                    effects.push(self.request(Pending::Submit, |session| Request::Submit {
                        session,
                        answer: Some(answer),
                    }));
                    None
                }
            },
            Overlay::ConfirmSubmit => {
                if is_plain(&key, 'y') {
                    self.submitting_since_s = Some(self.now_s);
                    effects.push(self.request(Pending::Submit, |session| Request::Submit {
                        session,
                        answer: None,
                    }));
                }
                None
            }
        };
        self.overlay = keep;
    }

    fn instructions_key(&mut self, scroll: u16, key: KeyEvent) -> Option<Overlay> {
        let inner = super::ui::overlays::instructions_inner(&self.theme, self.area);
        let max = super::ui::overlays::instructions_max_scroll(self, inner);
        let page = inner.height.saturating_sub(1).max(1);
        let scroll = match key.code {
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('i') => return None,
            KeyCode::Down | KeyCode::Char('j') | KeyCode::Enter => scroll.saturating_add(1),
            KeyCode::Up | KeyCode::Char('k') => scroll.saturating_sub(1),
            KeyCode::PageDown | KeyCode::Char(' ') => scroll.saturating_add(page),
            KeyCode::PageUp => scroll.saturating_sub(page),
            KeyCode::Home | KeyCode::Char('g') => 0,
            KeyCode::End | KeyCode::Char('G') => max,
            _ => scroll,
        };
        Some(Overlay::Instructions {
            scroll: scroll.min(max),
        })
    }

    fn note_key(
        &mut self,
        text: String,
        key: KeyEvent,
        effects: &mut Vec<Effect>,
    ) -> Option<Overlay> {
        match edit_line(text, &key) {
            LineEdit::Editing(text) => Some(Overlay::Note { text }),
            LineEdit::Cancel => None,
            LineEdit::Enter(text) => {
                if !text.is_empty() {
                    effects.push(
                        self.request(Pending::Note, |session| Request::Note { session, text }),
                    );
                }
                None
            }
        }
    }

    fn on_paste(&mut self, text: &str, effects: &mut Vec<Effect>) {
        match &mut self.overlay {
            Some(
                Overlay::Note { text: note }
                | Overlay::Answer { text: note }
                | Overlay::RenameTab { text: note },
            ) => {
                let room = NOTE_MAX_CHARS.saturating_sub(note.chars().count());
                note.extend(
                    text.chars()
                        .map(|c| if c.is_control() { ' ' } else { c })
                        .take(room),
                );
                return;
            }
            Some(_) => return,
            None => {}
        }
        if self.screen != Screen::Workspace || self.scroll_mode {
            return;
        }
        self.prefix.disarm();
        let Some(tab) = self.active_tab_mut() else {
            return;
        };
        tab.scroll_to_bottom();
        let bytes = encode_paste(text, &tab.modes());
        self.send_to_shell(bytes, effects);
    }

    fn on_mouse(&mut self, event: MouseEvent, effects: &mut Vec<Effect>) {
        let up = matches!(event.kind, MouseEventKind::ScrollUp);
        let down = matches!(event.kind, MouseEventKind::ScrollDown);
        if let Some(Overlay::Instructions { scroll }) = self.overlay {
            let inner = super::ui::overlays::instructions_inner(&self.theme, self.area);
            let max = super::ui::overlays::instructions_max_scroll(self, inner);
            let scroll = if up {
                scroll.saturating_sub(WHEEL_LINES as u16)
            } else if down {
                scroll.saturating_add(WHEEL_LINES as u16).min(max)
            } else {
                scroll
            };
            self.overlay = Some(Overlay::Instructions { scroll });
            return;
        }
        if self.overlay.is_some() || self.screen != Screen::Workspace {
            return;
        }
        let pane = self.areas().pane;
        let at = Position::new(event.column, event.row);
        if !pane.contains(at) {
            return;
        }
        let scroll_mode = self.scroll_mode;
        let Some(tab) = self.tabs.get_mut(self.active_tab) else {
            return;
        };
        let modes = tab.modes();
        if modes.wants_mouse() && !scroll_mode && tab.scrolled() == 0 {
            if let Some(bytes) = encode_mouse(&event, at.x - pane.x, at.y - pane.y, &modes) {
                self.send_to_shell(bytes, effects);
            }
            return;
        }
        // The program did not ask for the mouse: a drag selects rows (copied
        // when the button is let go), the wheel reads our scrollback.
        let row = at.y - pane.y;
        match event.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                self.selection = Some(Selection {
                    offset: tab.scrolled(),
                    from: row,
                    to: row,
                });
                return;
            }
            MouseEventKind::Drag(MouseButton::Left) => {
                if let Some(s) = &mut self.selection {
                    s.to = row;
                }
                return;
            }
            MouseEventKind::Up(MouseButton::Left) => {
                if let Some(s) = self.selection.take()
                    && s.offset == tab.scrolled()
                {
                    let text = tab.view_text(s.from, s.to);
                    self.copy(text, effects);
                }
                return;
            }
            _ => {}
        }
        if up {
            tab.scroll_by(WHEEL_LINES);
            self.scroll_mode = tab.scrolled() > 0;
        } else if down {
            tab.scroll_by(-WHEEL_LINES);
            self.scroll_mode = tab.scrolled() > 0;
        }
    }

    /// Warns (banner and bell) when the remaining time crosses 1 h, 15 min, 5 min.
    pub fn check_warnings(&mut self, effects: &mut Vec<Effect>) {
        if self.view.is_none() || self.ended() {
            return;
        }
        let remaining = self.remaining_s();
        for threshold in super::app::WARNING_THRESHOLDS {
            let t = threshold as f64;
            if remaining > t {
                self.armed_warnings.insert(threshold);
            } else if self.running() && self.armed_warnings.remove(&threshold) {
                self.warn(threshold, effects);
            }
        }
    }

    pub fn warn(&mut self, threshold_s: u64, effects: &mut Vec<Effect>) {
        self.banner = Some(super::app::Banner {
            threshold_s,
            since_s: self.now_s,
        });
        effects.push(Effect::Bell);
        self.dirty = true;
    }

    pub fn urgency(&self) -> Urgency {
        Urgency::of(self.remaining_s())
    }
}

fn is_plain(key: &KeyEvent, c: char) -> bool {
    key.code == KeyCode::Char(c)
        && !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
}

fn is_ctrl(key: &KeyEvent, c: char) -> bool {
    key.code == KeyCode::Char(c) && key.modifiers.contains(KeyModifiers::CONTROL)
}

/// A key as the help writes it.
pub fn key_label(key: &KeyEvent) -> String {
    let mut s = String::new();
    if key.modifiers.contains(KeyModifiers::CONTROL) {
        s.push_str("C-");
    }
    if key.modifiers.contains(KeyModifiers::ALT) {
        s.push_str("M-");
    }
    match key.code {
        KeyCode::Char(c) => s.push(c),
        other => s.push_str(&format!("{other:?}")),
    }
    s
}

/// What a key did to a one-line text input (a note, an answer).
enum LineEdit {
    Editing(String),
    Cancel,
    /// Enter: the text, trimmed.
    Enter(String),
}

fn edit_line(mut text: String, key: &KeyEvent) -> LineEdit {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Esc => return LineEdit::Cancel,
        KeyCode::Char('c') if ctrl => return LineEdit::Cancel,
        KeyCode::Enter => return LineEdit::Enter(text.trim().to_string()),
        KeyCode::Backspace => {
            text.pop();
        }
        KeyCode::Char('u') if ctrl => text.clear(),
        KeyCode::Char('w') if ctrl => {
            let keep = text.trim_end().rfind(' ').map(|i| i + 1).unwrap_or(0);
            text.truncate(keep);
        }
        KeyCode::Char(c) if !ctrl && text.chars().count() < NOTE_MAX_CHARS => text.push(c),
        _ => {}
    }
    LineEdit::Editing(text)
}
