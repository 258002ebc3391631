//! The footer: the few keys that matter now, and the latest status message.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::session::Phase;
use crate::tui::workspace::app::{App, NoticeLevel, Screen};

/// (key, what) pairs for the footer, by situation.
pub fn hints(app: &App) -> Vec<(String, &'static str)> {
    let p = app.prefix.key.label();
    let with = |k: &str| format!("{p} {k}");
    if app.overlay.is_some() {
        return vec![];
    }
    match app.screen {
        Screen::Connecting => vec![("q".into(), "quit")],
        Screen::Start if app.state() == Some(crate::session::Phase::Queued) => vec![
            ("i".into(), "instructions"),
            ("q".into(), "leave (it keeps its place in line)"),
        ],
        Screen::Start => vec![
            ("Enter".into(), "start the clock"),
            ("i".into(), "instructions"),
            ("q".into(), "leave (the clock does not start)"),
        ],
        Screen::Summary => vec![("q".into(), "quit"), ("i".into(), "instructions")],
        Screen::Workspace if app.prefix.armed() => vec![
            ("s".into(), "score"),
            ("p".into(), "pause"),
            ("n".into(), "note"),
            ("i".into(), "instr."),
            ("c".into(), "new tab"),
            (". ,".into(), "tabs"),
            ("x".into(), "close"),
            ("b".into(), "panel"),
            ("[".into(), "scroll"),
            ("S".into(), "submit"),
            ("d".into(), "detach"),
            ("?".into(), "help"),
        ],
        Screen::Workspace if app.scroll_mode => vec![
            ("PgUp/PgDn ↑/↓".into(), "scroll"),
            ("/".into(), "search"),
            ("n/N".into(), "older/newer match"),
            ("y".into(), "copy the view"),
            ("g/G".into(), "top/bottom"),
            ("Esc".into(), "back to the shell"),
        ],
        Screen::Workspace if app.state() == Some(Phase::Paused) && app.pause_is_mine() => vec![
            (with("p"), "resume"),
            (with("n"), "note"),
            (with("d"), "detach"),
            (with("?"), "help"),
        ],
        // Not theirs to end: no resume key that would only be refused.
        Screen::Workspace if app.state() == Some(Phase::Paused) => vec![
            (with("n"), "note"),
            (with("d"), "detach"),
            (with("?"), "help"),
        ],
        // Most useful first: what does not fit is dropped from the end.
        Screen::Workspace => vec![
            (with("s"), "score"),
            (with("p"), "pause"),
            (with("n"), "note"),
            (with("?"), "help"),
            (with("S"), "submit"),
            (with("d"), "detach"),
            (with("c"), "new tab"),
        ],
    }
}

pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    if let Some(search) = app.search.as_ref().filter(|s| s.editing && app.scroll_mode) {
        let line = Line::from(vec![
            Span::styled(" search (older first): ", theme.key()),
            Span::raw(format!("{}▏", search.query)),
            Span::styled("  Enter finds · Esc cancels", theme.dim()),
        ]);
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    let mut spans = Vec::new();
    if app.prefix.armed() && app.screen == Screen::Workspace {
        spans.push(Span::styled(
            format!(" {} … ", app.prefix.key.label()),
            theme.prefix_badge(),
        ));
        spans.push(Span::raw(" "));
    }
    let notice = app.visible_notice();
    let notice_width = notice
        .map(|n| (n.text.chars().count() as u16 + 2).min(area.width * 2 / 3))
        .unwrap_or(0);
    // As many hints as fit whole beside the notice.
    let room = area.width.saturating_sub(notice_width) as usize;
    let mut used: usize = spans.iter().map(|s| s.width()).sum();
    for (i, (key, what)) in hints(app).into_iter().enumerate() {
        let sep = if i > 0 { 3 } else { 0 };
        let need = sep + key.chars().count() + 1 + what.chars().count();
        if used + need > room {
            break;
        }
        used += need;
        if i > 0 {
            spans.push(Span::styled(" · ", theme.dim()));
        }
        spans.push(Span::styled(key, theme.key()));
        spans.push(Span::raw(format!(" {what}")));
    }
    let [left, right] =
        Layout::horizontal([Constraint::Min(1), Constraint::Length(notice_width)]).areas(area);
    frame.render_widget(Paragraph::new(Line::from(spans)), left);
    if let Some(n) = notice {
        let style = match n.level {
            NoticeLevel::Info => theme.title(),
            NoticeLevel::Error => theme.bad(),
        };
        frame.render_widget(
            Paragraph::new(Line::styled(n.text.clone(), style)).right_aligned(),
            right,
        );
    }
}
