//! The sessions table: one row per session, the selected one highlighted.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table, TableState};

use super::{alert_style, short_duration, state_style, state_text};
use crate::session::Phase;
use crate::tui::proctor::app::{App, Focus};
use crate::tui::proctor::rows::{LastScore, Row};
use crate::tui::widgets::format;
use crate::tui::widgets::theme::Urgency;

/// Cells of the budget bar.
const BAR_CELLS: usize = 10;

/// The table's columns, in order, with their widths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Participant,
    Session,
    Kind,
    Environment,
    State,
    Used,
    Bar,
    Left,
    Count,
    Best,
    Last,
    Scored,
    Idle,
}

const COLUMNS: [(Column, &str, u16); 13] = [
    (Column::Participant, "participant", 14),
    (Column::Session, "session", 7),
    (Column::Kind, "kind", 5),
    (Column::Environment, "environment", 20),
    (Column::State, "state", 22), // `PAUSED technical issue`
    (Column::Used, "used / budget", 14),
    (Column::Bar, "", BAR_CELLS as u16),
    // `100:00:00`: a 100-hour budget fits.
    (Column::Left, "left", 9),
    (Column::Count, "#", 3),
    (Column::Best, "best", 6),
    (Column::Last, "last", 7),
    (Column::Scored, "scored", 6),
    (Column::Idle, "idle", 5),
];

/// Dropped first when the window is narrow (the alerts column keeps its
/// room). The session id goes last: it is what every action and command
/// names, and two participants may share a name.
const DROP_ORDER: [Column; 9] = [
    Column::Bar,
    Column::Scored,
    Column::Kind,
    Column::Used,
    Column::Idle,
    Column::Last,
    Column::Environment,
    Column::Count,
    Column::Session,
];

/// Room the alerts column needs (`LONG PAUSE`, `PROTECTED` fit).
const ALERTS_MIN: u16 = 12;

fn columns_for(width: u16) -> Vec<(Column, &'static str, u16)> {
    let mut cols: Vec<(Column, &'static str, u16)> = COLUMNS.to_vec();
    // Highlight symbol, column gaps, and the alerts column.
    let needed =
        |cols: &[(Column, &str, u16)]| 2 + cols.iter().map(|c| c.2 + 1).sum::<u16>() + ALERTS_MIN;
    for drop in DROP_ORDER {
        if needed(&cols) <= width {
            break;
        }
        cols.retain(|c| c.0 != drop);
    }
    cols
}

pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    if app.rows.is_empty() {
        let text = if !app.loaded {
            "loading…"
        } else if app.fleet.sessions.is_empty() {
            "no sessions yet: `rebench new` or `rebench start` makes one"
        } else {
            "no session matches the filter (c clears it)"
        };
        frame.render_widget(Paragraph::new(Line::styled(text, theme.dim())), area);
        return;
    }
    let columns = columns_for(area.width);
    let mut widths: Vec<Constraint> = columns.iter().map(|c| Constraint::Length(c.2)).collect();
    widths.push(Constraint::Min(ALERTS_MIN));
    let mut header: Vec<Cell> = columns.iter().map(|c| Cell::from(c.1)).collect();
    header.push(Cell::from("alerts"));
    let header = TableRow::new(header).style(theme.dim().add_modifier(Modifier::UNDERLINED));
    // Only the rows that fit are built: with hundreds of sessions, building
    // the rest is most of a frame's cost.
    let fits = area.height.saturating_sub(1).max(1) as usize;
    let selected = app.selected_index();
    let first = selected.map_or(0, |s| (s + 1).saturating_sub(fits));
    let rows: Vec<TableRow> = app
        .rows
        .iter()
        .skip(first)
        .take(fits)
        .map(|r| table_row(app, r, &columns))
        .collect();
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
    let mut state = TableState::default().with_selected(selected.map(|s| s - first));
    frame.render_stateful_widget(table, area, &mut state);
}

