//! Drawing the player: header with tabs, the terminal at its recorded size,
//! the score chart and markers beside (or under) it, the timeline bar, the
//! status line with the session clock, and the key hints or prompt.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
use tui_term::widget::{Cursor, PseudoTerminal};

use super::action::BINDINGS;
use super::state::PlayerState;
use super::{bar, chart};
use crate::recording::timeline::{clock_text, duration_text};
use crate::tui::widgets::viewport::Viewport;

/// Narrowest side panel worth drawing.
const SIDE_MIN: u16 = 30;
const SIDE_MAX: u16 = 56;

pub fn draw(state: &PlayerState, frame: &mut Frame) {
    let [header, body, timeline, status, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let cropped = draw_body(state, frame, body);
    draw_header(state, frame, header, cropped);
    bar::render(
        &state.timeline,
        state.position,
        timeline,
        frame.buffer_mut(),
    );
    frame.render_widget(Paragraph::new(status_line(state)), status);
    frame.render_widget(Paragraph::new(footer_line(state)), footer);
    if state.help {
        draw_help(frame, body);
    }
}

fn draw_header(state: &PlayerState, frame: &mut Frame, area: Rect, cropped: bool) {
    // Tabs and the crop badge first: the title is what a narrow window cuts.
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut spans = vec![
        Span::styled(" rebench replay ", bold.fg(Color::Black).bg(Color::Cyan)),
        Span::raw(" "),
    ];
    for (i, track) in state.timeline.tracks.iter().enumerate() {
        let style = if i == state.tab {
            bold.fg(Color::Black).bg(Color::White)
        } else {
            Style::default().fg(Color::Gray)
        };
        spans.push(Span::styled(format!(" {} ", track.label), style));
        spans.push(Span::raw(" "));
    }
    if cropped {
        let (rows, cols) = state.screen().size();
        spans.push(Span::styled(
            format!(" {cols}×{rows} cropped "),
            Style::default().fg(Color::Black).bg(Color::Yellow),
        ));
        spans.push(Span::raw(" "));
    }
    spans.push(Span::styled(state.timeline.title.clone(), bold));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// Returns whether the terminal had to be cropped.
fn draw_body(state: &PlayerState, frame: &mut Frame, area: Rect) -> bool {
    let (rows, cols) = state.screen().size();
    let has_side = !state.timeline.scores.is_empty() || !state.timeline.markers.is_empty();
    let room_beside = area.width.saturating_sub(cols + 1);
    let room_below = area.height.saturating_sub(rows);
    let (term, side) = if has_side && room_beside >= SIDE_MIN {
        let side_w = room_beside.min(SIDE_MAX);
        let [term, _, side] = Layout::horizontal([
            Constraint::Min(1),
            Constraint::Length(1),
            Constraint::Length(side_w),
        ])
        .areas(area);
        (term, Some(side))
    } else if has_side && room_below >= 8 {
        let [term, side] =
            Layout::vertical([Constraint::Length(rows), Constraint::Min(1)]).areas(area);
        (term, Some(side))
    } else {
        (area, None)
    };
    let cropped = draw_terminal(state, frame, term);
    if let Some(side) = side {
        draw_side(state, frame, side);
    }
    cropped
}

fn draw_terminal(state: &PlayerState, frame: &mut Frame, area: Rect) -> bool {
    let screen = state.screen();
    let (rows, cols) = screen.size();
    let view = Viewport::follow_cursor(screen, area.width, area.height);
    let shown = Rect {
        width: area.width.min(cols),
        height: area.height.min(rows),
        ..area
    };
    // Dim the window outside the recorded terminal, so its edge is visible.
    frame.render_widget(
        Block::default().style(Style::default().bg(Color::Indexed(235))),
        area,
    );
    let cursor = Cursor::default().style(Style::default().add_modifier(Modifier::REVERSED));
    frame.render_widget(PseudoTerminal::new(&view).cursor(cursor), shown);
    view.cropped(area.width, area.height)
}

fn draw_side(state: &PlayerState, frame: &mut Frame, area: Rect) {
    let has_scores = !state.timeline.scores.is_empty();
    let chart_h = if has_scores {
        (area.height / 2).clamp(6.min(area.height), 14)
    } else {
        0
    };
    let [chart_area, list_area] =
        Layout::vertical([Constraint::Length(chart_h), Constraint::Min(0)]).areas(area);
    if has_scores {
        chart::render(&state.timeline, state.position, chart_area, frame);
    }
    if list_area.height >= 3 {
        draw_markers(state, frame, list_area);
    }
}

/// The markers around the playhead, the current one highlighted.
fn draw_markers(state: &PlayerState, frame: &mut Frame, area: Rect) {
    let markers = &state.timeline.markers;
    let current = markers.partition_point(|m| m.t <= state.position);
    let room = area.height.saturating_sub(2) as usize;
    // Keep the current marker about a third from the top.
    let first = current
        .saturating_sub(room / 3 + 1)
        .min(markers.len().saturating_sub(room));
    let lines: Vec<Line> = markers
        .iter()
        .enumerate()
        .skip(first)
        .take(room)
        .map(|(i, m)| {
            let style = if i + 1 == current {
                Style::default().fg(Color::Black).bg(Color::Cyan)
            } else if m.t > state.position {
                Style::default().fg(Color::DarkGray)
            } else {
                Style::default()
            };
            Line::styled(
                format!("{:>7} {} {}", clock_text(m.t), m.kind.symbol(), m.label),
                style,
            )
        })
        .collect();
    let title = format!(" markers {current}/{} ", markers.len());
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        area,
    );
}

fn status_line(state: &PlayerState) -> Line<'static> {
    let t = state.position;
    let timeline = &state.timeline;
    let mut spans = vec![
        Span::styled(
            if state.playing { " ▶ " } else { " ‖ " },
            Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            "{} / {}",
            clock_text(t),
            clock_text(state.duration())
        )),
    ];
    let mut field = |label: &str, value: String, color: Color| {
        spans.push(Span::raw("  "));
        spans.push(Span::styled(
            format!("{label} "),
            Style::default().fg(Color::DarkGray),
        ));
        spans.push(Span::styled(value, Style::default().fg(color)));
    };
    if let Some(active) = timeline.active_ms_at(t) {
        field("active", clock_text(active), Color::White);
    }
    if let Some(left) = timeline.remaining_ms_at(t) {
        let text = if left >= 0 {
            clock_text(left as u64)
        } else {
            format!("-{}", clock_text(left.unsigned_abs()))
        };
        field(
            "left",
            text,
            if left < 15 * 60_000 {
                Color::Red
            } else {
                Color::White
            },
        );
    }
    if timeline.paused_at(t) {
        field("clock", "paused".into(), Color::Blue);
    }
    field("speed", speed_text(state.speed()), Color::White);
    field(
        "idle",
        state.idle_limit().map_or("off".to_string(), duration_text),
        Color::White,
    );
    if let Some(m) = state.current_marker() {
        field(
            &format!("{} {}", clock_text(m.t), m.kind.symbol()),
            m.label.clone(),
            Color::Gray,
        );
    }
    Line::from(spans)
}

