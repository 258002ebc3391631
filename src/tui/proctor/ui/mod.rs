//! Drawing: a pure function of the app state, so every screen is
//! snapshot-tested with ratatui's TestBackend.

mod alert_list;
mod detail;
mod overlays;
mod table;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::alerts::AlertKind;
use super::app::{App, Screen};
use crate::session::{EndReason, PauseReason, Phase};
use crate::tui::widgets::theme::Theme;

/// Below this the dashboard cannot show a useful row; it says so instead.
pub const MIN_COLS: u16 = 80;
pub const MIN_ROWS: u16 = 16;

pub fn draw(app: &App, frame: &mut Frame) {
    let area = frame.area();
    if area.width < MIN_COLS || area.height < MIN_ROWS {
        draw_too_small(app, frame, area);
        return;
    }
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(app, frame, header);
    match (app.screen, &app.detail) {
        (Screen::Detail, Some(d)) => detail::draw(app, d, frame, body),
        _ => draw_dashboard(app, frame, body),
    }
    draw_footer(app, frame, footer);
    overlays::draw(app, frame, area);
}

/// The table, a filter line above it and the alert list below.
fn draw_dashboard(app: &App, frame: &mut Frame, area: Rect) {
    let alerts_rows = if app.alert_list.is_empty() {
        2
    } else {
        (app.alert_list.len() as u16 + 1).clamp(2, (area.height / 3).max(4))
    };
    let [filter, table_area, alerts] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(alerts_rows),
    ])
    .areas(area);
    draw_filter(app, frame, filter);
    table::draw(app, frame, table_area);
    alert_list::draw(app, frame, alerts);
}

