//! The detail view: who and where, this session's alerts, a read-only
//! mirror of its shells (or an agent's exec history), its scores with
//! messages and details, and its notes, pauses and extensions.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use tui_term::widget::{Cursor, PseudoTerminal};

use super::alert_list::truncate;
use super::{alert_style, fg, short_duration, state_style, state_text};
use crate::protocol::ScoreView;
use crate::session::{Phase, ScorePhase};
use crate::tui::proctor::app::App;
use crate::tui::proctor::detail::{Detail, Pane};
use crate::tui::proctor::model::Tracked;
use crate::tui::widgets::format;
use crate::tui::widgets::score::{Lead, draw_chart, score_text_led};
use crate::tui::widgets::theme::{Theme, Urgency};
use crate::tui::widgets::viewport::Viewport;

/// The scores column, when the window is wide enough for it beside a shell.
const SIDE_COLS: u16 = 60;
const SIDE_MIN_WINDOW: u16 = 120;

pub fn draw(app: &App, d: &Detail, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let Some(t) = app.fleet.get(&d.session) else {
        frame.render_widget(
            Paragraph::new(Line::styled(
                format!("session {} is not known (any more)", d.session),
                theme.dim(),
            )),
            area,
        );
        return;
    };
    let [head, alerts, tabs, body] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(1),
    ])
    .areas(area);
    draw_identity(app, t, frame, head);
    draw_session_alerts(app, t, frame, alerts);
    draw_tabs(app, d, frame, tabs);
    let (main, side) = if area.width >= SIDE_MIN_WINDOW {
        let [main, side] =
            Layout::horizontal([Constraint::Min(20), Constraint::Length(SIDE_COLS)]).areas(body);
        (main, Some(side))
    } else {
        (body, None)
    };
    match d.pane {
        Pane::Shells => draw_mirror(app, d, t, frame, main),
        Pane::Execs => {
            let [agent, execs] =
                Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(main);
            draw_agent(app, d, t, frame, agent);
            draw_execs(app, d, frame, execs);
        }
    }
    if let Some(side) = side {
        draw_side(app, d, t, frame, side);
    }
}

