//! Boxes drawn over the workspace: help, instructions, the note editor,
//! the pause reason, confirmations, the time-warning banner.

use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

use crate::tui::widgets::format;
use crate::tui::widgets::overlay::{boxed, centered, draw_box};
use crate::tui::widgets::theme::Theme;
use crate::tui::workspace::app::{App, Overlay};
use crate::tui::workspace::prefix::BINDINGS;

use crate::tui::widgets::score::{best_score, score_text};

pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    if app.submitting_since_s.is_some() {
        draw_submitting(app, frame, area);
    }
    let Some(overlay) = &app.overlay else {
        return;
    };
    match overlay {
        Overlay::Help => draw_help(app, frame, area),
        Overlay::Instructions { scroll } => draw_instructions(app, *scroll, frame, area),
        Overlay::Note { text } => draw_line_input(
            app,
            " Note — recorded in the session log ",
            text,
            ("Enter", "save"),
            frame,
            area,
        ),
        Overlay::Answer { text } => draw_line_input(
            app,
            " Your answer — Enter submits it and ends the session ",
            text,
            ("Enter", "submit"),
            frame,
            area,
        ),
        Overlay::RenameTab { text } => draw_line_input(
            app,
            " Name this tab — empty: the program's title ",
            text,
            ("Enter", "rename"),
            frame,
            area,
        ),
        Overlay::PauseChoice => draw_pause_choice(app, frame, area),
        Overlay::ConfirmClose { shell } => {
            let lines = vec![
                Line::raw(format!(
                    "Close shell {shell}? Its programs are stopped; its screen is kept in the recording."
                )),
                Line::raw(""),
                keys_line(
                    &app.theme,
                    &[("y", "close it"), ("any other key", "keep it")],
                ),
            ];
            draw_box(&app.theme, " Close tab ", lines, 60, frame, area);
        }
        Overlay::ConfirmSubmit => draw_confirm_submit(app, frame, area),
    }
}

fn keys_line<'a>(theme: &Theme, keys: &[(&'a str, &'a str)]) -> Line<'a> {
    let mut spans = Vec::new();
    for (i, (k, what)) in keys.iter().enumerate() {
        if i > 0 {
            spans.push(Span::raw("    "));
        }
        spans.push(Span::styled(*k, theme.key()));
        spans.push(Span::raw(format!(" {what}")));
    }
    Line::from(spans)
}

fn draw_help(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let p = app.prefix.key.label();
    let mut lines = vec![
        Line::raw(format!(
            "Every key goes to the shell. Workspace commands are {p} followed by:"
        )),
        Line::raw(""),
    ];
    for b in BINDINGS {
        lines.push(Line::from(vec![
            Span::styled(format!("  {:<8}", b.keys), theme.key()),
            Span::raw(b.what),
        ]));
    }
    lines.extend([
        Line::from(vec![
            Span::styled(format!("  {:<8}", p.clone()), theme.key()),
            Span::raw(format!("(twice) send {p} itself to the shell")),
        ]),
        Line::from(vec![
            Span::styled(format!("  {:<8}", "Esc"), theme.key()),
            Span::raw("forget the prefix"),
        ]),
        Line::raw(""),
        Line::raw("Mouse wheel: scrolls the history (or goes to programs that use the mouse)."),
        Line::raw(
            "Drag: copies the rows to your terminal's clipboard (Shift+drag: the terminal's own).",
        ),
        Line::raw(format!(
            "In the history ({p} [): / searches it, n/N older/newer match, y copies the view."
        )),
        Line::raw("Change the prefix key in ~/.config/rebench/config.toml:  prefix = \"C-b\""),
        Line::raw(""),
        Line::styled("any key closes this help", theme.dim()),
    ]);
    draw_box(theme, " Keys ", lines, 78, frame, area);
}

/// Instructions as display lines, Markdown rendered: headings underlined,
/// bullets as dots, code blocks indented, `**bold**`, `*emphasis*` and
/// `` `code` `` inline.
pub fn instruction_lines<'a>(theme: &Theme, text: &'a str) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    let mut in_code = false;
    for raw in text.lines() {
        let trimmed = raw.trim_start();
        if trimmed.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            lines.push(Line::styled(format!("    {raw}"), theme.key()));
        } else if let Some(h) = trimmed.strip_prefix('#') {
            let h = h.trim_start_matches('#').trim();
            let style = theme.title().add_modifier(Modifier::UNDERLINED);
            lines.push(Line::from(
                inline_spans(theme, h)
                    .into_iter()
                    .map(|s| s.patch_style(style))
                    .collect::<Vec<_>>(),
            ));
        } else if let Some(item) = trimmed
            .strip_prefix("- ")
            .or_else(|| trimmed.strip_prefix("* "))
        {
            let indent = raw.len() - trimmed.len();
            let mut spans = vec![Span::raw(format!("{}• ", " ".repeat(indent)))];
            spans.extend(inline_spans(theme, item));
            lines.push(Line::from(spans));
        } else {
            lines.push(Line::from(inline_spans(theme, raw)));
        }
    }
    lines
}

