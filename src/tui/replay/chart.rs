//! The score chart, synced to the playhead: scores so far in colour, later
//! ones dimmed, and a vertical line at the playhead.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::symbols;
use ratatui::text::Line;
use ratatui::widgets::{Axis, Block, Chart, Dataset, GraphType};

use crate::recording::timeline::{Ms, Timeline, clock_text};

pub fn render(timeline: &Timeline, position: Ms, area: Rect, frame: &mut Frame) {
    let points: Vec<(f64, f64)> = timeline
        .scores
        .iter()
        .filter(|s| s.valid)
        .filter_map(|s| Some((s.t as f64 / 1000.0, s.normalized.filter(|v| v.is_finite())?)))
        .collect();
    let now = position as f64 / 1000.0;
    let split = points.partition_point(|(t, _)| *t <= now);
    let (past, future) = points.split_at(split);
    let lo = points.iter().map(|p| p.1).fold(0.0_f64, f64::min);
    let hi = points.iter().map(|p| p.1).fold(1.0_f64, f64::max);
    let end = (timeline.duration() as f64 / 1000.0).max(1.0);
    let playhead = [(now, lo), (now, hi)];
    let best = past
        .iter()
        .map(|p| p.1)
        .fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.max(v))));
    let title = match best {
        Some(b) => format!(" score · best so far {b:.3} "),
        None => " score · none yet ".to_string(),
    };
    let datasets = vec![
        Dataset::default()
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(Color::Yellow))
            .data(&playhead),
        Dataset::default()
            .marker(symbols::Marker::Dot)
            .graph_type(GraphType::Scatter)
            .style(Style::default().fg(Color::DarkGray))
            .data(future),
        Dataset::default()
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(Color::Green))
            .data(past),
    ];
    let chart = Chart::new(datasets)
        .block(Block::bordered().title(title))
        .x_axis(
            Axis::default()
                .bounds([0.0, end])
                .labels([
                    Line::from("0:00"),
                    Line::from(clock_text(timeline.duration())),
                ])
                .style(Style::default().fg(Color::DarkGray)),
        )
        .y_axis(
            Axis::default()
                .bounds([lo, hi])
                .labels([
                    Line::from(format!("{lo:.1}")),
                    Line::from(format!("{hi:.1}")),
                ])
                .style(Style::default().fg(Color::DarkGray)),
        );
    frame.render_widget(chart, area);
}
