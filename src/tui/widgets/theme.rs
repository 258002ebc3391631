//! Colours of the workspace chrome. With NO_COLOR set, everything is drawn
//! with plain attributes (bold, reverse, dim) instead. (The shell's own
//! colours are the programs' business.)

use crate::session::Phase;
use ratatui::style::{Color, Modifier, Style};

/// How urgent the remaining time is (colour steps at 1 h, 15 min and 5 min).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Urgency {
    Calm,
    Hour,
    Quarter,
    Final,
}

impl Urgency {
    pub fn of(remaining_s: f64) -> Urgency {
        if remaining_s <= 5.0 * 60.0 {
            Urgency::Final
        } else if remaining_s <= 15.0 * 60.0 {
            Urgency::Quarter
        } else if remaining_s <= 3600.0 {
            Urgency::Hour
        } else {
            Urgency::Calm
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour unless NO_COLOR is set to anything non-empty (no-color.org).
    pub fn from_env() -> Theme {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Theme { color: !no_color }
    }

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    pub fn title(&self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    pub fn dim(&self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default().add_modifier(Modifier::DIM)
        }
    }

    pub fn key(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }

    pub fn good(&self) -> Style {
        self.fg(Color::Green)
    }

    pub fn bad(&self) -> Style {
        self.fg(Color::Red)
    }

    pub fn border(&self) -> Style {
        self.fg(Color::DarkGray)
    }

    pub fn focus_border(&self) -> Style {
        self.fg(Color::Cyan)
    }

    /// A scrollback search's matching line.
    pub fn search_match(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    /// The state badge: RUNNING / PAUSED / ENDED.
    pub fn state(&self, state: Phase) -> Style {
        let base = Style::default().add_modifier(Modifier::BOLD);
        if !self.color {
            return match state {
                Phase::Running => base,
                _ => base.add_modifier(Modifier::REVERSED),
            };
        }
        match state {
            Phase::Running => base.fg(Color::Black).bg(Color::Green),
            Phase::Paused => base.fg(Color::Black).bg(Color::Yellow),
            Phase::Ended => base.fg(Color::White).bg(Color::Red),
            Phase::Created | Phase::Queued => base.fg(Color::Black).bg(Color::Gray),
        }
    }

    /// The countdown and its gauge, by urgency.
    pub fn countdown(&self, urgency: Urgency) -> Style {
        if !self.color {
            return match urgency {
                Urgency::Calm | Urgency::Hour => Style::default(),
                Urgency::Quarter => Style::default().add_modifier(Modifier::BOLD),
                Urgency::Final => {
                    Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED)
                }
            };
        }
        match urgency {
            Urgency::Calm => Style::default().fg(Color::Green),
            Urgency::Hour => Style::default().fg(Color::Yellow),
            Urgency::Quarter => Style::default()
                .fg(Color::LightRed)
                .add_modifier(Modifier::BOLD),
            Urgency::Final => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        }
    }

    /// A warning banner (time running out, errors).
    pub fn banner(&self) -> Style {
        if self.color {
            Style::default()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        }
    }

    pub fn prefix_badge(&self) -> Style {
        if self.color {
            Style::default()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::REVERSED)
        }
    }

    pub fn chart_line(&self) -> Style {
        self.fg(Color::Cyan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urgency_steps() {
        assert_eq!(Urgency::of(7200.0), Urgency::Calm);
        assert_eq!(Urgency::of(3600.0), Urgency::Hour);
        assert_eq!(Urgency::of(900.0), Urgency::Quarter);
        assert_eq!(Urgency::of(299.0), Urgency::Final);
        assert_eq!(Urgency::of(0.0), Urgency::Final);
    }
}
