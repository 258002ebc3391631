//! Boxes drawn over a screen: centred, fitted to their lines, cleared
//! underneath. The workspace's and the proctor's dialogs and help use them.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Padding, Paragraph, Wrap};

use crate::tui::widgets::theme::Theme;

/// A centred box of at most `width`×`height` inside `area`.
pub fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// A bordered block with the focus colour and `title` (spaces included).
pub fn boxed<'a>(theme: &Theme, title: &'a str) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.focus_border())
        .title(Span::styled(title, theme.title()))
}

/// A centred box fitted to its lines (wrapped at `width`).
pub fn draw_box(
    theme: &Theme,
    title: &str,
    lines: Vec<Line>,
    width: u16,
    frame: &mut Frame,
    area: Rect,
) {
    let inner_width = width.saturating_sub(4).max(1) as usize;
    let height: usize = lines
        .iter()
        .map(|l| l.width().max(1).div_ceil(inner_width))
        .sum();
    let rect = centered(area, width, height as u16 + 2);
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(boxed(theme, title).padding(Padding::horizontal(1))),
        rect,
    );
}
