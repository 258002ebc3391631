//! Scores as every UI shows them: which one is best, a score as one line
//! of text, and the chart of the normalized score over active time.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType};

use crate::environment::normalize::beats;
use crate::protocol::{ScoreView, SessionView};
use crate::tui::widgets::format;
use crate::tui::widgets::theme::Theme;

/// Valid scores with a value, in order (a participant's copy of a hidden
/// score has none: `protocol::filter_entry`).
pub fn valid_scores(scores: &[ScoreView]) -> impl DoubleEndedIterator<Item = &ScoreView> {
    scores
        .iter()
        .filter(|s| s.valid == Some(true) && s.normalized.is_some())
}

/// The best valid score, as the server picks a `best` final score
/// (`normalize::beats`: ties go to the better raw value, then the later).
pub fn best_score(scores: &[ScoreView], lower_is_better: bool) -> Option<&ScoreView> {
    let pair = |s: &ScoreView| (s.raw.unwrap_or(f64::NAN), s.normalized.unwrap_or(0.0));
    valid_scores(scores).fold(None, |best: Option<&ScoreView>, s| match best {
        Some(b) if !beats(pair(s), pair(b), lower_is_better) => Some(b),
        _ => Some(s),
    })
}

/// `2.30 ms  (0.000)`, or why there is no value.
pub fn score_text(score: &ScoreView, unit: &str) -> String {
    score_text_led(score, unit, Lead::Raw)
}

/// Which value a score line starts with: the participant reads their own
/// metric first, a proctor comparing sessions the normalized score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lead {
    Raw,
    Normalized,
}

/// A score as one line, led by `lead`: `2.30 ms  (0.000)` or
/// `0.000  (2.30 ms)`, else why there is no value.
pub fn score_text_led(score: &ScoreView, unit: &str, lead: Lead) -> String {
    match (score.valid, score.raw, score.normalized) {
        (Some(true), Some(raw), Some(n)) => {
            let (raw, n) = (format::raw(raw, unit), format::normalized(n));
            match lead {
                Lead::Raw => format!("{raw}  ({n})"),
                Lead::Normalized => format!("{n}  ({raw})"),
            }
        }
        // A participant's copy of a hidden score has no values at all.
        _ if score.hidden && score.valid.is_none() => "score recorded (hidden)".into(),
        (Some(false), ..) => format!("invalid: {}", score.message),
        _ => score.message.clone(),
    }
}

/// The normalized score over active time (the workspace's side panel, the proctor's detail view).
pub fn draw_chart(
    theme: &Theme,
    view: &SessionView,
    scores: &[ScoreView],
    frame: &mut Frame,
    area: Rect,
) {
    if area.height < 4 {
        return;
    }
    let hours = |s: f64| s / 3600.0;
    let points: Vec<(f64, f64)> = valid_scores(scores)
        .filter_map(|s| s.normalized.map(|n| (hours(s.active_s), n)))
        .collect();
    let budget_h = hours(view.budget_s).max(1.0 / 60.0);
    let (mut low, mut high) = (0.0f64, 1.0f64);
    for &(_, y) in &points {
        low = low.min(y);
        high = high.max(y);
    }
    let reference = [(0.0, 1.0), (budget_h, 1.0)];
    let datasets = vec![
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.dim())
            .data(&reference),
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.chart_line())
            .data(&points),
    ];
    let x_labels = vec![
        Line::raw("0"),
        Line::raw(format::human_duration(view.budget_s / 2.0)),
        Line::raw(format::human_duration(view.budget_s)),
    ];
    let y_labels = vec![
        Line::raw(format!("{low:.1}")),
        Line::raw(format!("{high:.1}")),
    ];
    let chart = Chart::new(datasets)
        .block(
            Block::default()
                .borders(Borders::TOP)
                .border_style(theme.border())
                .title(Span::styled(" normalized vs active time ", theme.dim())),
        )
        .x_axis(
            Axis::default()
                .bounds([0.0, budget_h])
                .labels(x_labels)
                .style(theme.dim()),
        )
        .y_axis(
            Axis::default()
                .bounds([low, high])
                .labels(y_labels)
                .style(theme.dim()),
        );
    frame.render_widget(chart, area);
}
