//! The whole-screen pages: before the clock starts, and after the session ends.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Padding, Paragraph, Wrap};

use crate::protocol::SessionView;
use crate::session::PauseReason;
use crate::session::ScorePhase;
use crate::tui::widgets::format;
use crate::tui::widgets::theme::Theme;
use crate::tui::workspace::app::App;

fn field<'a>(theme: &Theme, name: &'a str, value: String) -> Line<'a> {
    Line::from(vec![
        Span::styled(format!("{name:<16}"), theme.dim()),
        Span::raw(value),
    ])
}

fn page<'a>(theme: &Theme, title: String) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.focus_border())
        .title(Span::styled(title, theme.title()))
        .padding(Padding::new(2, 2, 1, 0))
}

pub fn draw_start(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let Some(view) = &app.view else {
        return;
    };
    let p = app.prefix.key.label();
    let starting = view
        .scores
        .as_deref()
        .and_then(|s| s.iter().find(|s| s.phase == ScorePhase::Starting));
    let starting_text = match starting {
        Some(s) if s.hidden => "recorded (hidden in this environment)".to_string(),
        Some(s) => crate::tui::widgets::score::score_text(s, &view.unit),
        None if view.state == crate::session::Phase::Queued => {
            "taken once the hardware is yours".to_string()
        }
        None => "not taken".to_string(),
    };
    let bullet = |t: String| Line::raw(format!("  • {t}"));
    let mut lines = vec![
        Line::styled(
            view.title.clone(),
            theme.title().add_modifier(Modifier::BOLD),
        ),
        Line::styled(
            format!(
                "environment {}{}  ·  session {}  ·  participant {}",
                view.environment,
                view.profile
                    .as_deref()
                    .map(|p| format!(" (profile {p})"))
                    .unwrap_or_default(),
                view.id,
                view.participant
            ),
            theme.dim(),
        ),
    ];
    if !view.summary.is_empty() {
        lines.push(Line::raw(""));
        lines.push(Line::raw(view.summary.clone()));
    }
    lines.extend([
        Line::raw(""),
        field(
            theme,
            "Budget",
            format!(
                "{} of active time (pauses do not count)",
                format::human_duration(view.budget_s)
            ),
        ),
        field(theme, "Metric", format!("{} ({})", view.metric, view.unit)),
        field(theme, "Starting score", starting_text),
        field(
            theme,
            "Scores",
            if view.visible {
                format!(
                    "shown to you; the session counts the {} valid score",
                    view.aggregate
                )
            } else {
                "hidden: every run is recorded, but no values are shown".to_string()
            },
        ),
    ]);
    if let Some(grant) = &view.grant {
        lines.push(field(theme, "Hardware", grant.describe()));
    }
    let queued = view.state == crate::session::Phase::Queued;
    if queued {
        let why = view.waiting_for.as_deref().unwrap_or("its hardware");
        let place = view
            .queue_position
            .map(|n| format!(": {} in line", crate::hardware::queue::ordinal(n)))
            .unwrap_or_default();
        lines.push(Line::raw(""));
        lines.push(Line::styled(
            format!("⏳ waiting for {why}{place}"),
            theme.title().add_modifier(Modifier::BOLD),
        ));
        lines.push(Line::raw(
            "The clock cannot start yet and does not run: this screen changes by itself (with a bell) when the hardware is yours.",
        ));
    }
    if !view.hardware_missing.is_empty() {
        lines.push(Line::styled(
            format!(
                "⚠ missing hardware: {} (allowed for this session)",
                view.hardware_missing.join(", ")
            ),
            theme.bad(),
        ));
    }
    if let Some(warning) = &view.sandbox_warning {
        lines.push(Line::styled(format!("⚠ {warning}"), theme.bad()));
    }
    lines.extend([
        Line::raw(""),
        Line::styled(
            "What is recorded",
            Style::default().add_modifier(Modifier::BOLD),
        ),
        bullet(if view.records_input {
            "everything typed into and printed by the shells (terminal input and output)".into()
        } else {
            "everything printed by the shells (terminal output; your keystrokes are not recorded)"
                .into()
        }),
        bullet("your notes, pauses and every scoring run with its result".into()),
        Line::raw(""),
        Line::styled("Rules", Style::default().add_modifier(Modifier::BOLD)),
        bullet(format!(
            "the clock counts active time only; pause ({p} p) for a break or a technical problem"
        )),
        bullet(format!(
            "score as often as you like ({p} s, or `score` in the shell); the shell stays usable"
        )),
        bullet(if view.protected.is_empty() {
            "work inside the workspace; do not modify the scorer".to_string()
        } else {
            format!(
                "work inside the workspace; do not modify {} (checked at every score)",
                view.protected.join(", ")
            )
        }),
        bullet(format!(
            "submit ({p} S) when done; at the end of the budget a final score is taken"
        )),
        bullet(format!(
            "detaching ({p} d) does not pause the clock; `rebench attach {}` comes back",
            view.id
        )),
    ]);
    // The way on sits in the border, so it shows even when the text is cut short.
    let first = if queued {
        vec![Span::raw(" Waiting for hardware ·  ")]
    } else {
        vec![
            Span::raw(" Press "),
            Span::styled("Enter", theme.key()),
            Span::raw(" to start the clock ·  "),
        ]
    };
    let press = Line::from(
        [
            first,
            vec![
                Span::styled("i", theme.key()),
                Span::raw(" instructions ·  "),
                Span::styled("q", theme.key()),
                Span::raw(" leave without starting "),
            ],
        ]
        .concat(),
    );
    let rect = crate::tui::widgets::overlay::centered(area, 96, lines.len() as u16 + 4);
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            page(theme, " Before you start ".into())
                .title_bottom(press.centered())
                .padding(Padding::new(2, 2, 1, 1)),
        ),
        rect,
    );
}

