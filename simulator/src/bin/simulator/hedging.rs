//! `simulator --hedge p95`: SPEC S1's dependency healthy and through its brownout, each
//! with and without hedging, budget off and on (SPEC HG1, HG2). What a hedge buys is the tail
//! of latency; what it costs is load, and in a brownout the budget is what holds that load.

use std::time::Instant;

use nresilience_core::{Hedge, RetryPolicy};
use serde_json::json;
use simulator::{Load, Simulation, SimulationReport};

use super::{ceiling, dependency, healthy, on_off, policy, storm, worst_second, Args, Result};

/// The dependency's weather for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Weather {
    Healthy,
    Brownout,
}

impl Weather {
    fn name(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Brownout => "brownout",
        }
    }
}

/// One run and its settings.
struct Run {
    weather: Weather,
    budget: bool,
    hedged: bool,
    report: SimulationReport,
}

pub(super) fn main(args: &Args, hedge: Hedge) -> Result<()> {
    let trigger = describe(hedge);
    if !args.json {
        println!(
            "hedging at {trigger}, healthy and through the brownout: {}",
            storm(args)
        );
        println!(
            "{:<9} {:<6} {:<7} {:>7} {:>12} {:>10} {:>13} {:>12} {:>8} {:>8} {:>8} {:>8}",
            "weather",
            "budget",
            "hedge",
            "calls",
            "availability",
            "load mult",
            "amplification",
            "worst second",
            "p50",
            "p99",
            "p99.9",
            "refusals",
        );
    }
    let mut runs = Vec::new();
    for weather in [Weather::Healthy, Weather::Brownout] {
        for &budget in args.budget.budgets() {
            for hedged in [false, true] {
                let run = simulate(args, weather, budget, hedged.then_some(hedge))?;
                if args.json {
                    println!("{}", to_json(args, &trigger, &run));
                } else {
                    print_row(&run, &trigger);
                }
                runs.push(run);
            }
        }
    }
    if let Some(path) = &args.plot {
        plot(path, args, &trigger, &runs)?;
        if !args.json {
            println!("chart written to {}", path.display());
        }
    }
    Ok(())
}

/// `p95`, or the fixed delay.
fn describe(hedge: Hedge) -> String {
    match (hedge.quantile(), hedge.delay()) {
        (Some(q), _) => format!("p{}", q * 100.0),
        (None, Some(delay)) => format!("{delay:?}"),
        (None, None) => "?".to_owned(),
    }
}

fn simulate(args: &Args, weather: Weather, budget: bool, hedge: Option<Hedge>) -> Result<Run> {
    let dependency = match weather {
        Weather::Brownout => dependency(args),
        // The same dependency, slowed by nothing.
        Weather::Healthy => healthy(args),
    };
    let policy: RetryPolicy = policy(ceiling(args.ceiling_refresh, args.ceiling_learns), budget)?
        .to_builder()
        .hedge(hedge)
        .build()?;
    let started = Instant::now();
    let report = Simulation::policy(policy)
        .against(dependency)
        .under(Load::constant(args.rate))
        .for_duration(args.duration)
        .run(args.seed)?;
    // Wall time varies run to run; stdout stays byte-identical for one seed (S2).
    eprintln!("simulated in {:.1}s", started.elapsed().as_secs_f64());
    Ok(Run {
        weather,
        budget,
        hedged: hedge.is_some(),
        report,
    })
}

fn hedge_name(run: &Run, trigger: &str) -> String {
    if run.hedged {
        trigger.to_owned()
    } else {
        "none".to_owned()
    }
}

fn print_row(run: &Run, trigger: &str) {
    let r = &run.report;
    println!(
        "{:<9} {:<6} {:<7} {:>7} {:>12.4} {:>10.3} {:>13.3} {:>12} {:>8} {:>8} {:>8} {:>8}",
        run.weather.name(),
        on_off(run.budget),
        hedge_name(run, trigger),
        r.calls,
        r.availability(),
        r.load_multiplier(),
        r.amplification,
        worst_second(r),
        millis(r, 0.5),
        millis(r, 0.99),
        millis(r, 0.999),
        r.budget_refusals,
    );
}

