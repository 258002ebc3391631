//! `--plot FILE.svg`: score over time (humans vs agents, with interval bands)
//! beside score@budget bars, drawn with plotters' SVG backend.
//!
//! Without a font feature plotters sizes text with a rough per-character
//! estimate and the SVG backend writes real `<text>` elements, which the
//! viewer renders with its own sans-serif font; no font file is needed.

use std::path::Path;

use anyhow::Context;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::format::duration;
use super::model::{OVERALL, Report, SplitEstimate};
use crate::session::Kind;

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 540;
const HUMAN_COLOR: RGBColor = RGBColor(31, 119, 180);
/// Agents in turn; more agents than colours repeat them.
const AGENT_COLORS: [RGBColor; 7] = [
    RGBColor(230, 110, 20),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
];
const FONT: &str = "sans-serif";
/// Height of the legend strip above the panels (never over the data).
const LEGEND_HEIGHT: u32 = 26;

/// One plotted series: the humans, or one agent.
struct Series {
    kind: Kind,
    group: String,
    color: RGBColor,
}

impl Series {
    fn label(&self) -> String {
        match (self.kind, self.group.as_str()) {
            (Kind::Human, _) => "humans".into(),
            (Kind::Agent, "agent") => "agents (unnamed)".into(),
            (Kind::Agent, name) => format!("agent {name}"),
        }
    }
}

/// The report's groups in its order (humans first), each with its colour.
fn series(report: &Report) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for row in &report.summary {
        if out
            .iter()
            .any(|s| s.group == row.group && s.kind == row.kind)
        {
            continue;
        }
        let agents = out.iter().filter(|s| s.kind == Kind::Agent).count();
        out.push(Series {
            kind: row.kind,
            group: row.group.clone(),
            color: match row.kind {
                Kind::Human => HUMAN_COLOR,
                Kind::Agent => AGENT_COLORS[agents % AGENT_COLORS.len()],
            },
        });
    }
    out
}

pub fn write_svg(report: &Report, path: &Path) -> anyhow::Result<()> {
    let svg = render_svg(report)?;
    std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))
}

pub fn render_svg(report: &Report) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        draw(report, &root).map_err(|e| anyhow::anyhow!("cannot draw the plot: {e}"))?;
        root.present()
            .map_err(|e| anyhow::anyhow!("cannot draw the plot: {e}"))?;
    }
    Ok(svg)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

fn draw(report: &Report, root: &Area) -> DrawResult {
    root.fill(&WHITE)?;
    let title = format!(
        "rebench report: {} runs, mean normalized score (0 = starting solution, 1 = reference)",
        report.runs
    );
    root.draw(&Text::new(title, (20, 12), (FONT, 18).into_font()))?;
    let footnotes = [
        format!(
            "Bands and bars: {:.0}% percentile-bootstrap intervals ({} resamples, seed {}); \
             overall = mean over environments.",
            report.confidence * 100.0,
            report.resamples,
            report.seed
        ),
        "Score at t averages runs of budget >= t; n = the runs at each point \
         (where n falls, shorter runs left the average: the set changed, not the runs' scores)."
            .to_string(),
    ];
    for (line, text) in footnotes.into_iter().enumerate() {
        root.draw(&Text::new(
            text,
            (20, HEIGHT as i32 - 36 + 16 * line as i32),
            (FONT, 12).into_font().color(&BLACK.mix(0.7)),
        ))?;
    }
    if let Some(message) = &report.message {
        let centered =
            TextStyle::from((FONT, 24).into_font()).pos(Pos::new(HPos::Center, VPos::Center));
        root.draw(&Text::new(
            message.clone(),
            (WIDTH as i32 / 2, HEIGHT as i32 / 2),
            centered,
        ))?;
        return Ok(());
    }
    let body = root.margin(40, 44, 10, 10);
    let (legend, body) = body.split_vertically(LEGEND_HEIGHT);
    let series = series(report);
    draw_legend(&series, &legend)?;
    let (left, right) = body.split_horizontally(WIDTH * 11 / 20);
    let top = y_top(report);
    draw_timeline(report, &series, &left, top)?;
    draw_budget_bars(report, &series, &right, top)?;
    Ok(())
}

/// Swatches and names in a strip of their own, so no series hides under it.
fn draw_legend(series: &[Series], area: &Area) -> DrawResult {
    let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let mut x = 60;
    let y = LEGEND_HEIGHT as i32 / 2;
    for s in series {
        area.draw(&Rectangle::new(
            [(x, y - 5), (x + 18, y + 5)],
            s.color.filled(),
        ))?;
        let label = s.label();
        area.draw(&Text::new(label.clone(), (x + 24, y), style.clone()))?;
        x += 24 + 8 * label.chars().count() as i32 + 24;
    }
    Ok(())
}

/// One y range for both panels, so heights compare across them.
fn y_top(report: &Report) -> f64 {
    let timeline = report.timeline.iter().map(|r| r.mean.ci_high);
    let bars = report
        .best_of_k
        .iter()
        .filter_map(|r| r.best.as_ref()?.estimate.map(|e| e.ci_high));
    let highest = timeline.chain(bars).fold(1.0, f64::max);
    (highest * 1.1).max(1.1)
}