/// One line's inline Markdown: `` `code` ``, `**bold**`, `*emphasis*` or
/// `_emphasis_`; an unmatched marker stays as it was typed.
fn inline_spans<'a>(theme: &Theme, text: &'a str) -> Vec<Span<'a>> {
    let mut spans = Vec::new();
    let mut plain_from = 0;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        let (marker, style) = match bytes[i] {
            b'`' => ("`", theme.key()),
            b'*' if text[i..].starts_with("**") => {
                ("**", Style::default().add_modifier(Modifier::BOLD))
            }
            b'*' | b'_' => (
                &text[i..i + 1],
                Style::default().add_modifier(Modifier::ITALIC),
            ),
            _ => {
                i += 1;
                continue;
            }
        };
        let body_from = i + marker.len();
        // A closing marker on the same line, with something between.
        let close = text[body_from..].find(marker).filter(|&n| n > 0);
        // `snake_case` and 2*3 are not emphasis: it must start a word.
        let starts_word = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        match close {
            Some(n) if marker == "`" || starts_word => {
                if plain_from < i {
                    spans.push(Span::raw(&text[plain_from..i]));
                }
                spans.push(Span::styled(&text[body_from..body_from + n], style));
                i = body_from + n + marker.len();
                plain_from = i;
            }
            _ => i += marker.len(),
        }
    }
    if plain_from < text.len() {
        spans.push(Span::raw(&text[plain_from..]));
    }
    spans
}

/// How far the instructions can scroll in a box of this inner size.
pub fn instructions_max_scroll(app: &App, inner: Rect) -> u16 {
    let Some(text) = &app.instructions else {
        return 0;
    };
    let width = inner.width.max(1) as usize;
    let total: usize = instruction_lines(&app.theme, text)
        .iter()
        .map(|l| {
            let text: String = l.spans.iter().map(|s| s.content.as_ref()).collect();
            wrapped_rows(&text, width)
        })
        .sum();
    // One spare row: the estimate may differ from the real wrapping by a line.
    (total + 1).saturating_sub(inner.height as usize) as u16
}

/// Rows a line takes when word-wrapped at `width` (greedy, as the paragraph does).
fn wrapped_rows(text: &str, width: usize) -> usize {
    let mut rows = 1;
    let mut used = 0;
    for word in text.split(' ') {
        let w = word.chars().count();
        let need = if used == 0 { w } else { used + 1 + w };
        if need <= width {
            used = need;
        } else if w <= width {
            rows += 1;
            used = w;
        } else {
            // A word longer than the line is cut across rows.
            rows += (used > 0) as usize + (w - 1) / width;
            used = w % width;
        }
    }
    rows
}

/// The instructions box: nearly the whole screen.
pub fn instructions_rect(area: Rect) -> Rect {
    centered(
        area,
        area.width.saturating_sub(4).min(100),
        area.height.saturating_sub(2),
    )
}

fn instructions_block<'a>(theme: &Theme, title: String) -> Block<'a> {
    boxed(theme, "")
        .title(Span::styled(title, theme.title()))
        .title_bottom(Span::styled(
            " ↑/↓ PgUp/PgDn g/G scroll · Esc closes ",
            theme.dim(),
        ))
        .padding(ratatui::widgets::Padding::horizontal(1))
}

/// Where the instructions' text goes, for a terminal of this size.
pub fn instructions_inner(theme: &Theme, area: Rect) -> Rect {
    instructions_block(theme, String::new()).inner(instructions_rect(area))
}

fn draw_instructions(app: &App, scroll: u16, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let rect = instructions_rect(area);
    let title = match &app.view {
        Some(v) => format!(" Instructions — {} ", v.title),
        None => " Instructions ".to_string(),
    };
    let block = instructions_block(theme, title);
    let inner = block.inner(rect);
    let max = instructions_max_scroll(app, inner);
    let lines = match &app.instructions {
        Some(text) => instruction_lines(theme, text),
        None => vec![Line::styled("loading…", theme.dim())],
    };
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll.min(max), 0))
            .block(block),
        rect,
    );
}

fn draw_line_input(
    app: &App,
    title: &str,
    text: &str,
    enter: (&str, &str),
    frame: &mut Frame,
    area: Rect,
) {
    let theme = &app.theme;
    let width = area.width.saturating_sub(8).min(90);
    let rect = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + area.height.saturating_sub(7),
        width,
        height: 5.min(area.height),
    };
    let inner_width = width.saturating_sub(4) as usize;
    // Show the end of a long note, where the typing happens.
    let chars: Vec<char> = text.chars().collect();
    let start = chars.len().saturating_sub(inner_width.saturating_sub(1));
    let shown: String = chars[start..].iter().collect();
    let lines = vec![
        Line::from(vec![Span::raw(shown.clone())]),
        Line::raw(""),
        keys_line(theme, &[enter, ("Esc", "cancel")]),
    ];
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines)
            .block(boxed(theme, title).padding(ratatui::widgets::Padding::horizontal(1))),
        rect,
    );
    let x = rect.x + 2 + shown.chars().count() as u16;
    if x < rect.right().saturating_sub(1) {
        frame.set_cursor_position(Position::new(x, rect.y + 1));
    }
}