fn table_row<'a>(app: &App, r: &'a Row, columns: &[(Column, &str, u16)]) -> TableRow<'a> {
    let theme = &app.theme;
    let urgency = Urgency::of(r.remaining_s);
    let live = r.state == Phase::Running || r.state == Phase::Paused;
    let time_style = if live {
        theme.countdown(urgency)
    } else {
        theme.dim()
    };
    let dash = || Span::styled("—", theme.dim());
    let cell = |column: Column| -> Cell<'a> {
        match column {
            // A marked session (bulk actions) carries a dot before its name.
            Column::Participant if app.marked.contains(&r.id) => Cell::from(Line::from(vec![
                Span::styled("● ", theme.key()),
                Span::raw(r.participant.as_str()),
            ])),
            Column::Participant => Cell::from(r.participant.as_str()),
            Column::Session => Cell::from(Span::styled(r.id.as_str(), theme.dim())),
            Column::Kind => Cell::from(r.kind.as_str()),
            Column::Environment => {
                let mut spans = vec![Span::raw(r.environment.as_str())];
                if r.hidden {
                    spans.push(Span::styled(" hidden", theme.dim()));
                }
                Cell::from(Line::from(spans))
            }
            Column::State => Cell::from(Span::styled(
                state_text(r.state, r.pause_reason, r.end_reason),
                state_style(theme, r.state),
            )),
            Column::Used => Cell::from(format!(
                "{} / {}",
                format::clock(r.active_s),
                format::human_duration(r.budget_s)
            )),
            Column::Bar => Cell::from(Span::styled(bar(r.active_s, r.budget_s), time_style)),
            // An ended session has no time left to spend.
            Column::Left if r.state == Phase::Ended => Cell::from(dash()),
            Column::Left => Cell::from(Span::styled(format::clock(r.remaining_s), time_style)),
            Column::Count => Cell::from(r.score_count.to_string()),
            Column::Best => Cell::from(match r.best {
                Some(b) => Span::styled(format::normalized(b), theme.good()),
                None => dash(),
            }),
            Column::Last => Cell::from(match (&r.last, r.scoring) {
                (_, true) => Span::styled("scoring", theme.key()),
                (LastScore::Valid(n), _) => Span::raw(format::normalized(*n)),
                (LastScore::Invalid, _) => Span::styled("invalid", theme.bad()),
                (LastScore::None, _) => dash(),
            }),
            Column::Scored => Cell::from(match r.since_score_s {
                Some(s) => Span::raw(short_duration(s)),
                None => dash(),
            }),
            Column::Idle => Cell::from(match r.idle_s {
                Some(s) if s > app.limits.idle_after_s => {
                    Span::styled(short_duration(s), theme.key())
                }
                Some(s) => Span::raw(short_duration(s)),
                None => dash(),
            }),
        }
    };
    let mut cells: Vec<Cell> = columns.iter().map(|c| cell(c.0)).collect();
    cells.push(Cell::from(alert_tags(app, r)));
    TableRow::new(cells)
}

fn alert_tags<'a>(app: &App, r: &Row) -> Line<'a> {
    let mut spans = Vec::new();
    for a in &r.alerts {
        if !spans.is_empty() {
            spans.push(Span::raw(" "));
        }
        let acked = app.is_acknowledged(&r.id, a);
        spans.push(Span::styled(
            a.kind.tag(),
            alert_style(&app.theme, a.kind, acked),
        ));
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
    fn narrow_windows_drop_the_least_needed_columns() {
        assert_eq!(columns_for(200).len(), COLUMNS.len());
        let narrow: Vec<Column> = columns_for(120).iter().map(|c| c.0).collect();
        assert!(!narrow.contains(&Column::Bar) && !narrow.contains(&Column::Kind));
        assert!(narrow.contains(&Column::Participant) && narrow.contains(&Column::Idle));
        // The id is the last to go: at 80 columns it is still there.
        let at_80: Vec<Column> = columns_for(80).iter().map(|c| c.0).collect();
        assert!(at_80.contains(&Column::Session) && at_80.contains(&Column::State));
        assert!(!at_80.contains(&Column::Environment));
    }

    #[test]
    fn bars_fill_with_the_budget_used() {
        assert_eq!(bar(0.0, 100.0), "──────────");
        assert_eq!(bar(50.0, 100.0), "━━━━━─────");
        assert_eq!(bar(500.0, 100.0), "━━━━━━━━━━");
        assert_eq!(bar(1.0, 0.0), "━━━━━━━━━━");
    }
}
