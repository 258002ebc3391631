//! The header: what session this is, its state, and a large countdown with
//! a gauge of the budget left.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{LineGauge, Paragraph};

use crate::session::Phase;
use crate::session::ScorePhase;
use crate::tui::widgets::format;
use crate::tui::workspace::app::App;

/// A three-row digit font (figlet "future").
const DIGITS: [[&str; 3]; 10] = [
    ["┏━┓", "┃ ┃", "┗━┛"],
    [" ┓ ", " ┃ ", "╺┻╸"],
    ["┏━┓", "┏━┛", "┗━╸"],
    ["┏━┓", "╺━┫", "┗━┛"],
    ["╻ ╻", "┗━┫", "  ╹"],
    ["┏━╸", "┗━┓", "╺━┛"],
    ["┏━┓", "┣━┓", "┗━┛"],
    ["╺━┓", "  ┃", "  ╹"],
    ["┏━┓", "┣━┫", "┗━┛"],
    ["┏━┓", "┗━┫", "╺━┛"],
];
const COLON: [&str; 3] = [" ", "╏", " "];

/// `text` (digits and colons) in the big font, as three lines.
pub fn big_text(text: &str) -> [String; 3] {
    let mut rows = [String::new(), String::new(), String::new()];
    for c in text.chars() {
        let glyph: [&str; 3] = match c.to_digit(10) {
            Some(d) => DIGITS[d as usize],
            None => COLON,
        };
        for (row, part) in rows.iter_mut().zip(glyph) {
            row.push_str(part);
            row.push(' ');
        }
    }
    rows
}

/// The state badge text: RUNNING, PAUSED (break), ENDED (submitted), NOT STARTED.
pub fn state_label(app: &App) -> String {
    let Some(view) = &app.view else {
        return "CONNECTING".into();
    };
    match view.state {
        Phase::Queued => "QUEUED".into(),
        Phase::Created => "NOT STARTED".into(),
        Phase::Running => "RUNNING".into(),
        Phase::Paused => match &view.pause_reason {
            Some(r) => format!("PAUSED ({})", r.label()),
            None => "PAUSED".into(),
        },
        Phase::Ended => match &view.end_reason {
            Some(r) => format!("ENDED ({})", r.label()),
            None => "ENDED".into(),
        },
    }
}

pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let Some(view) = &app.view else {
        frame.render_widget(Paragraph::new("rebench — connecting…"), area);
        return;
    };
    let [top, gauge_row] =
        Layout::vertical([Constraint::Length(3), Constraint::Length(1)]).areas(area);
    let remaining = app.remaining_s();
    let urgency = app.urgency();
    let countdown_style = theme.countdown(urgency);
    let big = big_text(&format::clock_hms(remaining));
    let big_width = big[0].chars().count() as u16;
    let info_width = top.width.saturating_sub(big_width + 1);

    let profile = view
        .profile
        .as_deref()
        .map(|p| format!("/{p}"))
        .unwrap_or_default();
    let mut state_line = vec![Span::styled(
        format!(" {} ", state_label(app)),
        theme.state(view.state),
    )];
    if let Some(since) = app.scoring_since_s {
        state_line.push(Span::raw("  "));
        state_line.push(Span::styled(
            format!(
                "scoring… {}{}",
                format::clock(app.now_s - since),
                exclusive_note(view)
            ),
            theme.key(),
        ));
    }
    if let Some(since) = app.submitting_since_s {
        state_line.push(Span::raw("  "));
        state_line.push(Span::styled(
            format!("submitting… {}", format::clock(app.now_s - since)),
            theme.key(),
        ));
    }
    // No side panel on screen: the scores go on the state line.
    let panel_shown = crate::tui::workspace::layout::workspace(app.area, app.side_panel)
        .side
        .is_some();
    if !panel_shown && app.screen == crate::tui::workspace::app::Screen::Workspace {
        state_line.push(Span::raw("  "));
        state_line.extend(compact_scores(app, view));
    }
    let info = vec![
        Line::from(vec![
            Span::styled(view.title.clone(), theme.title()),
            Span::styled(format!("  {}{profile}", view.environment), theme.dim()),
        ]),
        Line::from(vec![
            Span::raw("participant "),
            Span::styled(
                view.participant.clone(),
                Style::default().add_modifier(Modifier::BOLD),
            ),
            Span::styled("  ·  session ", theme.dim()),
            Span::raw(view.id.clone()),
        ]),
        Line::from(state_line),
    ];
    let fits_big = info_width >= 40;
    if fits_big {
        let [info_area, clock_area] =
            Layout::horizontal([Constraint::Min(1), Constraint::Length(big_width)]).areas(top);
        frame.render_widget(Paragraph::new(info), info_area);
        let lines: Vec<Line> = big
            .iter()
            .map(|r| Line::styled(r.clone(), countdown_style))
            .collect();
        frame.render_widget(Paragraph::new(lines), clock_area);
    } else {
        // Narrow: the countdown goes on the first line, right-aligned.
        let small = format::clock_hms(remaining);
        let [info_area, clock_area] = Layout::horizontal([
            Constraint::Min(1),
            Constraint::Length(small.len() as u16 + 1),
        ])
        .areas(top);
        frame.render_widget(Paragraph::new(info), info_area);
        frame.render_widget(
            Paragraph::new(Line::styled(
                small,
                countdown_style.add_modifier(Modifier::BOLD),
            ))
            .right_aligned(),
            clock_area,
        );
    }

    let budget = view.budget_s.max(1.0);
    let ratio = (remaining / budget).clamp(0.0, 1.0);
    let label = format!(
        "left {} of {}  ·  used {} ",
        format::clock(remaining),
        format::human_duration(view.budget_s),
        format::clock(app.active_s()),
    );
    let gauge = LineGauge::default()
        .ratio(ratio)
        .label(label)
        .filled_style(countdown_style)
        .unfilled_style(theme.dim())
        .filled_symbol("━")
        .unfilled_symbol("─");
    frame.render_widget(gauge, gauge_row);
}

/// `best 0.768 · last 0.713 · 4 runs` (or that scores are hidden).
fn compact_scores<'a>(app: &App, view: &crate::protocol::SessionView) -> Vec<Span<'a>> {
    let theme = &app.theme;
    let scores = view.scores.as_deref().unwrap_or(&[]);
    let runs = scores
        .iter()
        .filter(|s| s.phase != ScorePhase::Starting)
        .count();
    let runs_text = match runs {
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    if !view.visible {
        return vec![Span::styled(
            format!("scores hidden · {runs_text}"),
            theme.dim(),
        )];
    }
    let best = view
        .final_score
        .map(|f| format::normalized(f.normalized))
        .unwrap_or_else(|| "—".into());
    let last = scores
        .iter()
        .rev()
        .find(|s| s.phase != ScorePhase::Starting)
        .map(|s| match (s.valid, s.normalized) {
            (Some(true), Some(n)) => format::normalized(n),
            _ => "invalid".into(),
        })
        .unwrap_or_else(|| "—".into());
    // The score that counts, named by the environment's rule.
    if view.aggregate == "last" {
        return vec![
            Span::styled("latest ", theme.dim()),
            Span::styled(best, theme.good()),
            Span::styled(format!(" · {runs_text}"), theme.dim()),
        ];
    }
    vec![
        Span::styled("best ", theme.dim()),
        Span::styled(best, theme.good()),
        Span::styled(format!(" · last {last} · {runs_text}"), theme.dim()),
    ]
}

/// Said beside "scoring…" when the session's processes wait for the score
/// (`[scoring] exclusive`): why a shell stopped answering for a moment.
pub fn exclusive_note(view: &crate::protocol::SessionView) -> &'static str {
    if view.exclusive_scoring {
        " · your processes wait while it is timed"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_digits_line_up() {
        let rows = big_text("7:59");
        let widths: Vec<usize> = rows.iter().map(|r| r.chars().count()).collect();
        assert_eq!(widths, vec![14, 14, 14]);
        assert!(rows[0].starts_with("╺━┓"));
    }
}
