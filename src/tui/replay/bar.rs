//! The timeline bar: a row of marker symbols above a progress row where
//! paused stretches are dotted and the playhead is a dot.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};

use crate::recording::timeline::{MarkerKind, Ms, Timeline};

pub fn render(timeline: &Timeline, position: Ms, area: Rect, buf: &mut Buffer) {
    if area.width < 2 || area.height == 0 {
        return;
    }
    let duration = timeline.duration().max(1);
    let width = u64::from(area.width);
    let column = |t: Ms| (t.min(duration) * (width - 1) / duration) as u16;
    let played = column(position);
    let progress_row = area.y + area.height - 1;
    for x in 0..area.width {
        let t = u64::from(x) * duration / (width - 1);
        let (symbol, color) = if timeline.paused_at(t) {
            ("┄", Color::DarkGray)
        } else if x <= played {
            ("━", Color::Cyan)
        } else {
            ("─", Color::DarkGray)
        };
        buf[(area.x + x, progress_row)]
            .set_symbol(symbol)
            .set_style(Style::default().fg(color));
    }
    buf[(area.x + played, progress_row)]
        .set_symbol("●")
        .set_style(
            Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        );
    if area.height < 2 {
        return;
    }
    let marker_row = progress_row - 1;
    // Scores are drawn last so they win a shared column.
    let mut markers: Vec<_> = timeline.markers.iter().collect();
    markers.sort_by_key(|m| (m.kind == MarkerKind::Score, m.t));
    for m in markers {
        let x = area.x + column(m.t);
        let past = m.t <= position;
        let color = match m.kind {
            MarkerKind::Score => Color::Green,
            MarkerKind::Pause | MarkerKind::Resume => Color::Blue,
            MarkerKind::Warning | MarkerKind::End => Color::Red,
            MarkerKind::Extension => Color::Magenta,
            _ => Color::White,
        };
        let mut style = Style::default().fg(color);
        if !past {
            style = style.add_modifier(Modifier::DIM);
        }
        buf[(x, marker_row)]
            .set_symbol(&m.kind.symbol().to_string())
            .set_style(style);
    }
}
