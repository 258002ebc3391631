//! The sessions table: one row per session, the selected one highlighted.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table, TableState};

use super::{alert_style, short_duration, state_style, state_text};
use crate::proctor::app::{App, Focus};
use crate::proctor::rows::{LastScore, Row};
use crate::tui::format;
use crate::tui::theme::Urgency;

/// Cells of the budget bar.
const BAR_CELLS: usize = 10;

const HEADERS: [&str; 13] = [
    "participant",
    "session",
    "kind",
    "environment",
    "state",
    "used / budget",
    "",
    "left",
    "#",
    "best",
    "last",
    "scored",
    "idle",
];

pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    if app.rows.is_empty() {
        let text = if !app.loaded {
            "loading…"
        } else if app.fleet.sessions.is_empty() {
            "no sessions yet: `rebench start` or `rebench create` makes one"
        } else {
            "no session matches the filter (c clears it)"
        };
        frame.render_widget(Paragraph::new(Line::styled(text, theme.dim())), area);
        return;
    }
    let widths = [
        Constraint::Length(14),
        Constraint::Length(7),
        Constraint::Length(5),
        Constraint::Length(20),
        Constraint::Length(17),
        Constraint::Length(14),
        Constraint::Length(BAR_CELLS as u16),
        Constraint::Length(8),
        Constraint::Length(3),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Min(10),
    ];
    let mut header: Vec<Cell> = HEADERS.iter().map(|h| Cell::from(*h)).collect();
    header.push(Cell::from("alerts"));
    let header = TableRow::new(header).style(theme.dim().add_modifier(Modifier::UNDERLINED));
    let rows: Vec<TableRow> = app.rows.iter().map(|r| table_row(app, r)).collect();
    let highlight = if app.focus == Focus::Table {
        Style::default().add_modifier(Modifier::REVERSED)
    } else {
        Style::default().add_modifier(Modifier::BOLD)
    };
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(highlight)
        .highlight_symbol("▶ ");
    let mut state = TableState::default().with_selected(app.selected_index());
    frame.render_stateful_widget(table, area, &mut state);
}

fn table_row<'a>(app: &App, r: &'a Row) -> TableRow<'a> {
    let theme = &app.theme;
    let urgency = Urgency::of(r.remaining_s);
    let live = r.state == "running" || r.state == "paused";
    let time_style = if live {
        theme.countdown(urgency)
    } else {
        theme.dim()
    };
    let env = if r.hidden {
        format!("{} [hidden]", r.environment)
    } else {
        r.environment.clone()
    };
    let last = match (&r.last, r.scoring) {
        (_, true) => Span::styled("scoring", theme.key()),
        (LastScore::Valid(n), _) => Span::raw(format::normalized(*n)),
        (LastScore::Invalid, _) => Span::styled("✗ inval", theme.bad()),
        (LastScore::None, _) => Span::styled("—", theme.dim()),
    };
    let dash = || Span::styled("—", theme.dim());
    let cells = vec![
        Cell::from(r.participant.as_str()),
        Cell::from(Span::styled(r.id.as_str(), theme.dim())),
        Cell::from(r.kind.as_str()),
        Cell::from(env),
        Cell::from(Span::styled(
            state_text(&r.state, r.pause_reason.as_deref(), r.end_reason.as_deref()),
            state_style(theme, &r.state),
        )),
        Cell::from(format!(
            "{} / {}",
            format::clock(r.active_s),
            format::human_duration(r.budget_s)
        )),
        Cell::from(Span::styled(bar(r.active_s, r.budget_s), time_style)),
        Cell::from(Span::styled(format::clock(r.remaining_s), time_style)),
        Cell::from(r.score_count.to_string()),
        Cell::from(match r.best {
            Some(b) => Span::styled(format::normalized(b), theme.good()),
            None => dash(),
        }),
        Cell::from(last),
        Cell::from(match r.since_score_s {
            Some(s) => Span::raw(short_duration(s)),
            None => dash(),
        }),
        Cell::from(match r.idle_s {
            Some(s) if s > app.limits.idle_after_s && r.state == "running" => {
                Span::styled(short_duration(s), theme.key())
            }
            Some(s) => Span::raw(short_duration(s)),
            None => dash(),
        }),
        Cell::from(alert_tags(app, r)),
    ];
    TableRow::new(cells)
}

fn alert_tags<'a>(app: &App, r: &Row) -> Line<'a> {
    let mut spans = Vec::new();
    for a in &r.alerts {
        if !spans.is_empty() {
            spans.push(Span::raw(" "));
        }
        let acked = app.is_acknowledged(&r.id, a);
        spans.push(Span::styled(a.kind.tag(), alert_style(&app.theme, a.kind, acked)));
    }
    Line::from(spans)
}

/// The used part of the budget as a bar of `BAR_CELLS` cells.
pub fn bar(active_s: f64, budget_s: f64) -> String {
    let fraction = if budget_s > 0.0 {
        (active_s / budget_s).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let used = (fraction * BAR_CELLS as f64).round() as usize;
    format!("{}{}", "━".repeat(used), "─".repeat(BAR_CELLS - used))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_fill_with_the_budget_used() {
        assert_eq!(bar(0.0, 100.0), "──────────");
        assert_eq!(bar(50.0, 100.0), "━━━━━─────");
        assert_eq!(bar(500.0, 100.0), "━━━━━━━━━━");
        assert_eq!(bar(1.0, 0.0), "━━━━━━━━━━");
    }
}
