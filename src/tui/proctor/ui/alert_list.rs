//! The alert list under the table: every session's alerts, newest first,
//! with the time each began.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::alert_style;
use crate::tui::proctor::app::{App, Focus};

pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let focused = app.focus == Focus::Alerts;
    let title = format!(" Alerts ({}) ", app.alert_list.len());
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(if focused {
            theme.focus_border()
        } else {
            theme.border()
        })
        .title(Span::styled(title, theme.title()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if app.alert_list.is_empty() {
        frame.render_widget(
            Paragraph::new(Line::styled(" nothing needs attention", theme.dim())),
            inner,
        );
        return;
    }
    let rows = inner.height as usize;
    // Keep the selected alert in sight.
    let first = if focused {
        app.alert_selected.saturating_sub(rows.saturating_sub(1))
    } else {
        0
    };
    let lines: Vec<Line> = app
        .alert_list
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, l)| {
            let mut line = Line::from(vec![
                Span::styled(format!(" {} ", app.clock_time(l.alert.since)), theme.dim()),
                Span::styled(
                    format!("{:<10} ", l.alert.kind.tag()),
                    alert_style(theme, l.alert.kind, false),
                ),
                Span::raw(format!("{:<14} ", truncate(&l.participant, 14))),
                Span::styled(format!("{:<7} ", l.session), theme.dim()),
                Span::raw(l.alert.text.clone()),
            ]);
            if focused && i == app.alert_selected {
                line =
                    line.style(ratatui::style::Style::default().add_modifier(Modifier::REVERSED));
            }
            line
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

pub(super) fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let mut t: String = text.chars().take(width.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}
