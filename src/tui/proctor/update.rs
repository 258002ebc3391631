//! Keys: moving around the table and the detail view, filtering, and
//! opening the action dialogs. (Replies and pushes are in `replies`.)

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::app::{Action, App, Effect, Exit, Focus, Overlay, Pending, Screen};
use super::detail::{Detail, Pane};
use super::dialog::{ActionKind, Dialog, Outcome, Submission};
use super::rows::View;
use crate::protocol::Request;
use crate::session::{Kind, Phase};

/// Rows a page key moves.
const PAGE: isize = 10;

impl App {
    /// One action, then the rows brought up to date.
    pub fn update(&mut self, action: Action) -> Vec<Effect> {
        let effects = self.handle(action);
        self.settle();
        effects
    }

    /// One action; pushed events only mark the rows stale, so that a burst
    /// of them costs one recompute (`settle`) rather than one each.
    pub fn handle(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Key(key) => {
                if key.kind == KeyEventKind::Release {
                    return Vec::new();
                }
                self.dirty = true;
                self.key(key)
            }
            Action::Paste(text) => {
                if let Some(Overlay::Dialog(d)) = &mut self.overlay {
                    d.paste(&text);
                } else if self.searching {
                    self.view.search.push_str(text.trim());
                    self.recompute();
                }
                self.dirty = true;
                Vec::new()
            }
            Action::Resize(cols, rows) => {
                self.area = ratatui::layout::Rect::new(0, 0, cols, rows);
                self.dirty = true;
                Vec::new()
            }
            Action::Tick => {
                // `now` has moved on: redraw if the clock or a notice changed.
                self.recompute();
                let signature = self.time_signature();
                if signature != self.signature {
                    self.signature = signature;
                    self.dirty = true;
                }
                Vec::new()
            }
            Action::Resync => self.resync(),
            Action::Reply { pending, result } => self.reply(pending, result),
            Action::Push(push) => self.push(*push),
            Action::Disconnected(why) => vec![Effect::Exit(Exit::Lost(why))],
        }
    }

    /// Re-reads every session, and the detail view's shells (a watcher is
    /// not told when the driver resizes).
    pub fn resync(&mut self) -> Vec<Effect> {
        let mut effects = vec![Effect::Send(Pending::List, Request::ListSessions)];
        if let Some(d) = &self.detail {
            effects.push(Effect::Send(
                Pending::DetailShells(d.session.clone()),
                Request::ShellList {
                    session: d.session.clone(),
                },
            ));
        }
        effects
    }

    fn key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if let Some(Overlay::Dialog(dialog)) = &mut self.overlay {
            return match dialog.key(key) {
                Outcome::Open => Vec::new(),
                Outcome::Cancelled => {
                    self.overlay = None;
                    Vec::new()
                }
                Outcome::Submit(s) => {
                    self.overlay = None;
                    vec![submit(s)]
                }
                Outcome::SubmitAll(all) => {
                    self.overlay = None;
                    self.notify(format!("sent to {} sessions", all.len()));
                    all.into_iter().map(submit).collect()
                }
            };
        }
        if self.overlay == Some(Overlay::Help) {
            self.overlay = None;
            return Vec::new();
        }
        if ctrl && key.code == KeyCode::Char('c') {
            return vec![Effect::Exit(Exit::Quit)];
        }
        if self.searching {
            self.search_key(key);
            return Vec::new();
        }
        if let Some(kind) = action_for(key.code) {
            return self.open_dialog(kind);
        }
        match key.code {
            KeyCode::Char('?') => {
                self.overlay = Some(Overlay::Help);
                return Vec::new();
            }
            KeyCode::Char('R') => return self.refresh(),
            _ => {}
        }
        match self.screen {
            Screen::Table => self.table_key(key),
            Screen::Detail => self.detail_key(key),
        }
    }

    fn search_key(&mut self, key: KeyEvent) {
        match key.code {
            KeyCode::Esc => {
                self.searching = false;
                self.view.search.clear();
            }
            KeyCode::Enter => self.searching = false,
            KeyCode::Backspace => {
                self.view.search.pop();
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.view.search.push(c)
            }
            _ => return,
        }
        self.recompute();
    }

    fn table_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        match key.code {
            KeyCode::Char('q') => return vec![Effect::Exit(Exit::Quit)],
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1),
            KeyCode::PageUp => self.move_selection(-PAGE),
            KeyCode::PageDown => self.move_selection(PAGE),
            KeyCode::Home | KeyCode::Char('g') => self.move_selection(-isize::MAX / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_selection(isize::MAX / 2),
            KeyCode::Tab | KeyCode::BackTab => {
                self.focus = match self.focus {
                    Focus::Table if !self.alert_list.is_empty() => Focus::Alerts,
                    _ => Focus::Table,
                };
            }
            KeyCode::Enter => {
                if let Some(id) = self.target() {
                    return self.open_detail(&id);
                }
            }
            KeyCode::Char('/') => {
                self.searching = true;
                self.focus = Focus::Table;
            }
            KeyCode::Char('f') => self.view.state = self.view.state.next(),
            KeyCode::Char('e') => self.view.environment = self.next_environment(),
            KeyCode::Char('t') => {
                self.view.kind = match self.view.kind {
                    None => Some(Kind::Human),
                    Some(Kind::Human) => Some(Kind::Agent),
                    Some(Kind::Agent) => None,
                }
            }
            KeyCode::Char('!') => self.view.alerts_only = !self.view.alerts_only,
            KeyCode::Char('o') => self.view.sort = self.view.sort.next(),
            KeyCode::Char('O') => self.view.descending = !self.view.descending,
            KeyCode::Char('c') => {
                self.view = View {
                    sort: self.view.sort,
                    descending: self.view.descending,
                    ..View::default()
                }
            }
            KeyCode::Char('a') => self.acknowledge(),
            KeyCode::Char(' ') => {
                if let Some(id) = self.target()
                    && !self.marked.remove(&id)
                {
                    self.marked.insert(id);
                }
            }
            KeyCode::Char('*') => {
                // Every shown session, or none when they all are already.
                let shown: Vec<String> = self.rows.iter().map(|r| r.id.clone()).collect();
                if shown.iter().all(|id| self.marked.contains(id)) {
                    self.marked.clear();
                } else {
                    self.marked.extend(shown);
                }
            }
            _ => return Vec::new(),
        }
        self.recompute();
        Vec::new()
    }

    fn detail_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let Some(detail) = &mut self.detail else {
            self.screen = Screen::Table;
            return Vec::new();
        };
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Backspace => return self.close_detail(),
            KeyCode::Char('v') => {
                detail.pane = match detail.pane {
                    Pane::Shells => Pane::Execs,
                    Pane::Execs => Pane::Shells,
                }
            }
            KeyCode::Tab | KeyCode::Right | KeyCode::Char(']') => {
                detail.pane = Pane::Shells;
                detail.next_tab(1);
            }
            KeyCode::BackTab | KeyCode::Left | KeyCode::Char('[') => {
                detail.pane = Pane::Shells;
                detail.next_tab(-1);
            }
            KeyCode::Char(c @ '1'..='9') => {
                let i = c as usize - '1' as usize;
                if i < detail.mirrors.len() {
                    detail.pane = Pane::Shells;
                    detail.active = i;
                }
            }
            // The shell's history in the mirror, the exec list in the other pane.
            KeyCode::Up | KeyCode::Char('k') if detail.pane == Pane::Shells => {
                detail.scroll_mirror(Some(1))
            }
            KeyCode::Down | KeyCode::Char('j') if detail.pane == Pane::Shells => {
                detail.scroll_mirror(Some(-1))
            }
            KeyCode::Home | KeyCode::Char('g') if detail.pane == Pane::Shells => {
                detail.scroll_mirror(Some(isize::MAX / 2))
            }
            KeyCode::End | KeyCode::Char('G') if detail.pane == Pane::Shells => {
                detail.scroll_mirror(None)
            }
            KeyCode::Up | KeyCode::Char('k') => detail.move_exec(-1),
            KeyCode::Down | KeyCode::Char('j') => detail.move_exec(1),
            KeyCode::PageUp => detail.score_scroll = detail.score_scroll.saturating_sub(5),
            KeyCode::PageDown => detail.score_scroll += 5,
            KeyCode::Char('a') => self.acknowledge(),
            _ => {}
        }
        Vec::new()
    }

    fn move_selection(&mut self, step: isize) {
        match self.focus {
            Focus::Alerts => {
                let max = self.alert_list.len().saturating_sub(1) as isize;
                self.alert_selected = (self.alert_selected as isize)
                    .saturating_add(step)
                    .clamp(0, max) as usize;
            }
            Focus::Table => {
                if self.rows.is_empty() {
                    return;
                }
                let now = self.selected_index().unwrap_or(0) as isize;
                let max = self.rows.len() as isize - 1;
                let next = now.saturating_add(step).clamp(0, max) as usize;
                self.selected = Some(self.rows[next].id.clone());
            }
        }
    }

    /// The next environment filter: every environment, then each in turn.
    fn next_environment(&self) -> Option<String> {
        let mut envs: Vec<&String> = self
            .fleet
            .sessions
            .values()
            .map(|t| &t.view.environment)
            .collect();
        envs.sort();
        envs.dedup();
        match &self.view.environment {
            None => envs.first().map(|e| e.to_string()),
            Some(now) => envs
                .iter()
                .position(|e| *e == now)
                .and_then(|i| envs.get(i + 1))
                .map(|e| e.to_string()),
        }
    }

    /// Hides the target session's current alerts from the list (new ones show).
    fn acknowledge(&mut self) {
        let Some(id) = self.target() else {
            return;
        };
        let keys: Vec<_> = self
            .alert_list
            .iter()
            .filter(|l| l.session == id)
            .map(|l| App::ack_key(&l.session, &l.alert))
            .collect();
        let n = keys.len();
        self.acknowledged.extend(keys);
        self.recompute();
        if n > 0 {
            self.notify(format!("alerts of {id} acknowledged"));
        }
    }

    fn open_dialog(&mut self, kind: ActionKind) -> Vec<Effect> {
        let bulk = matches!(
            kind,
            ActionKind::Pause | ActionKind::Resume | ActionKind::Extend | ActionKind::Note
        );
        if bulk && !self.marked.is_empty() {
            return self.open_bulk_dialog(kind);
        }
        let Some(id) = self.target() else {
            self.notify_error("no session selected");
            return Vec::new();
        };
        let Some(t) = self.fleet.get(&id) else {
            return Vec::new();
        };
        let state = t.view.state;
        let refusal = match kind {
            _ if state == Phase::Ended => Some("has ended"),
            ActionKind::Begin if state != Phase::Created => Some("has started already"),
            ActionKind::Pause if state != Phase::Running => Some("is not running"),
            ActionKind::Resume if state != Phase::Paused => Some("is not paused"),
            _ => None,
        };
        if let Some(why) = refusal {
            self.notify_error(format!(
                "{}: session {id} of {} {why}",
                kind.title(),
                t.view.participant
            ));
            return Vec::new();
        }
        let dialog = Dialog::new(kind, &id, &t.view.participant)
            .with_budget(t.view.budget_s, t.active_s(self.now));
        self.overlay = Some(Overlay::Dialog(dialog));
        Vec::new()
    }

    /// The action on every marked session it applies to (pause the running
    /// ones, resume the paused ones; none that has ended).
    fn open_bulk_dialog(&mut self, kind: ActionKind) -> Vec<Effect> {
        // In the table's order (marked rows filtered out of view last).
        let shown = self.rows.iter().map(|r| &r.id);
        let hidden = self
            .marked
            .iter()
            .filter(|id| !self.rows.iter().any(|r| &r.id == *id));
        let targets: Vec<(String, String)> = shown
            .filter(|id| self.marked.contains(*id))
            .chain(hidden)
            .filter_map(|id| self.fleet.get(id))
            .filter(|t| match kind {
                ActionKind::Pause => t.view.state == Phase::Running,
                ActionKind::Resume => t.view.state == Phase::Paused,
                _ => t.view.state != Phase::Ended,
            })
            .map(|t| (t.view.id.clone(), t.view.participant.clone()))
            .collect();
        match Dialog::bulk(kind, &targets) {
            Some(dialog) => self.overlay = Some(Overlay::Dialog(dialog)),
            None => self.notify_error(format!(
                "{}: none of the {} marked sessions can take it",
                kind.title(),
                self.marked.len()
            )),
        }
        Vec::new()
    }

    pub fn open_detail(&mut self, id: &str) -> Vec<Effect> {
        let agent = self
            .fleet
            .get(id)
            .is_some_and(|t| t.view.kind == Kind::Agent);
        let mut effects = self.close_detail();
        self.detail = Some(Detail::new(id, agent));
        self.screen = Screen::Detail;
        self.selected = Some(id.to_string());
        effects.extend(self.detail_requests(id));
        effects
    }

    pub(super) fn detail_requests(&self, id: &str) -> Vec<Effect> {
        let session = || id.to_string();
        vec![
            Effect::Send(
                Pending::Show(session()),
                Request::Show { session: session() },
            ),
            Effect::Send(
                Pending::DetailShells(session()),
                Request::ShellList { session: session() },
            ),
            Effect::Send(
                Pending::Events(session()),
                Request::Events { session: session() },
            ),
        ]
    }

    /// Back to the table; the mirrors stop (the server stops sending).
    pub fn close_detail(&mut self) -> Vec<Effect> {
        self.screen = Screen::Table;
        let Some(d) = self.detail.take() else {
            return Vec::new();
        };
        d.mirrors
            .iter()
            .map(|m| {
                Effect::Send(
                    Pending::Detach,
                    Request::ShellDetach {
                        session: d.session.clone(),
                        shell: m.tab.shell,
                    },
                )
            })
            .collect()
    }

    /// `R`: everything again from the server.
    fn refresh(&mut self) -> Vec<Effect> {
        let mut effects = vec![Effect::Send(Pending::List, Request::ListSessions)];
        if let Some(d) = &self.detail {
            let id = d.session.clone();
            effects.extend(self.detail_requests(&id));
        }
        self.notify("refreshing…");
        effects
    }
}