fn speed_text(speed: f64) -> String {
    if speed >= 1.0 {
        format!("{speed:.0}×")
    } else {
        format!("{speed}×")
    }
}

fn footer_line(state: &PlayerState) -> Line<'static> {
    if let Some(prompt) = &state.prompt {
        return Line::from(vec![
            Span::styled(
                " go to: ",
                Style::default().fg(Color::Black).bg(Color::Yellow),
            ),
            Span::raw(format!(" {prompt}▏")),
            Span::styled(
                "   (1:02:03, 90, 1h30m or 40%; enter to go, esc to cancel)",
                Style::default().fg(Color::DarkGray),
            ),
        ]);
    }
    if let Some(message) = &state.message {
        return Line::styled(format!(" {message}"), Style::default().fg(Color::Yellow));
    }
    Line::styled(
        " space play/pause · +/- speed · ←/→ 5s · [/] markers · ,/. step · g go to · b best · tab shell · ? help · q quit",
        Style::default().fg(Color::DarkGray),
    )
}

fn draw_help(frame: &mut Frame, area: Rect) {
    let lines: Vec<Line> = BINDINGS
        .iter()
        .map(|(keys, what)| {
            Line::from(vec![
                Span::styled(format!("{keys:>16}  "), Style::default().fg(Color::Cyan)),
                Span::raw(*what),
            ])
        })
        .collect();
    let width = area.width.min(72);
    let height = area.height.min(lines.len() as u16 + 2);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" keys (any key closes) ")),
        popup,
    );
}
