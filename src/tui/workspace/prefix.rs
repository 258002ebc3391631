//! The prefix key state machine: every key goes to the shell except the
//! prefix, which arms the next key as a workspace command (tmux-style).

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::config::PrefixKey;

/// A workspace command, chosen by the key after the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Score,
    PauseResume,
    Note,
    Instructions,
    NewTab,
    NextTab,
    PrevTab,
    GoToTab(usize),
    CloseTab,
    RenameTab,
    ToggleSidePanel,
    Scrollback,
    /// Take the shell back after another client took it over.
    Reattach,
    Submit,
    Detach,
    Help,
}

/// One line of the help: the key after the prefix, and what it does.
pub struct Binding {
    pub keys: &'static str,
    pub command: Command,
    pub what: &'static str,
}

/// Every binding, in help order (also what `command_for` implements).
pub const BINDINGS: &[Binding] = &[
    Binding {
        keys: "s",
        command: Command::Score,
        what: "score the workspace now (the shell stays usable)",
    },
    Binding {
        keys: "p",
        command: Command::PauseResume,
        what: "pause the clock (break / technical issue), or resume",
    },
    Binding {
        keys: "n",
        command: Command::Note,
        what: "write a note into the session log",
    },
    Binding {
        keys: "i",
        command: Command::Instructions,
        what: "read the instructions",
    },
    Binding {
        keys: "c",
        command: Command::NewTab,
        what: "new shell tab",
    },
    Binding {
        keys: ". → ]",
        command: Command::NextTab,
        what: "next tab",
    },
    Binding {
        keys: ", ←",
        command: Command::PrevTab,
        what: "previous tab",
    },
    Binding {
        keys: "1-9",
        command: Command::GoToTab(0),
        what: "go to tab N",
    },
    Binding {
        keys: "t",
        command: Command::RenameTab,
        what: "name this tab (empty: the program's title again)",
    },
    Binding {
        keys: "x",
        command: Command::CloseTab,
        what: "close this tab (asks first)",
    },
    Binding {
        keys: "b",
        command: Command::ToggleSidePanel,
        what: "show / hide the score panel",
    },
    Binding {
        keys: "[ PgUp",
        command: Command::Scrollback,
        what: "scrollback mode (PgUp/PgDn/↑/↓/g/G scroll, Esc or q leaves)",
    },
    Binding {
        keys: "r",
        command: Command::Reattach,
        what: "take this tab's shell back (after another client took it)",
    },
    Binding {
        keys: "S",
        command: Command::Submit,
        what: "submit: final score and end the session (asks first)",
    },
    Binding {
        keys: "d",
        command: Command::Detach,
        what: "detach (the session and its clock go on)",
    },
    Binding {
        keys: "?",
        command: Command::Help,
        what: "this help",
    },
];

/// The command a key after the prefix stands for.
pub fn command_for(key: &KeyEvent) -> Option<Command> {
    if key
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
    {
        return None;
    }
    Some(match key.code {
        KeyCode::Char('s') => Command::Score,
        KeyCode::Char('p') => Command::PauseResume,
        KeyCode::Char('n') => Command::Note,
        KeyCode::Char('i') => Command::Instructions,
        KeyCode::Char('c') => Command::NewTab,
        KeyCode::Char('.') | KeyCode::Char(']') | KeyCode::Right => Command::NextTab,
        KeyCode::Char(',') | KeyCode::Left => Command::PrevTab,
        KeyCode::Char(d @ '1'..='9') => Command::GoToTab(usize::from(d as u8 - b'1')),
        KeyCode::Char('x') => Command::CloseTab,
        KeyCode::Char('t') => Command::RenameTab,
        KeyCode::Char('b') => Command::ToggleSidePanel,
        KeyCode::Char('[') | KeyCode::PageUp => Command::Scrollback,
        KeyCode::Char('r') => Command::Reattach,
        KeyCode::Char('S') => Command::Submit,
        KeyCode::Char('d') => Command::Detach,
        KeyCode::Char('?') => Command::Help,
        _ => return None,
    })
}

/// What to do with one key press.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Not ours: send it to the shell.
    Forward(KeyEvent),
    /// The prefix was pressed; the next key is a command.
    Armed,
    /// The prefix twice: send the prefix byte itself to the shell.
    SendPrefix(u8),
    Command(Command),
    /// Esc after the prefix.
    Cancelled,
    /// A key after the prefix that means nothing.
    Unknown(KeyEvent),
}