/// The calls' latency at `q`, in whole milliseconds (the simulated clock's tick).
fn millis(report: &SimulationReport, q: f64) -> String {
    format!("{}ms", report.latency(q).as_millis())
}

fn to_json(args: &Args, trigger: &str, run: &Run) -> serde_json::Value {
    let r = &run.report;
    let ms = |q: f64| r.latency(q).as_secs_f64() * 1e3;
    json!({
        "seed": r.seed,
        "weather": run.weather.name(),
        "budget": on_off(run.budget),
        "hedge": hedge_name(run, trigger),
        "rate": args.rate,
        "duration_s": r.duration.as_secs_f64(),
        "calls": r.calls,
        "availability": r.availability(),
        "attempts": r.attempts,
        "load_multiplier": r.load_multiplier(),
        "amplification": r.amplification,
        "worst_second_s": r.worst_second.map(|at| at.as_secs()),
        "latency_p50_ms": ms(0.5),
        "latency_p99_ms": ms(0.99),
        "latency_p999_ms": ms(0.999),
        "budget_refusals": r.budget_refusals,
    })
}

/// Two panels: each run's latency at p50, p99 and p99.9 (log scale), and its load multiplier.
fn plot(path: &std::path::Path, args: &Args, trigger: &str, runs: &[Run]) -> Result<()> {
    use plotters::prelude::*;

    const QUANTILES: [(f64, &str); 3] = [(0.5, "p50"), (0.99, "p99"), (0.999, "p99.9")];
    let root = SVGBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!(
            "hedging at {trigger}: latency and load, healthy and through the brownout ({} calls/s, seed {})",
            args.rate, args.seed
        ),
        ("sans-serif", 20),
    )?;
    let (left, right) = root.split_horizontally(640);
    let slowest = runs
        .iter()
        .map(|run| run.report.latency(0.999).as_secs_f64() * 1e3)
        .fold(1.0, f64::max);
    let mut latency = ChartBuilder::on(&left)
        .caption("call latency (ms, log scale)", ("sans-serif", 16))
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (0usize..QUANTILES.len() - 1).into_segmented(),
            (5f64..slowest * 1.5).log_scale(),
        )?;
    latency
        .configure_mesh()
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                QUANTILES.get(*i).map_or("", |q| q.1).to_owned()
            }
            SegmentValue::Last => String::new(),
        })
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    let palette = [
        BLACK,
        RED,
        BLUE,
        MAGENTA,
        CYAN,
        GREEN,
        RGBColor(255, 140, 0),
        RGBColor(120, 60, 0),
    ];
    for (run, color) in runs.iter().zip(palette.iter()) {
        let points: Vec<_> = (QUANTILES.iter().enumerate())
            .map(|(i, (q, _))| {
                (
                    SegmentValue::CenterOf(i),
                    run.report.latency(*q).as_secs_f64() * 1e3,
                )
            })
            .collect();
        let color = *color;
        let style = if run.hedged {
            color.stroke_width(3)
        } else {
            color.stroke_width(1)
        };
        latency
            .draw_series(std::iter::once(PathElement::new(points, style)))?
            .label(format!(
                "{}, budget {}, hedge {}",
                run.weather.name(),
                on_off(run.budget),
                hedge_name(run, trigger)
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], style));
    }
    latency
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;

    let most = runs
        .iter()
        .map(|run| run.report.load_multiplier().max(run.report.amplification))
        .fold(1.0, f64::max);
    let mut load = ChartBuilder::on(&right)
        .caption(
            "load multiplier (bars) and worst second (dots); colours as on the left",
            ("sans-serif", 16),
        )
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..runs.len() as f64, 0.9f64..most * 1.05)?;
    load.configure_mesh()
        .x_labels(0)
        .y_label_formatter(&|y| format!("{y:.2}×"))
        .draw()?;
    for (i, (run, color)) in runs.iter().zip(palette.iter()).enumerate() {
        let x = i as f64;
        load.draw_series(std::iter::once(Rectangle::new(
            [(x + 0.15, 0.9), (x + 0.85, run.report.load_multiplier())],
            color.mix(0.5).filled(),
        )))?;
        load.draw_series(std::iter::once(Circle::new(
            (x + 0.5, run.report.amplification),
            5,
            color.filled(),
        )))?;
    }
    root.present()?;
    Ok(())
}