fn action_for(code: KeyCode) -> Option<ActionKind> {
    Some(match code {
        KeyCode::Char('b') => ActionKind::Begin,
        KeyCode::Char('p') => ActionKind::Pause,
        KeyCode::Char('r') => ActionKind::Resume,
        KeyCode::Char('x') => ActionKind::Extend,
        KeyCode::Char('n') => ActionKind::Note,
        KeyCode::Char('E') => ActionKind::End,
        KeyCode::Char('s') => ActionKind::Score,
        _ => return None,
    })
}

fn submit(s: Submission) -> Effect {
    Effect::Send(
        Pending::Act {
            kind: s.kind,
            session: s.session,
            then_note: s.then_note,
        },
        s.request,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Push, ShellInfo};
    use crate::session::PauseReason;
    use crate::tui::proctor::alerts::AlertKind;
    use crate::tui::proctor::sample;
    use crate::tui::proctor::settings::Thresholds;
    use crate::tui::widgets::theme::Theme;

    fn app() -> App {
        let mut app = App::new(
            "ana (proctor)",
            Thresholds::default(),
            Theme { color: false },
            sample::now(),
        );
        app.fleet = sample::showcase();
        app.loaded = true;
        app.recompute();
        app
    }

    fn press(app: &mut App, c: char) -> Vec<Effect> {
        app.update(Action::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        )))
    }

    #[test]
    fn a_fire_alarm_pauses_every_marked_running_session_in_one_dialog() {
        let mut a = app();
        // Mark everything shown: the running, the paused, the ended.
        press(&mut a, '*');
        assert_eq!(a.marked.len(), a.rows.len());
        press(&mut a, 'p');
        let Some(Overlay::Dialog(d)) = &a.overlay else {
            panic!("no dialog");
        };
        let running: Vec<String> = a
            .fleet
            .sessions
            .values()
            .filter(|t| t.view.state == Phase::Running)
            .map(|t| t.view.id.clone())
            .collect();
        assert_eq!(d.target_count(), running.len(), "only the running ones");
        // Listed in the table's order, as the proctor sees them.
        let listed: Vec<&str> = std::iter::once(d.session.as_str())
            .chain(d.others.iter().map(|(id, _)| id.as_str()))
            .collect();
        let table: Vec<&str> = a
            .rows
            .iter()
            .map(|r| r.id.as_str())
            .filter(|id| running.iter().any(|r| r == id))
            .collect();
        assert_eq!(listed, table);
        for c in "fire alarm".chars() {
            press(&mut a, c);
        }
        let effects = a.update(Action::Key(KeyEvent::new(
            KeyCode::Enter,
            KeyModifiers::NONE,
        )));
        let mut paused: Vec<String> = effects
            .iter()
            .map(|e| match e {
                Effect::Send(
                    Pending::Act { .. },
                    Request::Pause {
                        session,
                        reason: PauseReason::Proctor,
                        note,
                    },
                ) => {
                    assert_eq!(note.as_deref(), Some("fire alarm"));
                    session.clone()
                }
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        paused.sort();
        let mut running = running;
        running.sort();
        assert_eq!(paused, running);
        // `*` again unmarks all; Space marks one.
        press(&mut a, '*');
        assert!(a.marked.is_empty());
        press(&mut a, ' ');
        assert_eq!(a.marked.len(), 1);
    }

    #[test]
    fn a_not_started_session_is_begun_from_the_dashboard() {
        let mut a = app();
        a.selected = Some("l7z1qk".into());
        press(&mut a, 'b');
        let effects = a.update(Action::Key(KeyEvent::new(
            KeyCode::Enter,
            KeyModifiers::NONE,
        )));
        assert!(
            matches!(
                effects.as_slice(),
                [Effect::Send(Pending::Act { .. }, Request::Begin { session })] if session == "l7z1qk"
            ),
            "{effects:?}"
        );
        // A running one is refused before any dialog.
        a.selected = Some("a1k9qz".into());
        assert!(press(&mut a, 'b').is_empty());
        assert!(a.overlay.is_none());
    }

    #[test]
    fn a_new_alert_rings_once_and_a_budget_change_outside_the_dashboard_is_one() {
        let mut a = app();
        assert!(!a.bell, "what was there at the start is not news");
        // Someone at the CLI gives alice five more hours.
        let effects = a.update(Action::Push(Box::new(Push::SessionEvent {
            session: "a1k9qz".into(),
            event: crate::session::Event {
                seq: 90,
                at: sample::now(),
                active_ms: 7_000_000,
                origin: None,
                kind: crate::session::EventKind::Extended {
                    by_ms: 5 * 3_600_000,
                    reason: "asked nicely".into(),
                    by: "root (cli)".into(),
                },
            },
        })));
        assert!(effects.is_empty());
        a.settle();
        assert!(std::mem::take(&mut a.bell), "a new alert rings");
        let line = a
            .alert_list
            .iter()
            .find(|l| l.session == "a1k9qz")
            .expect("the alert");
        assert_eq!(line.alert.kind, AlertKind::BudgetChanged);
        assert_eq!(line.alert.text, "budget +5h by root (cli): asked nicely");
        // Not again for the same alert.
        a.recompute();
        assert!(!a.bell);
    }

    #[test]
    fn an_event_of_an_unknown_session_asks_for_it() {
        let mut a = app();
        let effects = a.update(Action::Push(Box::new(Push::SessionEvent {
            session: "new123".into(),
            event: sample::exec_event(0, 7200, "ls", ""),
        })));
        assert_eq!(
            effects,
            vec![Effect::Send(
                Pending::Show("new123".into()),
                Request::Show {
                    session: "new123".into()
                }
            )]
        );
    }

    #[test]
    fn missed_events_make_it_reread_like_a_resync() {
        let mut skipped = app();
        let effects = skipped.update(Action::Push(Box::new(Push::EventsSkipped { skipped: 12 })));
        assert!(!effects.is_empty());
        assert_eq!(effects, app().update(Action::Resync));
    }

    #[test]
    fn a_server_shutdown_is_waited_out_and_the_detail_view_read_again() {
        use crate::tui::runtime::ClientApp;
        let mut a = app();
        a.open_detail("a1k9qz");
        let effects = a.update(Action::Push(Box::new(Push::ServerShutdown {
            message: "stopping".into(),
        })));
        assert_eq!(effects, vec![Effect::Exit(Exit::ServerShutdown)]);
        // The loop asks the app: it stays, and waits.
        a.since_start_s = 30.0;
        assert_eq!(ClientApp::leaving(&mut a, Exit::ServerShutdown), None);
        assert_eq!(a.reconnect_at(), Some(31.0));
        assert!(a.reconnect.as_ref().is_some_and(|r| r.shutdown));
        // Nothing is sent meanwhile (R would re-read everything), and the
        // proctor is told.
        assert!(
            !a.handle(Action::Key(KeyEvent::new(
                KeyCode::Char('R'),
                KeyModifiers::NONE
            )))
            .is_empty()
        );
        let sent = ClientApp::update(
            &mut a,
            Action::Key(KeyEvent::new(KeyCode::Char('R'), KeyModifiers::NONE)),
        );
        assert!(!sent.iter().any(|e| matches!(e, Effect::Send(..))));
        a.reconnect_failed("refused".into());
        assert_eq!(a.reconnect_at(), Some(32.0));
        // Back: every session and the open detail view are read again.
        let effects = ClientApp::reconnected(&mut a);
        assert_eq!(a.reconnect, None);
        let requests: Vec<&Request> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::Send(_, r) => Some(r),
                _ => None,
            })
            .collect();
        assert!(matches!(requests[0], Request::Subscribe { session: None }));
        assert!(matches!(requests[1], Request::ListSessions));
        assert!(
            requests
                .iter()
                .any(|r| matches!(r, Request::ShellList { session } if session == "a1k9qz"))
        );
        assert_eq!(ClientApp::leaving(&mut a, Exit::Quit), Some(Exit::Quit));
    }

    #[test]
    fn actions_while_the_server_is_away_are_refused_out_loud() {
        use crate::tui::runtime::ClientApp;
        let mut a = app();
        a.lost_server(&Exit::Lost("broken pipe".into()));
        let effects = ClientApp::update(&mut a, Action::Resync);
        assert!(effects.is_empty(), "{effects:?}");
        assert!(a.notice.is_none(), "a resync is not the proctor's doing");
        a.open_detail("a1k9qz");
        let effects = ClientApp::update(&mut a, Action::Resync);
        assert!(effects.is_empty());
        assert!(
            a.notice
                .as_ref()
                .is_some_and(|n| n.error && n.text.contains("server is away"))
        );
    }

    #[test]
    fn leaving_the_detail_view_stops_the_mirrors() {
        let mut a = app();
        a.open_detail("a1k9qz");
        let infos = vec![ShellInfo {
            shell: 3,
            cols: 80,
            rows: 24,
            alive: true,
            has_driver: true,
            last_input_at: None,
        }];
        let effects = a.update(Action::Reply {
            pending: Pending::DetailShells("a1k9qz".into()),
            result: Ok(serde_json::to_value(infos).unwrap_or_default()),
        });
        assert!(matches!(
            &effects[..],
            [Effect::Send(
                Pending::Attach(_, 3),
                Request::ShellAttach { .. }
            )]
        ));
        let effects = a.update(Action::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
        assert_eq!(
            effects,
            vec![Effect::Send(
                Pending::Detach,
                Request::ShellDetach {
                    session: "a1k9qz".into(),
                    shell: 3
                }
            )]
        );
        assert_eq!(a.screen, Screen::Table);
    }

    #[test]
    fn actions_that_cannot_apply_say_why_instead_of_asking() {
        let mut a = app();
        a.selected = Some("g1u7ke".into());
        press(&mut a, 'p');
        assert!(a.overlay.is_none());
        assert!(
            a.visible_notice()
                .is_some_and(|n| n.error && n.text.contains("is not running"))
        );
        press(&mut a, 'r');
        assert!(matches!(&a.overlay, Some(Overlay::Dialog(d)) if d.session == "g1u7ke"));
    }

    #[test]
    fn acknowledged_alerts_leave_the_list() {
        let mut a = app();
        let before = a.alert_list.len();
        a.selected = Some("b7m2xd".into());
        press(&mut a, 'a');
        assert_eq!(a.alert_list.len(), before - 1);
        assert!(a.alert_list.iter().all(|l| l.session != "b7m2xd"));
    }
}
