//! The action dialogs: every proctor action asks for a reason (recorded in
//! the session's log under the proctor's name) before it is sent; ending a
//! session asks once more.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::environment::duration::parse_duration;
use crate::protocol::Request;
use crate::session::PauseReason;
use crate::tui::widgets::format::human_duration;

/// Longest reason we take (the server allows more; a reason is one line).
const MAX_TEXT: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// Start the clock of a session that has not started.
    Begin,
    Pause,
    Resume,
    Extend,
    Note,
    End,
    Score,
}

impl ActionKind {
    pub fn title(&self) -> &'static str {
        match self {
            ActionKind::Begin => "Start the clock",
            ActionKind::Pause => "Pause",
            ActionKind::Resume => "Resume",
            ActionKind::Extend => "Extend the budget",
            ActionKind::Note => "Proctor note",
            ActionKind::End => "End the session",
            ActionKind::Score => "Score now",
        }
    }

    /// What the action did, for the footer ("paused k7mq2x").
    pub fn done(&self) -> &'static str {
        match self {
            ActionKind::Begin => "started",
            ActionKind::Pause => "paused",
            ActionKind::Resume => "resumed",
            ActionKind::Extend => "extended",
            ActionKind::Note => "noted on",
            ActionKind::End => "ended",
            ActionKind::Score => "scored",
        }
    }

    /// Resume and score carry no reason in the protocol: theirs goes into a
    /// note after the action succeeds, and may be left empty.
    fn reason_optional(&self) -> bool {
        matches!(
            self,
            ActionKind::Begin | ActionKind::Resume | ActionKind::Score
        )
    }

    fn reason_label(&self) -> &'static str {
        match self {
            ActionKind::Note => "note",
            _ => "reason",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Duration,
    Reason,
}

