//! Drawing: a pure function of the app state, so every screen can be
//! snapshot-tested with ratatui's TestBackend.

pub mod footer;
pub mod header;
pub mod overlays;
pub mod pane;
pub mod screens;
pub mod side;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

use super::app::{App, Screen};
use super::layout;

pub fn draw(app: &App, frame: &mut Frame) {
    let area = frame.area();
    if layout::too_small(area) {
        draw_too_small(app, frame, area);
        return;
    }
    match app.screen {
        Screen::Connecting => match &app.reconnect {
            None => {
                let text = format!("connecting to session {}…", app.session);
                frame.render_widget(
                    Paragraph::new(Line::styled(text, app.theme.dim())).centered(),
                    crate::tui::widgets::overlay::centered(area, area.width, 1),
                );
            }
            Some(r) => draw_reconnecting(app, r, frame, area),
        },
        Screen::Workspace => {
            let areas = layout::workspace(area, app.side_panel);
            header::draw(app, frame, areas.header);
            pane::draw_tabs(app, frame, areas.tabs);
            pane::draw_pane(app, frame, areas.pane);
            if let Some(side) = areas.side {
                side::draw(app, frame, side);
            }
            overlays::draw_banner(app, frame, areas.tabs);
            footer::draw(app, frame, areas.footer);
        }
        Screen::Start | Screen::Summary => {
            let [head, body, foot] = Layout::vertical([
                Constraint::Length(layout::HEADER_ROWS),
                Constraint::Min(1),
                Constraint::Length(1),
            ])
            .areas(area);
            header::draw(app, frame, head);
            if app.screen == Screen::Start {
                screens::draw_start(app, frame, body);
            } else {
                screens::draw_summary(app, frame, body);
            }
            footer::draw(app, frame, foot);
        }
    }
    overlays::draw(app, frame, area);
}

/// The server is away: what that means for the session, and the next try.
fn draw_reconnecting(app: &App, r: &super::app::Reconnect, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let meaning = if r.shutdown {
        // Accurate for a session that was paused already (say, by a proctor).
        "Your session's clock is stopped (a running session is paused: server_shutdown); its shells ended; your files are kept."
    } else {
        "If the server stopped, your session comes back paused when it restarts; your files are kept."
    };
    let wait = r.wait_s(app.now_s).ceil();
    let mut lines = vec![
        Line::styled(r.why.clone(), theme.bad()),
        Line::raw(""),
        Line::raw(meaning),
        Line::raw(""),
        Line::styled(
            format!(
                "Reconnecting to session {} when the server is back: next try in {wait:.0} s (tries so far: {}).",
                app.session, r.attempts
            ),
            theme.dim(),
        ),
        Line::styled("q leaves (the session stays on the server)", theme.key()),
    ];
    if let Some(e) = &r.last_error {
        lines.push(Line::raw(""));
        lines.push(Line::styled(format!("last try: {e}"), theme.dim()));
    }
    let rect = crate::tui::widgets::overlay::centered(area, area.width.min(80), 12);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(ratatui::widgets::Wrap { trim: true })
            .centered(),
        rect,
    );
}

fn draw_too_small(app: &App, frame: &mut Frame, area: Rect) {
    let text = format!(
        "make the window at least {}×{} (it is {}×{})",
        layout::MIN_COLS,
        layout::MIN_ROWS,
        area.width,
        area.height
    );
    let mut lines = vec![Line::styled(text, app.theme.bad())];
    if let Some(view) = &app.view {
        lines.push(Line::raw(format!(
            "{} left · {}",
            crate::tui::widgets::format::clock(app.remaining_s()),
            header::state_label(app)
        )));
        let _ = view;
    }
    let rect = crate::tui::widgets::overlay::centered(area, area.width, lines.len() as u16 * 2);
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).centered(),
        rect,
    );
}