fn draw_header(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let count = |state: Phase| {
        app.fleet
            .sessions
            .values()
            .filter(|t| t.view.state == state)
            .count()
    };
    let mut spans = vec![
        Span::styled(" rebench proctor ", theme.title()),
        Span::styled(format!(" {} ", app.me), theme.dim()),
        Span::raw("  "),
    ];
    if let Some(r) = &app.reconnect {
        let what = if r.shutdown {
            "SERVER SHUT DOWN"
        } else {
            "SERVER LOST"
        };
        spans.push(Span::styled(
            format!(" {what} "),
            theme.bad().add_modifier(Modifier::REVERSED),
        ));
        spans.push(Span::styled(
            format!(
                " reconnecting: next try in {:.0} s (tries: {}) · sessions as last seen",
                r.wait_s(app.since_start_s).ceil(),
                r.attempts
            ),
            theme.key(),
        ));
    } else if app.loaded {
        let full = format!(
            "{} sessions · {} running · {} paused · {} not started · {} ended",
            app.fleet.sessions.len(),
            count(Phase::Running),
            count(Phase::Paused),
            count(Phase::Created),
            count(Phase::Ended)
        );
        // Narrow windows get the counts that call for action, whole words.
        let short = format!(
            "{} sessions · {} paused",
            app.fleet.sessions.len(),
            count(Phase::Paused)
        );
        let used: usize = spans.iter().map(|s| s.width()).sum();
        let room = (area.width as usize).saturating_sub(used + 3 + 10 + 7);
        spans.push(Span::raw(if full.chars().count() <= room {
            full
        } else {
            short
        }));
        spans.push(Span::raw("   "));
        let n = app.alert_list.len();
        let style = if n == 0 { theme.dim() } else { theme.key() };
        spans.push(Span::styled(
            match n {
                0 => "no alerts".to_string(),
                1 => "1 alert".to_string(),
                n => format!("{n} alerts"),
            },
            style,
        ));
    } else {
        spans.push(Span::styled("loading sessions…", theme.dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
    let clock = format!("{} ", app.clock_minute(app.now));
    frame.render_widget(
        Paragraph::new(Line::styled(clock, theme.dim())).right_aligned(),
        area,
    );
}

fn draw_filter(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let mut spans = vec![Span::styled(" ", theme.dim())];
    spans.push(Span::styled(app.view.describe(), theme.dim()));
    spans.push(Span::raw(format!("   {} shown", app.rows.len())));
    if app.searching {
        spans.push(Span::raw("   "));
        spans.push(Span::styled("search participant: ", theme.key()));
        spans.push(Span::raw(format!("{}▏", app.view.search)));
        spans.push(Span::styled("  (Enter keeps, Esc clears)", theme.dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_footer(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    if let Some(n) = app.visible_notice() {
        let style = if n.error { theme.banner() } else { theme.key() };
        frame.render_widget(
            Paragraph::new(Line::styled(format!(" {} ", n.text), style)),
            area,
        );
        return;
    }
    let marked = format!("{} marked", app.marked.len());
    let keys: &[(&str, &str)] = match app.screen {
        // Marks make p, r, x and n act on all of them: say so.
        Screen::Table if !app.marked.is_empty() => &[
            (marked.as_str(), "p/r/x/n act on all of them"),
            ("Space", "(un)mark"),
            ("*", "mark all shown / none"),
            ("E s", "act on the selected one"),
            ("?", "help"),
        ],
        Screen::Table => &[
            ("Enter", "details"),
            ("p/r", "pause/resume"),
            ("x", "extend"),
            ("n", "note"),
            ("s", "score"),
            ("E", "end"),
            ("a", "ack alerts"),
            ("/", "search"),
            ("f e t !", "filter"),
            ("o", "sort"),
            ("Tab", "alerts"),
            ("?", "help"),
            ("q", "quit"),
        ],
        Screen::Detail => &[
            ("Esc", "back"),
            ("Tab/1-9", "shell"),
            ("↑/↓", "history"),
            ("v", "shells/execs"),
            ("p/r", "pause/resume"),
            ("x", "extend"),
            ("n", "note"),
            ("s", "score"),
            ("E", "end"),
            ("PgUp/PgDn", "score log"),
            ("?", "help"),
        ],
    };
    frame.render_widget(Paragraph::new(keys_line(theme, keys)), area);
}

pub(super) fn keys_line<'a>(theme: &Theme, keys: &[(&'a str, &'a str)]) -> Line<'a> {
    let mut spans = vec![Span::raw(" ")];
    for (i, (k, what)) in keys.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" · ", theme.dim()));
        }
        spans.push(Span::styled(*k, theme.key()));
        spans.push(Span::raw(format!(" {what}")));
    }
    Line::from(spans)
}

/// A foreground colour, or plain text under NO_COLOR.
pub(super) fn fg(theme: &Theme, color: Color) -> Style {
    if theme.color {
        Style::default().fg(color)
    } else {
        Style::default()
    }
}

/// How a session's state reads in a cell: `RUNNING`, `PAUSED proctor`.
pub(super) fn state_text(
    state: Phase,
    pause: Option<PauseReason>,
    end: Option<EndReason>,
) -> String {
    match state {
        Phase::Queued => "QUEUED".into(),
        Phase::Created => "NOT STARTED".into(),
        Phase::Running => "RUNNING".into(),
        Phase::Paused => match pause {
            Some(r) => format!("PAUSED {}", r.label()),
            None => "PAUSED".into(),
        },
        Phase::Ended => match end {
            Some(EndReason::EndedByProctor) => "ENDED by proctor".into(),
            Some(EndReason::BudgetExhausted) => "ENDED out of time".into(),
            Some(r) => format!("ENDED {}", r.label()),
            None => "ENDED".into(),
        },
    }
}

pub(super) fn state_style(theme: &Theme, state: Phase) -> Style {
    match state {
        Phase::Running => fg(theme, Color::Green),
        Phase::Paused => fg(theme, Color::Yellow).add_modifier(Modifier::BOLD),
        Phase::Ended => theme.dim(),
        Phase::Created => Style::default(),
        Phase::Queued => theme.dim(),
    }
}

pub(super) fn alert_style(theme: &Theme, kind: AlertKind, acknowledged: bool) -> Style {
    if acknowledged {
        theme.dim()
    } else if kind.severe() {
        theme.bad().add_modifier(Modifier::BOLD)
    } else {
        fg(theme, Color::Yellow)
    }
}

/// A compact age: `45s`, `12m`, `3h05`.
pub(super) fn short_duration(seconds: f64) -> String {
    let s = if seconds.is_finite() && seconds > 0.0 {
        seconds as u64
    } else {
        0
    };
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        _ => format!("{}h{:02}", s / 3600, (s / 60) % 60),
    }
}

/// A window too small for the dashboard: how big it must be, and the one
/// line a proctor needs anyway (how many alerts wait).
fn draw_too_small(app: &App, frame: &mut Frame, area: Rect) {
    let lines = vec![
        Line::styled(
            format!(
                "make the window at least {MIN_COLS}×{MIN_ROWS} (it is {}×{})",
                area.width, area.height
            ),
            app.theme.bad(),
        ),
        Line::raw(format!(
            "{} sessions · {} alerts",
            app.fleet.sessions.len(),
            app.alert_list.len()
        )),
    ];
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).centered(),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_durations() {
        assert_eq!(short_duration(-3.0), "0s");
        assert_eq!(short_duration(59.9), "59s");
        assert_eq!(short_duration(720.0), "12m");
        assert_eq!(short_duration(3.0 * 3600.0 + 300.0), "3h05");
    }
}
