//! The side panel: best and last score, a chart of the normalized score over
//! active time, the score log, and the participant's notes.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use crate::protocol::{ScoreView, SessionView};
use crate::session::ScorePhase;
use crate::tui::widgets::score::{best_score, draw_chart, score_text};
use crate::tui::widgets::theme::Theme;
use crate::tui::widgets::{format, wrap};
use crate::tui::workspace::app::App;

pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let block = Block::default()
        .borders(Borders::LEFT)
        .border_style(theme.border())
        .title(Span::styled(" Scores ", theme.title()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(view) = &app.view else {
        return;
    };
    let scores: &[ScoreView] = view.scores.as_deref().unwrap_or(&[]);
    let notes_rows = if view.notes.is_empty() {
        0
    } else {
        (view.notes.len() as u16 + 1).min(6)
    };
    let chart_rows = if inner.height >= 28 { 12 } else { 8 };
    let [summary, chart, log, notes] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Length(chart_rows),
        Constraint::Min(2),
        Constraint::Length(notes_rows),
    ])
    .areas(inner);
    draw_summary(app, view, scores, frame, summary);
    if view.visible {
        draw_chart(theme, view, scores, frame, chart);
    } else {
        let text = vec![
            Line::raw(""),
            Line::styled("Scores are hidden in this environment.", theme.dim()),
            Line::styled("Every scoring run is still recorded.", theme.dim()),
        ];
        frame.render_widget(Paragraph::new(text), chart);
    }
    draw_log(theme, view, scores, frame, log);
    draw_notes(theme, view, frame, notes);
}

fn draw_summary(
    app: &App,
    view: &SessionView,
    scores: &[ScoreView],
    frame: &mut Frame,
    area: Rect,
) {
    let theme = &app.theme;
    let label = |t: &'static str| Span::styled(t, theme.dim());
    let mut lines = Vec::new();
    if !view.visible {
        lines.push(Line::from(vec![
            label("best  "),
            Span::raw("score recorded (hidden)"),
        ]));
        lines.push(Line::from(vec![
            label("last  "),
            Span::raw(match scores.last() {
                Some(_) => "score recorded (hidden)",
                None => "none yet",
            }),
        ]));
    } else {
        let best = best_score(scores, view.lower_is_better)
            .map(|s| score_text(s, &view.unit))
            .unwrap_or_else(|| "none yet".into());
        lines.push(Line::from(vec![
            label("best  "),
            Span::styled(best, theme.good().add_modifier(Modifier::BOLD)),
        ]));
        let last = scores.last();
        let last_style = match last.and_then(|s| s.valid) {
            Some(false) => theme.bad(),
            _ => ratatui::style::Style::default(),
        };
        lines.push(Line::from(vec![
            label("last  "),
            Span::styled(
                last.map(|s| score_text(s, &view.unit))
                    .unwrap_or_else(|| "none yet".into()),
                last_style,
            ),
        ]));
    }
    lines.push(Line::styled(
        match (view.answer_scored, view.unit.is_empty()) {
            (true, _) => "scored from your answer when you submit".to_string(),
            (false, true) => format!("{}, aggregate: {}", view.metric, view.aggregate),
            (false, false) => format!(
                "{} ({}), aggregate: {}",
                view.metric, view.unit, view.aggregate
            ),
        },
        theme.dim(),
    ));
    match app.scoring_since_s {
        Some(since) => lines.push(Line::styled(
            format!(
                "scoring… {}{}",
                format::clock(app.now_s - since),
                super::header::exclusive_note(view)
            ),
            theme.key(),
        )),
        // Runs after the start, as numbered everywhere (#1..#n).
        None => lines.push(Line::styled(
            match view.score_count.saturating_sub(1) {
                1 => "1 scoring run".to_string(),
                n => format!("{n} scoring runs"),
            },
            theme.dim(),
        )),
    }
    frame.render_widget(Paragraph::new(lines), area);
}

fn draw_log(
    theme: &Theme,
    view: &SessionView,
    scores: &[ScoreView],
    frame: &mut Frame,
    area: Rect,
) {
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(theme.border())
        .title(Span::styled(" score log (newest first) ", theme.dim()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let rows = inner.height as usize;
    let mut lines = Vec::new();
    if scores.is_empty() {
        lines.push(Line::styled("no scores yet", theme.dim()));
    }
    let width = inner.width as usize;
    for s in scores.iter().rev().take(rows) {
        // Scoring runs are numbered as everywhere else: start, #1, #2, …
        let (run, time) = if s.phase == ScorePhase::Starting {
            (String::new(), "start".to_string())
        } else {
            (format!("#{}", s.run), format::clock(s.active_s))
        };
        let mut prefix = vec![
            Span::styled(format!("{run:>3} "), theme.key()),
            Span::styled(format!("{time:>7} "), theme.dim()),
        ];
        let (text, style) = if s.hidden && s.valid.is_none() {
            ("score recorded (hidden)".to_string(), Style::default())
        } else {
            match (s.valid, s.raw, s.normalized) {
                (Some(true), Some(raw), Some(n)) => {
                    prefix.push(Span::raw(format!("{:>10} ", format::raw(raw, &view.unit))));
                    prefix.push(Span::styled(
                        format!("{:>6} ", format::normalized(n)),
                        theme.good(),
                    ));
                    // Set apart, so it does not read as the value's unit.
                    let text = if s.message.is_empty() {
                        String::new()
                    } else {
                        format!("· {}", s.message)
                    };
                    (text, theme.dim())
                }
                _ => {
                    prefix.push(Span::styled("✗ invalid: ", theme.bad()));
                    (s.message.clone(), Style::default())
                }
            }
        };
        // Long messages and invalid reasons wrap under the values.
        let mut entry = wrap::after_prefix(prefix, &text, style, width, LOG_INDENT);
        if s.phase == ScorePhase::Final
            && let Some(last) = entry.last_mut()
        {
            last.spans.push(Span::styled(" (final)", theme.key()));
        }
        lines.extend(entry);
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// Where a log entry's wrapped lines start: under its value.
const LOG_INDENT: usize = 12;

fn draw_notes(theme: &Theme, view: &SessionView, frame: &mut Frame, area: Rect) {
    if area.height == 0 {
        return;
    }
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(theme.border())
        .title(Span::styled(" notes ", theme.dim()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let lines: Vec<Line> = view
        .notes
        .iter()
        .rev()
        .take(inner.height as usize)
        .flat_map(|n| {
            let time = Span::styled(format!("{:>7} ", format::clock(n.active_s)), theme.dim());
            wrap::after_prefix(
                vec![time],
                &n.text,
                Style::default(),
                inner.width as usize,
                8,
            )
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