fn draw_pause_choice(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let lines = vec![
        Line::raw("Pause the clock? Your processes are frozen until you resume."),
        Line::raw(""),
        keys_line(
            theme,
            &[("b", "break"), ("t", "technical issue"), ("Esc", "cancel")],
        ),
    ];
    draw_box(theme, " Pause ", lines, 66, frame, area);
}

fn draw_confirm_submit(app: &App, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let mut lines = vec![
        Line::styled(
            "Submit and end the session now?",
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Line::raw(""),
    ];
    if let Some(view) = &app.view {
        let scores = view.scores.as_deref().unwrap_or(&[]);
        if !view.visible {
            lines.push(Line::raw(
                "Scores are hidden here: a final scoring run is taken and recorded.",
            ));
        } else {
            let current = match (view.final_score, view.aggregate.as_str()) {
                (Some(f), _) => format!(
                    "{}  (normalized {})",
                    format::raw(f.raw, &view.unit),
                    format::normalized(f.normalized)
                ),
                (None, _) => best_score(scores, view.lower_is_better)
                    .map(|s| score_text(s, &view.unit))
                    .unwrap_or_else(|| "no valid score yet".into()),
            };
            lines.push(Line::from(vec![
                Span::raw("The score that counts now: "),
                Span::styled(current, theme.good().add_modifier(Modifier::BOLD)),
            ]));
            let rule = if view.aggregate == "last" {
                "A final scoring run is taken now, and its result is the session's score."
            } else {
                "A final scoring run is taken now; the session's score is the best valid one."
            };
            lines.push(Line::raw(rule));
        }
        lines.push(Line::raw(format!(
            "Time left that will not be used: {}.",
            format::clock(app.remaining_s())
        )));
    }
    lines.push(Line::raw(""));
    lines.push(keys_line(
        theme,
        &[("y", "submit and end"), ("any other key", "keep working")],
    ));
    draw_box(theme, " Submit ", lines, 76, frame, area);
}

fn draw_submitting(app: &App, frame: &mut Frame, area: Rect) {
    let since = app.submitting_since_s.unwrap_or(app.now_s);
    let lines = vec![
        Line::raw(format!(
            "Taking the final score… {}",
            format::clock(app.now_s - since)
        )),
        Line::styled(
            "The clock is stopped; the summary follows.",
            app.theme.dim(),
        ),
    ];
    draw_box(&app.theme, " Submitting ", lines, 56, frame, area);
}

/// The time warning, in the tab bar right of the tabs (never over the shell).
pub fn draw_banner(app: &App, frame: &mut Frame, tabs_row: Rect) {
    let Some(banner) = app.visible_banner() else {
        return;
    };
    let left = match banner.threshold_s {
        3600 => "1 hour".to_string(),
        t => format!("{} minutes", t / 60),
    };
    let text = format!(
        " ⚠  {left} left — {} S submits; at 0:00 a final score is taken and the session ends ",
        app.prefix.key.label()
    );
    let tabs_width: u16 = app
        .tabs
        .iter()
        .enumerate()
        .map(|(i, t)| format!(" {}:{}  ", i + 1, t.label()).chars().count() as u16)
        .sum();
    let width = (text.chars().count() as u16).min(tabs_row.width.saturating_sub(tabs_width));
    let rect = Rect {
        x: tabs_row.right().saturating_sub(width),
        width,
        ..tabs_row
    };
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(Line::raw(text)).style(app.theme.banner()),
        rect,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(text: &str) -> Vec<(String, bool, bool)> {
        inline_spans(&Theme { color: true }, text)
            .into_iter()
            .map(|s| {
                let m = s.style.add_modifier;
                (
                    s.content.to_string(),
                    m.contains(Modifier::BOLD),
                    m.contains(Modifier::ITALIC),
                )
            })
            .collect()
    }

    #[test]
    fn inline_markdown_is_rendered_and_stray_markers_are_kept() {
        assert_eq!(
            rendered("Run **only** `score` *now*."),
            [
                ("Run ".to_string(), false, false),
                ("only".to_string(), true, false),
                (" ".to_string(), false, false),
                ("score".to_string(), true, false),
                (" ".to_string(), false, false),
                ("now".to_string(), false, true),
                (".".to_string(), false, false),
            ]
        );
        // Not emphasis: inside a word, unclosed, or a lone marker.
        for text in ["snake_case_name", "2*3 = 6", "a ** b", "`unclosed"] {
            let joined: String = rendered(text).into_iter().map(|(t, ..)| t).collect();
            assert_eq!(joined, text);
        }
        let lines = instruction_lines(&Theme { color: true }, "# Goal **fast**\n- use `uv`");
        let heading: String = lines[0].spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(heading, "Goal fast");
        let bullet: String = lines[1].spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(bullet, "• use uv");
    }
}