fn draw_timeline(report: &Report, series: &[Series], area: &Area, top: f64) -> DrawResult {
    // x = log2(t / first time point): the grid doubles, so its points are evenly spaced.
    let first_s = report.time_points_s.first().copied().unwrap_or(900.0);
    let position = move |t_s: f64| (t_s / first_s).log2();
    let last = report
        .time_points_s
        .last()
        .map_or(1.0, |t| position(*t).max(1.0));
    let (first, last) = (-0.25, last + 0.25);
    let mut chart = ChartBuilder::on(area)
        .caption("Score over active time", (FONT, 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(first..last, 0.0..top)?;
    // Ticks and labels only at the grid's time points (drawn below), never
    // at unlabelled in-between values.
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .disable_x_mesh()
        .x_labels(0)
        .x_desc("active time (log scale)")
        .y_desc("mean normalized score")
        .draw()?;
    let under = TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    let (dx, dy) = area.get_base_pixel();
    let plain = area.strip_coord_spec();
    for t in &report.time_points_s {
        let (x, y) = chart.backend_coord(&(position(*t), 0.0));
        plain.draw(&PathElement::new(
            vec![(x - dx, y - dy), (x - dx, y - dy + 5)],
            BLACK.stroke_width(1),
        ))?;
        plain.draw(&Text::new(
            duration(*t),
            (x - dx, y - dy + 7),
            under.clone(),
        ))?;
    }
    reference_line(&mut chart, first, last)?;
    for s in series {
        let mut rows: Vec<_> = report
            .timeline
            .iter()
            .filter(|r| r.kind == s.kind && r.group == s.group && r.environment == OVERALL)
            .collect();
        if rows.is_empty() {
            continue;
        }
        rows.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
        let color = s.color;
        let band: Vec<(f64, f64)> = rows
            .iter()
            .map(|r| (position(r.time_s), r.mean.ci_high))
            .chain(
                rows.iter()
                    .rev()
                    .map(|r| (position(r.time_s), r.mean.ci_low)),
            )
            .collect();
        chart.draw_series(std::iter::once(Polygon::new(
            band,
            color.mix(0.18).filled(),
        )))?;
        let line: Vec<(f64, f64)> = rows
            .iter()
            .map(|r| (position(r.time_s), r.mean.value))
            .collect();
        chart.draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?;
        chart.draw_series(line.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
        // How many runs each point stands on; where it falls, the set of
        // eligible runs changed (shorter runs dropped out), not the score.
        let small = (FONT, 11).into_font().color(&color);
        chart.draw_series(rows.iter().map(|r| {
            Text::new(
                format!("n={}", r.runs),
                (position(r.time_s), r.mean.value),
                small.clone().pos(Pos::new(HPos::Center, VPos::Bottom)),
            )
        }))?;
    }
    Ok(())
}

fn reference_line<DB: DrawingBackend, X: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
    from: f64,
    to: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(from, 1.0), (to, 1.0)],
        BLACK.mix(0.35).stroke_width(1),
    )))?;
    Ok(())
}

fn draw_budget_bars(report: &Report, series: &[Series], area: &Area, top: f64) -> DrawResult {
    let budgets = &report.budgets_s;
    let count = budgets.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption("score@budget (best of k runs)", (FONT, 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(-0.6..count - 0.4, 0.0..top)?;
    // Budget names are drawn under the bars below; the numeric x axis has no meaning.
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(0)
        .x_desc("total time budget")
        .y_desc("normalized score, averaged over environments")
        .draw()?;
    reference_line(&mut chart, -0.6, count - 0.4)?;
    // Each budget's 0.8 wide slot holds one bar per series.
    let width = 0.8 / series.len().max(1) as f64;
    for (position, s) in series.iter().enumerate() {
        let color = s.color;
        for (index, budget_s) in budgets.iter().enumerate() {
            let Some(best) = report
                .best_of_k
                .iter()
                .find(|r| r.kind == s.kind && r.group == s.group && r.budget_s == *budget_s)
                .and_then(|r| r.best.as_ref())
            else {
                continue;
            };
            let Some(estimate) = best.estimate else {
                continue;
            };
            let left = index as f64 - 0.4 + position as f64 * width;
            let right = left + width * 0.95;
            let middle = (left + right) / 2.0;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(left, 0.0), (right, estimate.value)],
                color.mix(0.85).filled(),
            )))?;
            let whisker = BLACK.stroke_width(1);
            chart.draw_series([
                PathElement::new(
                    vec![(middle, estimate.ci_low), (middle, estimate.ci_high)],
                    whisker,
                ),
                PathElement::new(
                    vec![
                        (middle - 0.05, estimate.ci_high),
                        (middle + 0.05, estimate.ci_high),
                    ],
                    whisker,
                ),
                PathElement::new(
                    vec![
                        (middle - 0.05, estimate.ci_low),
                        (middle + 0.05, estimate.ci_low),
                    ],
                    whisker,
                ),
            ])?;
            let above =
                TextStyle::from((FONT, 11).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
            chart.draw_series(std::iter::once(Text::new(
                bar_label(estimate.value, best),
                (middle, estimate.ci_high + top * 0.01),
                above,
            )))?;
        }
    }
    let under = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (index, budget_s) in budgets.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(index as f64, 0.0));
        let root = area.strip_coord_spec();
        let (dx, dy) = area.get_base_pixel();
        root.draw(&Text::new(
            duration(*budget_s),
            (x - dx, y - dy + 8),
            under.clone(),
        ))?;
    }
    Ok(())
}

fn bar_label(value: f64, split: &SplitEstimate) -> String {
    format!("{value:.2} ({}x{})", split.k, duration(split.run_length_s))
}