/// What to send: the action, and a note to add once it succeeded.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    pub kind: ActionKind,
    pub session: String,
    pub request: Request,
    pub then_note: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Open,
    Cancelled,
    Submit(Submission),
    /// A bulk action: the same action on each marked session.
    SubmitAll(Vec<Submission>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Dialog {
    pub kind: ActionKind,
    /// Fixed when the dialog opens, so a re-sorted table cannot change the target.
    pub session: String,
    pub participant: String,
    /// A bulk action's other targets (session, participant), beside the first.
    pub others: Vec<(String, String)>,
    pub reason: String,
    /// The budget change (e.g. `30m`, `-15m`), for Extend.
    pub duration: String,
    /// The pre-filled `30m` is still untouched: typing replaces it.
    pub prefilled: bool,
    /// The session's budget and active time when the dialog opened (the
    /// preview of an extension's new total).
    pub budget: Option<(f64, f64)>,
    pub field: Field,
    /// End: the reason is in; waiting for `y`.
    pub confirming: bool,
    pub error: Option<String>,
}

impl Dialog {
    pub fn new(kind: ActionKind, session: &str, participant: &str) -> Dialog {
        Dialog {
            kind,
            session: session.to_string(),
            participant: participant.to_string(),
            others: Vec::new(),
            reason: String::new(),
            duration: if kind == ActionKind::Extend {
                "30m".into()
            } else {
                String::new()
            },
            prefilled: kind == ActionKind::Extend,
            budget: None,
            field: if kind == ActionKind::Extend {
                Field::Duration
            } else {
                Field::Reason
            },
            confirming: false,
            error: None,
        }
    }

    /// The same action on several sessions (the first is `session`).
    pub fn bulk(kind: ActionKind, targets: &[(String, String)]) -> Option<Dialog> {
        let ((session, participant), rest) = targets.split_first()?;
        let mut dialog = Dialog::new(kind, session, participant);
        dialog.others = rest.to_vec();
        Some(dialog)
    }

    /// How many sessions the action goes to.
    pub fn target_count(&self) -> usize {
        1 + self.others.len()
    }

    /// The session's budget and time used, for the extension's preview.
    pub fn with_budget(mut self, budget_s: f64, used_s: f64) -> Dialog {
        self.budget = Some((budget_s, used_s));
        self
    }

    /// What the extension makes of the budget: `+30m: 2h → 2h 30m`, or
    /// why it cannot be applied.
    pub fn preview(&self) -> Option<Result<String, String>> {
        if !self.has_duration() {
            return None;
        }
        let change = match self.extension_s() {
            Ok(change) => change,
            Err(e) => return Some(Err(e)),
        };
        let (budget_s, used_s) = self.budget?;
        let new_total = budget_s + change as f64;
        let change_text = format!(
            "{}{}",
            if change < 0 { "-" } else { "+" },
            human_duration(change.unsigned_abs() as f64)
        );
        if new_total < used_s {
            return Some(Err(format!(
                "{change_text} would leave less than the {} already used",
                human_duration(used_s)
            )));
        }
        Some(Ok(format!(
            "{change_text}: budget {} → {}",
            human_duration(budget_s),
            human_duration(new_total)
        )))
    }

    pub fn has_duration(&self) -> bool {
        self.kind == ActionKind::Extend
    }

    pub fn reason_label(&self) -> &'static str {
        self.kind.reason_label()
    }

    pub fn reason_optional(&self) -> bool {
        self.kind.reason_optional()
    }

    fn text_mut(&mut self) -> &mut String {
        match self.field {
            Field::Duration => &mut self.duration,
            Field::Reason => &mut self.reason,
        }
    }

    pub fn key(&mut self, key: KeyEvent) -> Outcome {
        if self.confirming {
            return match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => self.submission(),
                _ => {
                    self.confirming = false;
                    Outcome::Open
                }
            };
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => return Outcome::Cancelled,
            KeyCode::Char('c') if ctrl => return Outcome::Cancelled,
            KeyCode::Char('u') if ctrl => self.text_mut().clear(),
            // The pre-filled duration is a suggestion: the first key
            // replaces it rather than appending (`15m`, not `30m15m`).
            KeyCode::Char(_) | KeyCode::Backspace
                if self.prefilled && self.field == Field::Duration && !ctrl =>
            {
                self.prefilled = false;
                self.duration.clear();
                if let KeyCode::Char(c) = key.code {
                    self.duration.push(c);
                }
            }
            KeyCode::Tab | KeyCode::BackTab | KeyCode::Up | KeyCode::Down
                if self.has_duration() =>
            {
                self.prefilled = false;
                self.field = match self.field {
                    Field::Duration => Field::Reason,
                    Field::Reason => Field::Duration,
                };
            }
            KeyCode::Backspace => {
                self.text_mut().pop();
            }
            KeyCode::Enter => return self.enter(),
            KeyCode::Char(c) if !ctrl => {
                let text = self.text_mut();
                if text.chars().count() < MAX_TEXT {
                    text.push(c);
                }
            }
            _ => {}
        }
        self.error = None;
        Outcome::Open
    }

    /// A pasted reason (newlines become spaces: a reason is one line).
    pub fn paste(&mut self, text: &str) {
        let clean: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let field = self.text_mut();
        for c in clean.chars() {
            if field.chars().count() >= MAX_TEXT {
                break;
            }
            field.push(c);
        }
    }

    fn enter(&mut self) -> Outcome {
        self.prefilled = false;
        if self.has_duration() && self.field == Field::Duration {
            if let Some(Err(e)) = self.preview() {
                self.error = Some(e);
            } else {
                self.field = Field::Reason;
            }
            return Outcome::Open;
        }
        if let Err(e) = self.check() {
            self.error = Some(e);
            return Outcome::Open;
        }
        if self.kind == ActionKind::End {
            self.confirming = true;
            return Outcome::Open;
        }
        self.submission()
    }

    /// The change asked for: `30m` adds, `-15m` takes off.
    fn extension_s(&self) -> Result<i64, String> {
        let text = self.duration.trim();
        let (sign, magnitude) = match text.strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, text.strip_prefix('+').unwrap_or(text)),
        };
        let secs = parse_duration(magnitude)?.as_secs();
        if secs == 0 {
            return Err("a budget change must not be 0s".into());
        }
        Ok(sign * i64::try_from(secs).map_err(|e| e.to_string())?)
    }

    fn check(&self) -> Result<(), String> {
        if let Some(Err(e)) = self.preview() {
            return Err(e);
        }
        if self.reason.trim().is_empty() && !self.reason_optional() {
            return Err(format!("type a {} first", self.reason_label()));
        }
        Ok(())
    }

    fn submission(&mut self) -> Outcome {
        let first = match self.submission_for(self.session.clone()) {
            Ok(s) => s,
            Err(e) => {
                self.error = Some(e);
                self.confirming = false;
                return Outcome::Open;
            }
        };
        if self.others.is_empty() {
            return Outcome::Submit(first);
        }
        let mut all = vec![first];
        for (session, _) in self.others.clone() {
            match self.submission_for(session) {
                Ok(s) => all.push(s),
                Err(e) => {
                    self.error = Some(e);
                    return Outcome::Open;
                }
            }
        }
        Outcome::SubmitAll(all)
    }

    /// The request (and the note to add after it) for one target.
    fn submission_for(&self, session: String) -> Result<Submission, String> {
        let reason = self.reason.trim().to_string();
        let (request, then_note) = match self.kind {
            ActionKind::Begin => (
                Request::Begin {
                    session: session.clone(),
                },
                (!reason.is_empty()).then(|| format!("started the clock: {reason}")),
            ),
            ActionKind::Pause => (
                Request::Pause {
                    session: session.clone(),
                    reason: PauseReason::Proctor,
                    note: Some(reason),
                },
                None,
            ),
            ActionKind::Resume => (
                Request::Resume {
                    session: session.clone(),
                },
                (!reason.is_empty()).then(|| format!("resumed the session: {reason}")),
            ),
            ActionKind::Extend => (
                Request::Extend {
                    session: session.clone(),
                    by_s: self.extension_s()?,
                    reason,
                },
                None,
            ),
            ActionKind::Note => (
                Request::Note {
                    session: session.clone(),
                    text: reason,
                },
                None,
            ),
            // The reason travels with the end: the participant's summary
            // shows it.
            ActionKind::End => (
                Request::End {
                    session: session.clone(),
                    reason: None,
                    note: Some(reason),
                },
                None,
            ),
            ActionKind::Score => (
                Request::Score {
                    session: session.clone(),
                },
                (!reason.is_empty()).then(|| format!("took a score: {reason}")),
            ),
        };
        Ok(Submission {
            kind: self.kind,
            session,
            request,
            then_note,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn typed(d: &mut Dialog, text: &str) {
        for c in text.chars() {
            assert_eq!(d.key(key(KeyCode::Char(c))), Outcome::Open);
        }
    }

    #[test]
    fn pause_needs_a_reason_and_sends_it_as_the_note() {
        let mut d = Dialog::new(ActionKind::Pause, "k7", "alice");
        assert_eq!(d.key(key(KeyCode::Enter)), Outcome::Open);
        assert_eq!(d.error.as_deref(), Some("type a reason first"));
        typed(&mut d, "fire alarm");
        let Outcome::Submit(s) = d.key(key(KeyCode::Enter)) else {
            panic!("not submitted");
        };
        assert_eq!(
            s.request,
            Request::Pause {
                session: "k7".into(),
                reason: PauseReason::Proctor,
                note: Some("fire alarm".into())
            }
        );
        assert_eq!(s.then_note, None);
    }

    #[test]
    fn extend_reads_a_duration_then_a_reason() {
        let mut d = Dialog::new(ActionKind::Extend, "k7", "alice");
        typed(&mut d, "1h5");
        d.key(key(KeyCode::Enter));
        assert!(d.error.as_deref().is_some_and(|e| e.contains("1h5")));
        typed(&mut d, "m");
        d.key(key(KeyCode::Enter));
        assert_eq!(d.field, Field::Reason);
        typed(&mut d, "server outage");
        let Outcome::Submit(s) = d.key(key(KeyCode::Enter)) else {
            panic!("not submitted");
        };
        assert_eq!(
            s.request,
            Request::Extend {
                session: "k7".into(),
                by_s: 3900,
                reason: "server outage".into()
            }
        );
    }

    #[test]
    fn typing_replaces_the_suggested_extension_and_the_new_total_is_shown() {
        let open = || Dialog::new(ActionKind::Extend, "k7", "alice").with_budget(7200.0, 3000.0);
        let mut d = open();
        assert_eq!(d.preview(), Some(Ok("+30m: budget 2h → 2h 30m".into())));
        typed(&mut d, "15m");
        assert_eq!(d.duration, "15m", "not 30m15m");
        assert_eq!(d.preview(), Some(Ok("+15m: budget 2h → 2h 15m".into())));
        // A slip of the finger is visible before it is applied.
        let mut d = open();
        typed(&mut d, "315m");
        assert_eq!(d.preview(), Some(Ok("+5h 15m: budget 2h → 7h 15m".into())));
        // Taking time off, and never below the time used.
        let mut d = open();
        typed(&mut d, "-1h");
        assert_eq!(d.preview(), Some(Ok("-1h: budget 2h → 1h".into())));
        let mut d = open();
        typed(&mut d, "-1h30m");
        let Some(Err(e)) = d.preview() else {
            panic!("allowed below the time used");
        };
        assert!(e.contains("already used"), "{e}");
        d.key(key(KeyCode::Enter));
        assert_eq!(d.field, Field::Duration, "not accepted");
        assert!(d.error.is_some());
        // Backspace on the suggestion clears it; after Tab typing appends.
        let mut d = open();
        d.key(key(KeyCode::Backspace));
        assert_eq!(d.duration, "");
        let mut d = open();
        d.key(key(KeyCode::Tab));
        d.key(key(KeyCode::Tab));
        typed(&mut d, "5m");
        assert_eq!(d.duration, "30m5m");
    }

    #[test]
    fn end_asks_for_confirmation_and_notes_the_reason() {
        let mut d = Dialog::new(ActionKind::End, "k7", "alice");
        typed(&mut d, "cheating");
        assert_eq!(d.key(key(KeyCode::Enter)), Outcome::Open);
        assert!(d.confirming);
        // Any other key steps back instead of ending.
        assert_eq!(d.key(key(KeyCode::Char('n'))), Outcome::Open);
        assert!(!d.confirming);
        d.key(key(KeyCode::Enter));
        let Outcome::Submit(s) = d.key(key(KeyCode::Char('y'))) else {
            panic!("not submitted");
        };
        assert_eq!(
            s.request,
            Request::End {
                session: "k7".into(),
                reason: None,
                note: Some("cheating".into()),
            }
        );
        assert_eq!(s.then_note, None, "the reason travels with the end");
    }

    #[test]
    fn resume_and_score_may_go_without_a_reason() {
        let mut d = Dialog::new(ActionKind::Resume, "k7", "alice");
        let Outcome::Submit(s) = d.key(key(KeyCode::Enter)) else {
            panic!("not submitted");
        };
        assert_eq!(s.then_note, None);
        let mut d = Dialog::new(ActionKind::Score, "k7", "alice");
        d.paste("check\nprogress");
        let Outcome::Submit(s) = d.key(key(KeyCode::Enter)) else {
            panic!("not submitted");
        };
        assert_eq!(s.then_note.as_deref(), Some("took a score: check progress"));
        let mut d = Dialog::new(ActionKind::Note, "k7", "alice");
        assert_eq!(d.key(key(KeyCode::Esc)), Outcome::Cancelled);
    }
}
