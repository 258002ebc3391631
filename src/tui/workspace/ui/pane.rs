//! The shell pane (the active tab's screen) and the tab bar above it.

use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use crate::session::PauseReason;
use crate::session::Phase;
use crate::tui::workspace::app::App;

pub fn draw_tabs(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let mut spans = Vec::new();
    for (i, tab) in app.tabs.iter().enumerate() {
        let label = format!(" {}:{} ", i + 1, tab.label());
        let style = if i == app.active_tab {
            theme.prefix_badge()
        } else {
            theme.dim()
        };
        spans.push(Span::styled(label, style));
        spans.push(Span::raw(" "));
    }
    if app.tabs.is_empty() {
        spans.push(Span::styled(" opening a shell… ", theme.dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
    if let Some(tab) = app.active_tab()
        && (app.scroll_mode || tab.scrolled() > 0)
    {
        let text = format!(
            " SCROLLBACK ↑{}  PgUp/PgDn ↑/↓ g/G · Esc leaves ",
            tab.scrolled()
        );
        frame.render_widget(
            Paragraph::new(Line::styled(text, theme.prefix_badge())).right_aligned(),
            area,
        );
    }
}

pub fn draw_pane(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let Some(tab) = app.active_tab() else {
        frame.render_widget(
            Paragraph::new(Line::styled("opening a shell…", theme.dim())),
            area,
        );
        return;
    };
    if !tab.attached {
        let text = tab.gone.clone().unwrap_or_else(|| "attaching…".into());
        frame.render_widget(Paragraph::new(Line::styled(text, theme.dim())), area);
        return;
    }
    {
        let mut rows = tab.rows.borrow_mut();
        rows.update(tab.parser.screen());
        rows.render(area, frame.buffer_mut());
    }

    // The search's match, while the view is where it put it.
    if let Some(found) = app
        .search
        .as_ref()
        .and_then(|s| s.found)
        .filter(|f| app.scroll_mode && f.offset == tab.scrolled() && f.row < area.height)
    {
        let row = Rect::new(area.x, area.y + found.row, area.width, 1);
        frame.buffer_mut().set_style(row, theme.search_match());
    }
    // Rows being selected with the mouse.
    if let Some(s) = app
        .selection
        .filter(|s| s.offset == tab.scrolled() && s.from.min(s.to) < area.height)
    {
        let (from, to) = (
            s.from.min(s.to),
            s.from.max(s.to).min(area.height.saturating_sub(1)),
        );
        let rows = Rect::new(
            area.x,
            area.y + from,
            area.width,
            to.saturating_sub(from) + 1,
        );
        frame.buffer_mut().set_style(rows, theme.search_match());
    }
    if let Some(at) = shell_cursor(app, area) {
        frame.set_cursor_position(at);
    }
    if app.state() == Some(Phase::Paused) {
        dim(app, frame, area);
        draw_paused_notice(app, frame, area);
    }
}

/// Where the shell's cursor shows, if it does: on the live screen of a
/// running session with nothing over it.
pub fn shell_cursor(app: &App, area: Rect) -> Option<Position> {
    let tab = app.active_tab().filter(|tab| tab.attached)?;
    let screen = tab.parser.screen();
    let live = tab.scrolled() == 0 && !app.scroll_mode;
    if !(app.running() && live && !screen.hide_cursor() && app.overlay.is_none()) {
        return None;
    }
    let (row, col) = screen.cursor_position();
    (row < area.height && col < area.width).then(|| Position::new(area.x + col, area.y + row))
}

/// The rows a partial frame names, drawn into the last frame: the
/// active shell's, from what drawing it last left.
pub fn draw_rows(app: &App, buf: &mut ratatui::buffer::Buffer, area: Rect, rows: &[u16]) {
    let Some(tab) = app.active_tab() else {
        return;
    };
    let cached = tab.rows.borrow();
    for &row in rows {
        cached.render_row(row, area, buf);
    }
}

/// Greys out the shell while the clock is stopped.
fn dim(app: &App, frame: &mut Frame, area: Rect) {
    let buf = frame.buffer_mut();
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            if let Some(cell) = buf.cell_mut(Position::new(x, y)) {
                if app.theme.color {
                    cell.set_style(Style::default().fg(Color::DarkGray).bg(Color::Reset));
                }
                cell.modifier.insert(Modifier::DIM);
            }
        }
    }
}

fn draw_paused_notice(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let reason = app.view.as_ref().and_then(|v| v.pause_reason);
    let prefix = app.prefix.key.label();
    let mine = reason.is_none_or(|r| r.participant_may_resume());
    let how = if mine {
        format!("Press {prefix} p to resume.")
    } else if reason == Some(PauseReason::Scoring) {
        "A final score is being taken.".to_string()
    } else {
        "The proctor paused this session and will resume it.".to_string()
    };
    let mut lines = vec![
        Line::styled(
            match reason {
                Some(r) => format!("PAUSED ({})", r.label()),
                None => "PAUSED".to_string(),
            },
            theme.title(),
        ),
        Line::raw(""),
        Line::raw("The clock is stopped and your processes are frozen;"),
        Line::raw("keys are not sent to the shell."),
        Line::raw(""),
        Line::styled(how, theme.key()),
    ];
    // Someone else's pause says why, in their words.
    let note = app.open_pause_note().filter(|_| !mine);
    let mut height = 8;
    if let Some(note) = note {
        lines.push(Line::raw(""));
        lines.push(Line::raw(format!("“{note}”")));
        // The note wraps at the box's inner width (52).
        height += 1 + (note.chars().count() as u16 + 2).div_ceil(52).min(6);
    }
    let rect = crate::tui::widgets::overlay::centered(area, 56, height);
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .centered()
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .border_style(theme.focus_border()),
            ),
        rect,
    );
}
