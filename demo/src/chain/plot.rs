//! `--plot`: each run's users' success rate and db's load per second, the fault shaded.

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::args::ChainArgs;
use super::stack::Stack;
use super::summary::{SecondFigures, Summary};
use super::{limit, Result};

const FAULT: RGBColor = RGBColor(255, 160, 0);

/// Draws `runs` to the SVG at `path`: the users' success rate above, db's requests per second
/// below, with db's capacity.
pub(super) fn plot(path: &Path, args: &ChainArgs, runs: &[Summary]) -> Result<()> {
    let root = SVGBackend::new(path, (1100, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(400);
    let seconds = args.duration() as f64;
    let db_fault = args.db.fault();
    let fault = (
        db_fault.start.as_secs_f64(),
        db_fault.end.as_secs_f64().min(seconds),
    );

    let title = format!(
        "users' calls that succeeded, by the second they started ({} calls/s; {})",
        args.rps,
        db_fault.describe()
    );
    let mut success = chart(&top, &title, seconds, 105.0, "% succeeded")?;
    shade(&mut success, fault, 105.0)?;
    for run in runs {
        let color = color(run.stack);
        let points = points(&run.seconds, |s| s.success_rate.map(|rate| rate * 100.0));
        success
            .draw_series(std::iter::once(PathElement::new(
                points,
                color.stroke_width(2),
            )))?
            .label(format!(
                "{}: {:.1} % of the run",
                run.stack.name(),
                run.success_rate * 100.0
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    legend(&mut success, SeriesLabelPosition::MiddleRight)?;

    let capacity = args.db.capacity();
    let slowed = capacity * limit::capacity_share(&db_fault);
    let peak = runs
        .iter()
        .flat_map(|run| run.seconds.iter().map(|s| s.db_requests as f64))
        .fold(capacity, f64::max);
    let mut load = chart(
        &bottom,
        "requests reaching db per second",
        seconds,
        peak * 1.1,
        "requests / s",
    )?;
    shade(&mut load, fault, peak * 1.1)?;
    // What db can serve each second: less while its fault lasts.
    let (start, end) = fault;
    let capacity_line = [
        (0.0, capacity),
        (start, capacity),
        (start, slowed),
        (end, slowed),
        (end, capacity),
        (seconds, capacity),
    ];
    let gray = BLACK.mix(0.6);
    load.draw_series(std::iter::once(PathElement::new(
        capacity_line,
        gray.stroke_width(2),
    )))?
    .label("db's capacity")
    .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], gray.stroke_width(2)));
    for run in runs {
        let color = color(run.stack);
        let points = points(&run.seconds, |s| Some(s.db_requests as f64));
        load.draw_series(std::iter::once(PathElement::new(
            points,
            color.stroke_width(2),
        )))?
        .label(run.stack.name())
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    legend(&mut load, SeriesLabelPosition::UpperRight)?;
    root.present()?;
    Ok(())
}

type Chart<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn chart<'a>(
    area: &DrawingArea<SVGBackend<'a>, Shift>,
    title: &str,
    seconds: f64,
    top: f64,
    unit: &str,
) -> Result<Chart<'a>> {
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds, 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("seconds into the run")
        .y_desc(unit)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    Ok(chart)
}

fn shade(chart: &mut Chart<'_>, (start, end): (f64, f64), top: f64) -> Result<()> {
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(start, 0.0), (end, top)],
            FAULT.mix(0.15).filled(),
        )))?
        .label("db's fault")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], FAULT.mix(0.4).filled()));
    Ok(())
}

/// The legend, where the lines after the fault leave room: success runs near 0 or 100 %, db's
/// load near its calls.
fn legend(chart: &mut Chart<'_>, position: SeriesLabelPosition) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// One value per second, at the middle of its second; seconds without one are left out.
fn points(seconds: &[SecondFigures], value: fn(&SecondFigures) -> Option<f64>) -> Vec<(f64, f64)> {
    (seconds.iter().enumerate())
        .filter_map(|(i, second)| value(second).map(|v| (i as f64 + 0.5, v)))
        .collect()
}

/// One hue per library, lighter for a peer's short timeout than for its long one.
fn color(stack: Stack) -> RGBColor {
    match stack {
        Stack::Nresilience => RGBColor(20, 60, 220),
        Stack::NresilienceNoBudget => RGBColor(220, 30, 30),
        Stack::None => RGBColor(90, 90, 90),
        Stack::Reqwest1s => RGBColor(110, 200, 110),
        Stack::Reqwest5s => RGBColor(0, 120, 0),
        Stack::ReqwestRetry1s => RGBColor(230, 150, 230),
        Stack::ReqwestRetry5s => RGBColor(140, 20, 140),
        Stack::Tower1s => RGBColor(120, 210, 220),
        Stack::Tower5s => RGBColor(0, 120, 130),
        Stack::NresilienceNoOverload => RGBColor(0, 170, 255),
        Stack::TowerResilience1s => RGBColor(240, 190, 90),
        Stack::TowerResilience5s => RGBColor(180, 110, 0),
    }
}