fn draw_identity(app: &App, t: &Tracked, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let v = &t.view;
    let remaining = t.remaining_s(app.now);
    let mut spans = vec![
        Span::styled(format!(" {} ", v.participant), theme.title()),
        Span::styled(format!("{} · ", v.id), theme.dim()),
        Span::raw(format!("{} — {} · {} · ", v.environment, v.title, v.kind)),
        Span::styled(
            state_text(v.state, v.pause_reason, v.end_reason),
            state_style(theme, v.state),
        ),
    ];
    // An ended session has no time left, only the time it used.
    if !t.ended() {
        spans.push(Span::raw(" · left "));
        spans.push(Span::styled(
            format::clock(remaining),
            theme.countdown(Urgency::of(remaining)),
        ));
        spans.push(Span::raw(format!(
            " of {}",
            format::human_duration(v.budget_s)
        )));
    } else {
        spans.push(Span::raw(format!(
            " · budget {}",
            format::human_duration(v.budget_s)
        )));
    }
    spans.push(Span::raw(format!(
        " · used {}",
        format::clock(t.active_s(app.now))
    )));
    if let Some(since) = t.active_since().filter(|_| t.running()) {
        spans.push(Span::raw(format!(
            " · idle {}",
            short_duration((app.now - since).num_seconds() as f64)
        )));
    }
    if v.scoring_since.is_some() {
        spans.push(Span::styled(" · scoring…", theme.key()));
    }
    if let Some(why) = v.waiting_for.as_ref().filter(|_| v.state == Phase::Queued) {
        let place = v
            .queue_position
            .map(|n| format!(", {} in line", crate::hardware::queue::ordinal(n)))
            .unwrap_or_default();
        spans.push(Span::styled(
            format!(" · waiting for {why}{place}"),
            theme.key(),
        ));
    }
    if let Some(grant) = v.grant.as_ref().filter(|g| !g.gpus.is_empty()) {
        // Each GPU with its use at the last sample.
        let gpus: Vec<String> = grant
            .gpus
            .iter()
            .map(|g| match v.gpu_use.iter().find(|u| u.uuid == g.uuid) {
                Some(u) => format!(
                    "{} {}% {} MiB",
                    g.index, u.utilization_pct, u.memory_used_mib
                ),
                None => g.index.to_string(),
            })
            .collect();
        let noun = if gpus.len() == 1 { "GPU" } else { "GPUs" };
        spans.push(Span::raw(format!(" · {noun} {}", gpus.join(", "))));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_session_alerts(app: &App, t: &Tracked, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let row = app.rows.iter().find(|r| r.id == t.view.id);
    let alerts = match row {
        Some(r) => r.alerts.clone(),
        None => crate::tui::proctor::alerts::session_alerts(t, &app.limits, app.now),
    };
    if alerts.is_empty() {
        frame.render_widget(
            Paragraph::new(Line::styled(" no alerts", theme.dim())),
            area,
        );
        return;
    }
    let mut spans = vec![Span::raw(" ")];
    for a in alerts {
        let acked = app.is_acknowledged(&t.view.id, &a);
        spans.push(Span::styled(
            format!("{}: ", a.kind.tag()),
            alert_style(theme, a.kind, acked),
        ));
        spans.push(Span::raw(format!(
            "{} (since {})   ",
            a.text,
            app.clock_time(a.since)
        )));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_tabs(app: &App, d: &Detail, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let mut spans = vec![Span::raw(" ")];
    for (i, m) in d.mirrors.iter().enumerate() {
        let mut label = format!(" {}:{}", i + 1, m.tab.label());
        if !m.tab.alive {
            label.push_str(" (exited)");
        } else if !m.has_driver {
            label.push_str(" (no one attached)");
        }
        label.push(' ');
        let style = if d.pane == Pane::Shells && i == d.active {
            theme.prefix_badge()
        } else {
            theme.dim()
        };
        spans.push(Span::styled(label, style));
        spans.push(Span::raw(" "));
    }
    if d.mirrors.is_empty() {
        let text = if d.shells_loaded {
            " no shells "
        } else {
            " listing shells… "
        };
        spans.push(Span::styled(text, theme.dim()));
    }
    spans.push(Span::styled("│ ", theme.border()));
    let execs_style = if d.pane == Pane::Execs {
        theme.prefix_badge()
    } else {
        theme.dim()
    };
    spans.push(Span::styled(
        format!(" exec history ({}) ", d.execs.len()),
        execs_style,
    ));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
    frame.render_widget(
        Paragraph::new(Line::styled(" read-only mirror ", theme.dim())).right_aligned(),
        area,
    );
}

fn draw_mirror(app: &App, d: &Detail, t: &Tracked, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let Some(m) = d.active_mirror() else {
        let text = if t.ended() {
            "the session has ended; its shells are closed (rebench replay shows them)"
        } else {
            "no shell to mirror yet"
        };
        frame.render_widget(Paragraph::new(Line::styled(text, theme.dim())), area);
        return;
    };
    if !m.tab.attached {
        let text = m.tab.gone.clone().unwrap_or_else(|| "attaching…".into());
        frame.render_widget(Paragraph::new(Line::styled(text, theme.dim())), area);
        return;
    }
    let screen = m.tab.parser.screen();
    let (rows, cols) = screen.size();
    let view = Viewport::follow_cursor(screen, area.width, area.height);
    let shown = Rect {
        width: area.width.min(cols),
        height: area.height.min(rows),
        ..area
    };
    // The area outside the participant's terminal is shaded, so its edge shows.
    if theme.color {
        frame.render_widget(
            Block::default().style(Style::default().bg(Color::Indexed(235))),
            area,
        );
    }
    let cursor = Cursor::default().style(Style::default().add_modifier(Modifier::REVERSED));
    frame.render_widget(PseudoTerminal::new(&view).cursor(cursor), shown);
    let mut badges = Vec::new();
    if m.tab.scrolled() > 0 {
        badges.push(format!(
            " history: {} lines back (G: live) ",
            m.tab.scrolled()
        ));
    }
    if view.cropped(area.width, area.height) {
        badges.push(format!(" {cols}×{rows} cropped "));
    }
    if let Some(gone) = &m.tab.gone {
        badges.push(format!(" {gone} "));
    }
    if !badges.is_empty() && area.height > 0 {
        let top = Rect { height: 1, ..area };
        frame.render_widget(
            Paragraph::new(Line::styled(badges.join(" "), theme.prefix_badge())).right_aligned(),
            top,
        );
    }
}

/// The agent behind the session, what its model has cost, and what it said last.
fn draw_agent(app: &App, d: &Detail, t: &Tracked, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let v = &t.view;
    let mut spans = Vec::new();
    if let Some(agent) = &v.agent {
        let model = if agent.model.is_empty() {
            String::new()
        } else {
            format!(" ({})", agent.model)
        };
        spans.push(Span::styled(
            format!(" {}{model} ", one_line(&agent.name)),
            theme.key(),
        ));
    }
    let u = &v.usage;
    spans.push(Span::styled(
        format!(
            " {} model calls · {}/{} tokens · ${:.2} ",
            u.model_calls, u.tokens_in, u.tokens_out, u.cost_usd
        ),
        theme.dim(),
    ));
    if let Some(said) = &d.last_said {
        spans.push(Span::raw(format!(" {}", one_line(said))));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_execs(app: &App, d: &Detail, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    if d.execs.is_empty() {
        let text = if d.events_loaded {
            "no exec yet"
        } else {
            "reading the event log…"
        };
        frame.render_widget(Paragraph::new(Line::styled(text, theme.dim())), area);
        return;
    }
    let list_rows = (area.height / 2).max(3).min(d.execs.len() as u16 + 1);
    let [list, output] =
        Layout::vertical([Constraint::Length(list_rows), Constraint::Min(1)]).areas(area);
    let rows = list.height as usize;
    let first = d.exec_selected.saturating_sub(rows.saturating_sub(1));
    let lines: Vec<Line> = d
        .execs
        .iter()
        .rev()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, e)| {
            let r = &e.record;
            let (status, style) = exec_status(theme, r);
            let mut line = Line::from(vec![
                Span::styled(format!(" {} ", app.clock_time(e.at)), theme.dim()),
                Span::styled(format!("{status:<9}"), style),
                Span::styled(format!("{:>7} ", format_ms(r.duration_ms)), theme.dim()),
                Span::raw(format!("$ {}", one_line(&r.command))),
            ]);
            if i == d.exec_selected {
                line = line.style(Style::default().add_modifier(Modifier::REVERSED));
            }
            line
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), list);
    let Some(e) = d.selected_exec() else {
        return;
    };
    let r = &e.record;
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(theme.border())
        .title(Span::styled(
            format!(" output · cwd {} ", r.cwd),
            theme.dim(),
        ));
    let inner = block.inner(output);
    frame.render_widget(block, output);
    let mut text: Vec<Line> = Vec::new();
    text.push(Line::styled(format!("$ {}", r.command), theme.key()));
    for line in r.stdout.lines() {
        text.push(Line::raw(line.to_string()));
    }
    if r.stdout_truncated {
        text.push(Line::styled("… stdout truncated", theme.dim()));
    }
    for line in r.stderr.lines() {
        text.push(Line::styled(line.to_string(), theme.bad()));
    }
    if r.stderr_truncated {
        text.push(Line::styled("… stderr truncated", theme.dim()));
    }
    // The end of the output is what matters: show the last lines that fit.
    let skip = text.len().saturating_sub(inner.height as usize);
    let shown: Vec<Line> = text.into_iter().skip(skip).collect();
    frame.render_widget(Paragraph::new(shown), inner);
}

fn exec_status(theme: &Theme, r: &crate::session::event::ExecRecord) -> (String, Style) {
    if r.timed_out {
        return ("timed out".into(), theme.bad());
    }
    match (r.exit_code, r.signal) {
        (_, Some(s)) => (format!("signal {s}"), theme.bad()),
        (Some(0), None) => ("✓ 0".into(), theme.good()),
        (Some(c), None) => (format!("✗ {c}"), theme.bad()),
        (None, None) => ("?".into(), theme.dim()),
    }
}

fn format_ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

/// Agent-written text on one line, its control characters made visible.
fn one_line(text: &str) -> String {
    crate::command_line::printable(&text.replace('\n', " ⏎ ").replace('\t', " "))
}

fn draw_side(app: &App, d: &Detail, t: &Tracked, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let block = Block::default()
        .borders(Borders::LEFT)
        .border_style(theme.border())
        .title(Span::styled(" Scores ", theme.title()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let timeline = timeline(app, t);
    // Entries wrap: give the section the rows they take (up to a third).
    let width = inner.width.max(1) as usize;
    let wrapped: usize = timeline
        .iter()
        .map(|(_, line)| line.width().max(1).div_ceil(width))
        .sum();
    let timeline_rows = (wrapped as u16 + 1).min(inner.height / 3).max(2);
    let chart_rows = if inner.height >= 30 { 10 } else { 7 };
    let [summary, chart, log, notes] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(chart_rows),
        Constraint::Min(3),
        Constraint::Length(timeline_rows),
    ])
    .areas(inner);
    draw_summary(app, t, frame, summary);
    // Proctors' copies of hidden scores have their values: charted too.
    draw_chart(theme, &t.view, &t.scores, frame, chart);
    draw_log(app, d, t, frame, log);
    draw_timeline(app, timeline, frame, notes);
}

fn draw_summary(app: &App, t: &Tracked, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let v = &t.view;
    let score = |s: &ScoreView| score_text_led(s, &v.unit, Lead::Normalized);
    let best = t.best().map(score).unwrap_or_else(|| "none yet".into());
    let last = t
        .scores
        .last()
        .map(score)
        .unwrap_or_else(|| "none yet".into());
    let mut lines = vec![
        Line::from(vec![
            Span::styled("best  ", theme.dim()),
            Span::styled(best, theme.good().add_modifier(Modifier::BOLD)),
        ]),
        Line::from(vec![Span::styled("last  ", theme.dim()), Span::raw(last)]),
    ];
    let mut info = format!(
        "{} ({}), {} · {} runs",
        v.metric,
        v.unit,
        v.aggregate,
        t.scores.len()
    );
    if !v.visible {
        info.push_str(" · hidden from the participant");
    }
    lines.push(Line::styled(info, theme.dim()));
    frame.render_widget(Paragraph::new(lines), area);
}

/// The score log, newest first: value, message, and the scorer's details.
fn draw_log(app: &App, d: &Detail, t: &Tracked, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(theme.border())
        .title(Span::styled(
            " score log (newest first, PgUp/PgDn) ",
            theme.dim(),
        ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if t.scores.is_empty() {
        let text = if t.scores_loaded {
            "no scores yet"
        } else {
            "reading…"
        };
        frame.render_widget(Paragraph::new(Line::styled(text, theme.dim())), inner);
        return;
    }
    let width = inner.width.saturating_sub(9) as usize;
    let mut lines = Vec::new();
    for s in t.scores.iter().rev() {
        let time = if s.phase == ScorePhase::Starting {
            "start".to_string()
        } else {
            format::clock(s.active_s)
        };
        let mut spans = vec![Span::styled(format!("{time:>7} "), theme.dim())];
        match (s.valid, s.normalized) {
            (Some(true), Some(n)) => {
                spans.push(Span::styled(
                    format!("{} ", format::normalized(n)),
                    theme.good(),
                ));
                if let Some(raw) = s.raw {
                    spans.push(Span::raw(format!("{} ", format::raw(raw, &t.view.unit))));
                }
                spans.push(Span::styled(s.message.clone(), theme.dim()));
            }
            _ => {
                spans.push(Span::styled("✗ ", theme.bad()));
                spans.push(Span::raw(s.message.clone()));
            }
        }
        if s.phase == ScorePhase::Final {
            spans.push(Span::styled(" (final)", theme.key()));
        }
        lines.push(Line::from(spans));
        if let Some(details) = s.details.as_ref().filter(|v| !v.is_null()) {
            let text = serde_json::to_string(details).unwrap_or_default();
            lines.push(Line::styled(
                format!("        {}", truncate(&text, width)),
                fg(theme, Color::DarkGray),
            ));
        }
    }
    let scroll = d.score_scroll.min(lines.len().saturating_sub(1));
    let shown: Vec<Line> = lines.into_iter().skip(scroll).collect();
    frame.render_widget(Paragraph::new(shown), inner);
}

/// Notes, pauses and extensions, newest first.
fn timeline(app: &App, t: &Tracked) -> Vec<(DateTime<Utc>, Line<'static>)> {
    let theme = &app.theme;
    let v = &t.view;
    let mut items: Vec<(DateTime<Utc>, Line<'static>)> = Vec::new();
    let stamp = |at: DateTime<Utc>| Span::styled(format!("{} ", app.clock_time(at)), theme.dim());
    // The starting score's pause, before the clock started, is no news.
    let started = v.started_at.unwrap_or(DateTime::<Utc>::MAX_UTC);
    for p in v.pauses.iter().filter(|p| p.start >= started) {
        let how_long = match p.end {
            Some(end) => format::human_duration((end - p.start).num_seconds() as f64),
            None => "ongoing".into(),
        };
        let mut text = format!("{} by {} ({how_long})", p.reason.label(), p.by);
        if let Some(note) = &p.note {
            text.push_str(&format!(": {note}"));
        }
        items.push((
            p.start,
            Line::from(vec![
                stamp(p.start),
                Span::styled("pause  ", fg(theme, Color::Yellow)),
                Span::raw(text),
            ]),
        ));
    }
    for e in &v.extensions {
        items.push((
            e.at,
            Line::from(vec![
                stamp(e.at),
                Span::styled("extend ", theme.key()),
                Span::raw(format!(
                    "+{} by {}: {}",
                    format::human_duration(e.by_s),
                    e.by,
                    e.reason
                )),
            ]),
        ));
    }
    for n in &v.notes {
        items.push((
            n.at,
            Line::from(vec![
                stamp(n.at),
                Span::styled("note   ", theme.title()),
                Span::raw(format!("{}: {}", n.by, n.text)),
            ]),
        ));
    }
    items.sort_by_key(|item| std::cmp::Reverse(item.0));
    items
}

fn draw_timeline(
    app: &App,
    items: Vec<(DateTime<Utc>, Line<'static>)>,
    frame: &mut Frame,
    area: Rect,
) {
    let theme = &app.theme;
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(theme.border())
        .title(Span::styled(" notes · pauses · extensions ", theme.dim()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if items.is_empty() {
        frame.render_widget(Paragraph::new(Line::styled("none", theme.dim())), inner);
        return;
    }
    let lines: Vec<Line> = items.into_iter().map(|(_, l)| l).collect();
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}
