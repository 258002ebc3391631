//! What the player can be asked to do, and which key asks for what
//! (asciinema's keys, and more).

use std::time::Duration;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Real time passed.
    Tick(Duration),
    TogglePlay,
    Faster,
    Slower,
    /// Cycles the idle-time limit.
    CycleIdle,
    /// ± steps of 5 s of playback time.
    SeekBy(i64),
    /// ± tenths of the recording.
    SeekFraction(i64),
    /// To 0 – 90 %.
    JumpPercent(u8),
    PrevMarker,
    NextMarker,
    StepBack,
    StepForward,
    BestScore,
    NextTab,
    PrevTab,
    ToggleHelp,
    Quit,
    StartGoto,
    PromptChar(char),
    PromptBackspace,
    PromptSubmit,
    PromptCancel,
}

/// The key bindings, for the help screen: (keys, what they do).
pub const BINDINGS: [(&str, &str); 17] = [
    ("space", "play / pause"),
    ("+ / -", "speed up / slow down (0.25× – 64×)"),
    ("← / →", "back / forward 5 s"),
    ("shift ← / →", "back / forward 10 %"),
    ("0 – 9", "jump to 0 % – 90 %"),
    ("[ / ]", "previous / next marker"),
    (", / .", "step one event back / forward"),
    ("g", "go to a time (1:02:03, 90, 1h30m, 40%)"),
    ("b", "jump to the best score"),
    ("i", "cycle the idle-time limit"),
    ("tab / shift tab", "next / previous shell"),
    ("home / end", "start / end"),
    ("?", "this help"),
    ("q / esc", "quit"),
    ("", ""),
    ("markers", "◆ score  • note  ‖ pause  ▸ resume  + extension"),
    ("", "! warning  ▶ start  ■ end  | other"),
];

/// The action for a key press; `prompting` while the `g` prompt is open.
pub fn action_for_key(key: KeyEvent, prompting: bool, help: bool) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    if prompting {
        return match key.code {
            KeyCode::Enter => Some(Action::PromptSubmit),
            KeyCode::Esc => Some(Action::PromptCancel),
            KeyCode::Backspace => Some(Action::PromptBackspace),
            KeyCode::Char(c) => Some(Action::PromptChar(c)),
            _ => None,
        };
    }
    if help && !matches!(key.code, KeyCode::Char('q')) {
        // Any key closes the help screen.
        return Some(Action::ToggleHelp);
    }
    let shift = key.modifiers.contains(KeyModifiers::SHIFT);
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Some(Action::Quit);
    }
    Some(match key.code {
        KeyCode::Char(' ') => Action::TogglePlay,
        KeyCode::Char('+') | KeyCode::Char('=') => Action::Faster,
        KeyCode::Char('-') | KeyCode::Char('_') => Action::Slower,
        KeyCode::Left if shift => Action::SeekFraction(-1),
        KeyCode::Right if shift => Action::SeekFraction(1),
        KeyCode::Left => Action::SeekBy(-1),
        KeyCode::Right => Action::SeekBy(1),
        KeyCode::Char(c @ '0'..='9') => Action::JumpPercent(c as u8 - b'0'),
        KeyCode::Char('[') => Action::PrevMarker,
        KeyCode::Char(']') => Action::NextMarker,
        KeyCode::Char(',') => Action::StepBack,
        KeyCode::Char('.') => Action::StepForward,
        KeyCode::Char('g') => Action::StartGoto,
        KeyCode::Char('b') => Action::BestScore,
        KeyCode::Char('i') => Action::CycleIdle,
        KeyCode::Tab => Action::NextTab,
        KeyCode::BackTab => Action::PrevTab,
        KeyCode::Home => Action::JumpPercent(0),
        KeyCode::End => Action::SeekFraction(10),
        KeyCode::Char('?') => Action::ToggleHelp,
        KeyCode::Char('q') | KeyCode::Esc => Action::Quit,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn keys_map_like_asciinema_and_the_prompt_takes_text() {
        let none = KeyModifiers::NONE;
        assert_eq!(
            action_for_key(key(KeyCode::Char(' '), none), false, false),
            Some(Action::TogglePlay)
        );
        assert_eq!(
            action_for_key(key(KeyCode::Right, KeyModifiers::SHIFT), false, false),
            Some(Action::SeekFraction(1))
        );
        assert_eq!(
            action_for_key(key(KeyCode::Char('7'), none), false, false),
            Some(Action::JumpPercent(7))
        );
        assert_eq!(
            action_for_key(key(KeyCode::Char('q'), none), true, false),
            Some(Action::PromptChar('q'))
        );
        assert_eq!(
            action_for_key(key(KeyCode::Char('x'), none), false, true),
            Some(Action::ToggleHelp)
        );
    }
}