#[derive(Debug, Clone)]
pub struct PrefixMachine {
    pub key: PrefixKey,
    armed: bool,
}

impl PrefixMachine {
    pub fn new(key: PrefixKey) -> PrefixMachine {
        PrefixMachine { key, armed: false }
    }

    pub fn armed(&self) -> bool {
        self.armed
    }

    pub fn disarm(&mut self) {
        self.armed = false;
    }

    pub fn feed(&mut self, key: KeyEvent) -> Outcome {
        if !self.armed {
            if self.key.matches(&key) {
                self.armed = true;
                return Outcome::Armed;
            }
            return Outcome::Forward(key);
        }
        self.armed = false;
        if self.key.matches(&key) {
            return Outcome::SendPrefix(self.key.byte);
        }
        if key.code == KeyCode::Esc {
            return Outcome::Cancelled;
        }
        // Modifier keys alone (kitty protocol) do not count as the command key.
        if matches!(key.code, KeyCode::Modifier(_)) {
            self.armed = true;
            return Outcome::Armed;
        }
        match command_for(&key) {
            Some(c) => Outcome::Command(c),
            None => Outcome::Unknown(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }
    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    #[test]
    fn keys_pass_through_until_the_prefix() {
        let mut m = PrefixMachine::new(PrefixKey::DEFAULT);
        assert_eq!(m.feed(k('s')), Outcome::Forward(k('s')));
        assert_eq!(m.feed(ctrl('c')), Outcome::Forward(ctrl('c')));
        assert!(!m.armed());
        assert_eq!(m.feed(ctrl('g')), Outcome::Armed);
        assert!(m.armed());
        assert_eq!(m.feed(k('s')), Outcome::Command(Command::Score));
        assert!(!m.armed());
        assert_eq!(m.feed(k('s')), Outcome::Forward(k('s')));
    }

    #[test]
    fn prefix_twice_sends_the_prefix_itself() {
        let mut m = PrefixMachine::new(PrefixKey::DEFAULT);
        m.feed(ctrl('g'));
        assert_eq!(m.feed(ctrl('g')), Outcome::SendPrefix(0x07));
        assert!(!m.armed());
    }

    #[test]
    fn esc_cancels_and_unknown_keys_are_reported() {
        let mut m = PrefixMachine::new(PrefixKey::DEFAULT);
        m.feed(ctrl('g'));
        assert_eq!(
            m.feed(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)),
            Outcome::Cancelled
        );
        m.feed(ctrl('g'));
        assert_eq!(m.feed(k('z')), Outcome::Unknown(k('z')));
        assert_eq!(m.feed(k('z')), Outcome::Forward(k('z')));
    }

    #[test]
    fn every_command_key() {
        let cases = [
            (k('s'), Command::Score),
            (k('p'), Command::PauseResume),
            (k('n'), Command::Note),
            (k('i'), Command::Instructions),
            (k('c'), Command::NewTab),
            (k('.'), Command::NextTab),
            (k(']'), Command::NextTab),
            (k(','), Command::PrevTab),
            (k('3'), Command::GoToTab(2)),
            (k('x'), Command::CloseTab),
            (k('b'), Command::ToggleSidePanel),
            (k('['), Command::Scrollback),
            (
                KeyEvent::new(KeyCode::Char('S'), KeyModifiers::SHIFT),
                Command::Submit,
            ),
            (k('d'), Command::Detach),
            (k('r'), Command::Reattach),
            (k('?'), Command::Help),
            (
                KeyEvent::new(KeyCode::Right, KeyModifiers::NONE),
                Command::NextTab,
            ),
            (
                KeyEvent::new(KeyCode::PageUp, KeyModifiers::NONE),
                Command::Scrollback,
            ),
        ];
        for (key, want) in cases {
            let mut m = PrefixMachine::new(PrefixKey::DEFAULT);
            m.feed(ctrl('g'));
            assert_eq!(m.feed(key), Outcome::Command(want), "{key:?}");
        }
    }

    #[test]
    fn another_prefix_key_works_the_same() {
        let mut m = PrefixMachine::new(PrefixKey::parse("C-b").unwrap());
        assert_eq!(m.feed(ctrl('g')), Outcome::Forward(ctrl('g')));
        assert_eq!(m.feed(ctrl('b')), Outcome::Armed);
        assert_eq!(m.feed(ctrl('b')), Outcome::SendPrefix(0x02));
    }
}