/// Participant pauses (not the system's scoring pauses): count and total seconds.
fn pause_summary(view: &SessionView) -> (usize, f64) {
    let end = view.ended_at;
    view.pauses
        .iter()
        .filter(|p| p.reason != PauseReason::Scoring)
        .fold((0, 0.0), |(n, total), p| {
            let until = p.end.or(end).unwrap_or(p.start);
            let secs = (until - p.start).num_milliseconds().max(0) as f64 / 1000.0;
            (n + 1, total + secs)
        })
}

pub fn draw_summary(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let Some(view) = &app.view else {
        return;
    };
    let scores = view.scores.as_deref().unwrap_or(&[]);
    let final_text = if !view.visible {
        "recorded (hidden in this environment)".to_string()
    } else {
        match view.final_score {
            Some(f) => format!(
                "{}   normalized {}",
                format::raw(f.raw, &view.unit),
                format::normalized(f.normalized)
            ),
            None if app.submitting_since_s.is_some() => "being taken…".to_string(),
            None => "no valid score".to_string(),
        }
    };
    let (pauses, paused_s) = pause_summary(view);
    let runs = scores
        .iter()
        .filter(|s| s.phase != ScorePhase::Starting)
        .count();
    let valid = scores
        .iter()
        .filter(|s| s.phase != ScorePhase::Starting && s.valid == Some(true))
        .count();
    let reason = view
        .end_reason
        .map_or_else(|| "ended".to_string(), |r| r.label());
    let mut lines = vec![
        Line::styled(
            format!("Session ended — {reason}"),
            theme.title().add_modifier(Modifier::BOLD),
        ),
        Line::styled(view.title.clone(), theme.dim()),
        Line::raw(""),
    ];
    // A proctor's end says why.
    if let Some(note) = &view.end_note {
        lines.push(field(theme, "Why", note.clone()));
    }
    lines.extend([
        Line::from(vec![
            Span::styled(format!("{:<16}", "Final score"), theme.dim()),
            Span::styled(final_text, theme.good().add_modifier(Modifier::BOLD)),
        ]),
        field(
            theme,
            "Time used",
            format!(
                "{} of {}",
                format::clock(view.active_s),
                format::clock(view.budget_s)
            ),
        ),
        field(
            theme,
            "Pauses",
            if pauses == 0 {
                "none".to_string()
            } else {
                format!("{pauses} ({} in all)", format::clock(paused_s))
            },
        ),
        field(
            theme,
            "Scoring runs",
            if view.visible {
                format!("{runs} ({valid} valid)")
            } else {
                format!("{runs}")
            },
        ),
        field(theme, "Notes", format!("{}", view.notes.len())),
        Line::raw(""),
        Line::raw("Everything is saved. Thank you!"),
        Line::raw(""),
        Line::from(vec![
            Span::styled("q", theme.key()),
            Span::raw(" quit   "),
            Span::styled("i", theme.key()),
            Span::raw(" instructions"),
        ]),
    ]);
    if view.extensions.iter().any(|e| e.by_s > 0.0) {
        let total: f64 = view.extensions.iter().map(|e| e.by_s).sum();
        lines.insert(
            5 + usize::from(view.end_note.is_some()),
            field(
                theme,
                "Extensions",
                format!(
                    "{}{}",
                    if total < 0.0 { "-" } else { "+" },
                    format::human_duration(total.abs())
                ),
            ),
        );
    }
    let rect = crate::tui::widgets::overlay::centered(area, 72, lines.len() as u16 + 4);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(page(theme, " Summary ".into())),
        rect,
    );
}
