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
const AGENT_COLOR: RGBColor = RGBColor(230, 110, 20);
const FONT: &str = "sans-serif";

fn color(kind: Kind) -> RGBColor {
    match kind {
        Kind::Human => HUMAN_COLOR,
        Kind::Agent => AGENT_COLOR,
    }
}

fn label(kind: Kind) -> &'static str {
    match kind {
        Kind::Human => "humans",
        Kind::Agent => "agents",
    }
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
    let (left, right) = body.split_horizontally(WIDTH * 11 / 20);
    let top = y_top(report);
    draw_timeline(report, &left, top)?;
    draw_budget_bars(report, &right, top)?;
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

fn draw_timeline(report: &Report, area: &Area, top: f64) -> DrawResult {
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
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(report.time_points_s.len().max(2) * 2)
        .x_desc("active time (log scale)")
        .y_desc("mean normalized score")
        .x_label_formatter(&|x| {
            // Labels only at whole doublings, where the grid's points are.
            if (x - x.round()).abs() < 1e-6 && *x > -0.5 {
                duration(first_s * 2f64.powf(x.round()))
            } else {
                String::new()
            }
        })
        .draw()?;
    reference_line(&mut chart, first, last)?;
    for kind in Kind::BOTH {
        let mut rows: Vec<_> = report
            .timeline
            .iter()
            .filter(|r| r.kind == kind && r.environment == OVERALL)
            .collect();
        if rows.is_empty() {
            continue;
        }
        rows.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
        let color = color(kind);
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
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
            .label(label(kind))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
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
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
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

fn draw_budget_bars(report: &Report, area: &Area, top: f64) -> DrawResult {
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
    for (kind, offset) in [(Kind::Human, -0.4), (Kind::Agent, 0.02)] {
        let color = color(kind);
        let mut labelled = false;
        for (index, budget_s) in budgets.iter().enumerate() {
            let Some(best) = report
                .best_of_k
                .iter()
                .find(|r| r.kind == kind && r.budget_s == *budget_s)
                .and_then(|r| r.best.as_ref())
            else {
                continue;
            };
            let Some(estimate) = best.estimate else {
                continue;
            };
            let left = index as f64 + offset;
            let right = left + 0.38;
            let middle = (left + right) / 2.0;
            let bar = chart.draw_series(std::iter::once(Rectangle::new(
                [(left, 0.0), (right, estimate.value)],
                color.mix(0.85).filled(),
            )))?;
            if !labelled {
                bar.label(label(kind)).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled())
                });
                labelled = true;
            }
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
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}

fn bar_label(value: f64, split: &SplitEstimate) -> String {
    format!("{value:.2} ({}x{})", split.k, duration(split.run_length_s))
}
