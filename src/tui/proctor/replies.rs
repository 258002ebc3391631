//! Server replies and pushed events: they update the fleet and the detail
//! view, and sometimes ask for more (a session we did not know, a shell to
//! mirror, the note that records why an action was taken).

use serde::de::DeserializeOwned;

use super::app::{App, Effect, Exit, Pending, ReplyError, Screen};
use super::model::ShellExit;
use crate::protocol::{AttachMode, AttachReply, Push, Request, SessionView, ShellInfo, b64_decode};
use crate::session::{Event, EventKind};

impl App {
    pub fn reply(
        &mut self,
        pending: Pending,
        result: Result<serde_json::Value, ReplyError>,
    ) -> Vec<Effect> {
        self.dirty = true;
        let value = match result {
            Ok(v) => v,
            Err(e) => return self.reply_error(pending, e),
        };
        match pending {
            Pending::Subscribe | Pending::Detach => Vec::new(),
            Pending::List => match parse::<Vec<SessionView>>(value) {
                Ok(views) => self.listed(views),
                Err(e) => self.bad_reply("list_sessions", e),
            },
            Pending::Show(_) => {
                match parse::<SessionView>(value) {
                    Ok(view) => self.fleet.load_show(view, self.now),
                    Err(e) => return self.bad_reply("show", e),
                }
                self.stale = true;
                Vec::new()
            }
            Pending::ShellCheck(id) => {
                if let Ok(infos) = parse::<Vec<ShellInfo>>(value) {
                    self.exited_shells_found(&id, &infos);
                }
                Vec::new()
            }
            Pending::DetailShells(id) => match parse::<Vec<ShellInfo>>(value) {
                Ok(infos) => self.detail_shells(&id, &infos),
                Err(e) => self.bad_reply("shell_list", e),
            },
            Pending::Attach(id, _) => {
                if let Ok(reply) = parse::<AttachReply>(value)
                    && let Some(d) = self.detail.as_mut().filter(|d| d.session == id)
                {
                    let screen = b64_decode(&reply.screen).unwrap_or_default();
                    d.attached(&reply, &screen);
                }
                Vec::new()
            }
            Pending::Events(id) => {
                match parse::<Vec<Event>>(value) {
                    Ok(events) => self.events_loaded(&id, &events),
                    Err(e) => return self.bad_reply("events", e),
                }
                Vec::new()
            }
            Pending::Act {
                kind,
                session,
                then_note,
            } => {
                // Score replies with the entry; the rest with the session.
                if let Ok(view) = parse::<SessionView>(value) {
                    self.fleet.load_show(view, self.now);
                    self.stale = true;
                }
                let who = self.who(&session);
                self.notify(format!("{} session {session}{who}", kind.done()));
                match then_note {
                    Some(text) => vec![Effect::Send(
                        Pending::ReasonNote(session.clone()),
                        Request::Note { session, text },
                    )],
                    None => Vec::new(),
                }
            }
            Pending::ReasonNote(_) => Vec::new(),
        }
    }

    fn reply_error(&mut self, pending: Pending, e: ReplyError) -> Vec<Effect> {
        match pending {
            Pending::Act { kind, session, .. } => {
                let who = self.who(&session);
                self.notify_error(format!(
                    "{} failed for {session}{who}: {}",
                    kind.title(),
                    e.message
                ));
            }
            Pending::ReasonNote(session) => self.notify_error(format!(
                "could not record the reason on {session}: {}",
                e.message
            )),
            Pending::Show(id) if e.code == Some(crate::protocol::ErrorCode::NotFound) => {
                self.fleet.sessions.remove(&id);
                self.stale = true;
            }
            // A shell that went away between list and attach is no news.
            Pending::Attach(..) | Pending::Detach | Pending::ShellCheck(_) => {}
            Pending::Subscribe => self.notify_error(format!(
                "no live updates: {} (the dashboard needs the admin socket)",
                e.message
            )),
            other => self.notify_error(format!("{}: {}", describe(&other), e.message)),
        }
        Vec::new()
    }

    fn bad_reply(&mut self, what: &str, e: String) -> Vec<Effect> {
        self.notify_error(format!("unreadable {what} reply: {e}"));
        Vec::new()
    }

    fn who(&self, session: &str) -> String {
        self.fleet
            .get(session)
            .map(|t| format!(" ({})", t.view.participant))
            .unwrap_or_default()
    }

    /// A listing: new sessions (and ones whose score log we missed) are read
    /// whole; at start, every live session's shells are checked.
    fn listed(&mut self, views: Vec<SessionView>) -> Vec<Effect> {
        let first = !self.loaded;
        self.loaded = true;
        self.fleet.load_list(views, self.now);
        self.stale = true;
        let mut effects = Vec::new();
        for (id, t) in &self.fleet.sessions {
            if !t.scores_loaded || t.scores.len() < t.view.score_count {
                effects.push(Effect::Send(
                    Pending::Show(id.clone()),
                    Request::Show {
                        session: id.clone(),
                    },
                ));
            }
            if first && !t.ended() && t.view.started_at.is_some() {
                effects.push(Effect::Send(
                    Pending::ShellCheck(id.clone()),
                    Request::ShellList {
                        session: id.clone(),
                    },
                ));
            }
        }
        effects
    }

    /// Shells found dead when the dashboard started: their exit time is
    /// unknown, so the alert carries the time we saw it.
    fn exited_shells_found(&mut self, id: &str, infos: &[ShellInfo]) {
        let now = self.now;
        if let Some(t) = self.fleet.sessions.get_mut(id) {
            for info in infos.iter().filter(|i| !i.alive) {
                if !t.shell_exits.iter().any(|x| x.shell == info.shell) {
                    t.shell_exits.push(ShellExit {
                        shell: info.shell,
                        code: None,
                        signal: None,
                        at: now,
                    });
                }
            }
            self.stale = true;
        }
    }

    fn detail_shells(&mut self, id: &str, infos: &[ShellInfo]) -> Vec<Effect> {
        let Some(d) = self.detail.as_mut().filter(|d| d.session == id) else {
            return Vec::new();
        };
        d.load_shells(infos)
            .into_iter()
            .map(|shell| attach(id, shell))
            .collect()
    }

    /// The detail view's event log: exec history, and exact shell-exit times.
    fn events_loaded(&mut self, id: &str, events: &[Event]) {
        if let Some(d) = self.detail.as_mut().filter(|d| d.session == id) {
            d.load_events(events);
        }
        if let Some(t) = self.fleet.sessions.get_mut(id) {
            let mut exits = Vec::new();
            for e in events {
                match &e.kind {
                    EventKind::Ended { .. } => break,
                    EventKind::ShellExited {
                        shell,
                        code,
                        signal,
                    } => exits.push(ShellExit {
                        shell: *shell,
                        code: *code,
                        signal: *signal,
                        at: e.at,
                    }),
                    _ => {}
                }
            }
            t.shell_exits = exits;
            self.stale = true;
        }
    }

    pub fn push(&mut self, push: Push) -> Vec<Effect> {
        match push {
            Push::SessionEvent { session, event } => self.session_event(session, event),
            // The dashboard only watches: it sends no input.
            Push::InputRefused { .. } => Vec::new(),
            Push::ShellOutput {
                session,
                shell,
                data,
            } => {
                if let Some(d) = self.detail.as_mut().filter(|d| d.session == session)
                    && let Ok(bytes) = b64_decode(&data)
                {
                    d.output(shell, &bytes);
                    self.dirty = self.screen == Screen::Detail;
                }
                Vec::new()
            }
            Push::ShellExited {
                session,
                shell,
                code,
                signal,
            } => {
                if let Some(d) = self.detail.as_mut().filter(|d| d.session == session) {
                    let how = match (code, signal) {
                        (_, Some(s)) => format!("shell {shell} was killed by signal {s}"),
                        (Some(c), None) => format!("shell {shell} exited with code {c}"),
                        (None, None) => format!("shell {shell} exited"),
                    };
                    d.exited(shell, how);
                    self.dirty = true;
                }
                Vec::new()
            }
            Push::ScoringStarted { session, .. } => {
                if let Some(t) = self.fleet.sessions.get_mut(&session) {
                    t.view.scoring_since = Some(self.now);
                    self.stale = true;
                }
                Vec::new()
            }
            Push::ShellDetached { .. } => Vec::new(),
            // Events were dropped on the way: re-read every session now.
            Push::EventsSkipped { .. } => self.resync(),
            Push::ServerShutdown { .. } => vec![Effect::Exit(Exit::ServerShutdown)],
        }
    }

    fn session_event(&mut self, session: String, event: Event) -> Vec<Effect> {
        let mut effects = Vec::new();
        if !self.fleet.apply(&session, &event) {
            // A session created after our listing.
            effects.push(Effect::Send(
                Pending::Show(session.clone()),
                Request::Show {
                    session: session.clone(),
                },
            ));
        }
        if let Some(d) = self.detail.as_mut().filter(|d| d.session == session) {
            d.push_event(&event);
            if let EventKind::ShellOpened { shell } = event.kind
                && d.shell_opened(shell)
            {
                effects.push(attach(&session, shell));
            }
        }
        self.stale = true;
        effects
    }
}

fn attach(session: &str, shell: u32) -> Effect {
    Effect::Send(
        Pending::Attach(session.to_string(), shell),
        Request::ShellAttach {
            session: session.to_string(),
            shell,
            mode: AttachMode::Watch,
        },
    )
}

fn parse<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| e.to_string())
}

fn describe(pending: &Pending) -> &'static str {
    match pending {
        Pending::List => "listing the sessions failed",
        Pending::Show(_) => "reading a session failed",
        Pending::DetailShells(_) => "listing the shells failed",
        Pending::Events(_) => "reading the event log failed",
        _ => "request failed",
    }
}
