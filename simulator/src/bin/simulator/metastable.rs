//! `simulator --scenario metastable`: SPEC D3's metastable failure in virtual time. A
//! database with a fixed pool of workers behind a bounded queue, which finishes work its
//! callers have left, is slowed for a few seconds; the runs show whether its callers' retries
//! keep it saturated after the slowdown ends or let it drain, with the budget off and on, and
//! with each of the two measured attempt ceilings: ours, which learns from the attempts it
//! cuts (SPEC E7), and the original library's, frozen for 75 s and fed by successes only.
//!
//! The constants are fixed, and chosen before any run for the reason given with each; see the
//! section "A metastable failure (SPEC D3)" of `docs/simulation.md`.

use std::path::Path;
use std::time::{Duration, Instant};

use nresilience_core::overload::{LimitAlgorithm, OverloadControl};
use nresilience_core::AttemptCeiling;
use serde_json::json;
use simulator::{Dependency, Load, Second, Simulation, SimulationReport};

use super::{on_off, policy, Args, OverloadSetting, Result};

/// The two measured attempt ceilings the runs compare, as the demo's `--ceiling` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ceiling {
    /// Refitted every second, learning from the attempts it cuts (the library's default).
    Learning,
    /// The original library's: refitted once per 75 s slice, fed by successes only.
    Original,
}

impl Ceiling {
    const ALL: [Self; 2] = [Self::Learning, Self::Original];

    const fn name(self) -> &'static str {
        match self {
            Self::Learning => "learning",
            Self::Original => "original",
        }
    }

    const fn settings(self) -> AttemptCeiling {
        match self {
            Self::Learning => AttemptCeiling::new(),
            Self::Original => AttemptCeiling::original(),
        }
    }
}

/// Calls per second from the users: the demo chain's default `--rps`.
const RATE: f64 = 200.0;
/// The database's healthy service time: SPEC S1's dependency, whose mean (with its capped
/// log-logistic tail) is about 31 ms.
const P50: Duration = Duration::from_millis(20);
const P99: Duration = Duration::from_millis(200);
/// Workers: the load keeps 200 × 31 ms ≈ 6.3 of them busy on average, so 12 make a database
/// healthy at about half its capacity (some 380 queries a second).
const WORKERS: u32 = 12;
/// The queue holds about what the workers serve in a second when healthy (12 / 31 ms ≈ 380,
/// rounded up): a full queue is a second's wait.
const QUEUE: u32 = 400;
/// The trigger: five times slower for five seconds (the long variant: twenty), once the
/// callers' latency estimates have had half a minute of healthy traffic (as S1's brownout
/// has).
const TRIGGER_AT: Duration = Duration::from_secs(30);
const TRIGGER_SLOWER: f64 = 5.0;
pub(super) const TRIGGER_LASTING: Duration = Duration::from_secs(5);
pub(super) const LONG_TRIGGER_LASTING: Duration = Duration::from_secs(20);
/// Long enough after the trigger to tell a slow recovery from none: 85 seconds.
const DURATION: Duration = Duration::from_secs(120);
/// A second is back to normal at this success rate (SPEC D4).
const RECOVERED: f64 = 0.99;

/// One run of the scenario, with the figures D4 asks for.
struct Run {
    ceiling: Ceiling,
    budget: bool,
    /// Overload control's algorithm, when on (O1, O2).
    overload: Option<LimitAlgorithm>,
    /// How long the trigger lasts.
    lasting: Duration,
    report: SimulationReport,
    figures: Figures,
}

/// What one run says about the failure.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Figures {
    before: f64,
    during: f64,
    after: f64,
    /// Seconds from the trigger's end to the first second at [`RECOVERED`]; `None`: not
    /// within the run.
    recovered_in: Option<u64>,
    /// The worst second's attempts per call, and when it began.
    worst_load: f64,
    worst_second: Option<u64>,
    /// The longest queue, and the second it was seen in.
    peak_queue: u64,
    peak_queue_second: u64,
    /// Attempts the full queue refused, all run long.
    shed: u64,
}

/// The database of the scenario.
fn dependency(lasting: Duration) -> Dependency {
    Dependency::healthy(P50, P99)
        .brownout(TRIGGER_AT, TRIGGER_SLOWER, lasting)
        .workers(WORKERS, QUEUE)
}

pub(super) fn main(args: &Args, lasting: Duration) -> Result<()> {
    let budgets = args.budget.budgets();
    let overloads = args.overload_settings(&[OverloadSetting::Off, OverloadSetting::Accumulation]);
    if !args.json {
        println!(
            "metastable: {RATE} calls/s for {DURATION:?} against a db of {WORKERS} workers and a queue of {QUEUE} \
             (p50 {P50:?} / p99 {P99:?}), {TRIGGER_SLOWER}× slower from {TRIGGER_AT:?} for {lasting:?}; seed {}",
            args.seed,
        );
        println!(
            "{:<9} {:<6} {:<9} {:>7} {:>8} {:>8} {:>8} {:>14} {:>18} {:>16} {:>7} {:>8} {:>9}",
            "ceiling",
            "budget",
            "overload",
            "calls",
            "before",
            "during",
            "after",
            "recovered in",
            "worst second load",
            "peak queue",
            "shed",
            "refusals",
            "saturated",
        );
    }
    let mut runs = Vec::new();
    for (ceiling, &budget, &overload) in Ceiling::ALL
        .into_iter()
        .flat_map(|c| budgets.iter().map(move |b| (c, b)))
        .flat_map(|(c, b)| overloads.iter().map(move |o| (c, b, o)))
    {
        let started = Instant::now();
        let control = overload.map(|algorithm| OverloadControl::new().algorithm(algorithm));
        let policy = policy(ceiling.settings(), budget)?
            .to_builder()
            .overload_control(control)
            .build()?;
        let report = Simulation::policy(policy)
            .against(dependency(lasting))
            .under(Load::constant(RATE))
            .for_duration(DURATION)
            .run(args.seed)?;
        let run = Run {
            ceiling,
            budget,
            overload,
            lasting,
            figures: Figures::of(&report, lasting),
            report,
        };
        if args.json {
            println!("{}", to_json(&run));
        } else {
            print_row(&run);
            // Wall time varies run to run; stdout stays byte-identical for one seed (S2).
            eprintln!("simulated in {:.1}s", started.elapsed().as_secs_f64());
        }
        runs.push(run);
    }
    if let Some(path) = &args.plot {
        plot(path, args, &runs)?;
        if !args.json {
            println!("chart written to {}", path.display());
        }
    }
    Ok(())
}

// ===== impl Figures =====

impl Figures {
    fn of(report: &SimulationReport, lasting: Duration) -> Self {
        let start = whole_seconds(TRIGGER_AT);
        let end = whole_seconds(TRIGGER_AT + lasting);
        let in_run = whole_seconds(DURATION);
        let seconds = &report.seconds[..report.seconds.len().min(in_run)];
        let (peak_queue_second, peak_queue) = seconds
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.queue))
            // The earliest of equal peaks.
            .fold(
                (0, 0),
                |best, next| if next.1 > best.1 { next } else { best },
            );
        Self {
            before: availability(seconds, 0..start),
            during: availability(seconds, start..end),
            after: availability(seconds, end..in_run),
            recovered_in: (end..seconds.len())
                .find(|&i| success(seconds[i].calls, seconds[i].failed) >= RECOVERED)
                .map(|i| (i - end) as u64),
            worst_load: report.amplification,
            worst_second: report.worst_second.map(|at| at.as_secs()),
            peak_queue,
            peak_queue_second: peak_queue_second as u64,
            shed: report.seconds.iter().map(|s| s.shed).sum(),
        }
    }

    fn recovered(&self) -> String {
        self.recovered_in
            .map_or_else(|| "not recovered".to_owned(), |s| format!("{s}s"))
    }
}

/// A row's overload control: `off`, or its algorithm.
pub(super) fn overload_name(overload: Option<LimitAlgorithm>) -> &'static str {
    overload.map_or("off", LimitAlgorithm::name)
}

fn whole_seconds(at: Duration) -> usize {
    usize::try_from(at.as_secs()).unwrap_or(usize::MAX)
}

/// Succeeded / calls of the calls started in `range` of the run's seconds.
fn availability(seconds: &[Second], range: std::ops::Range<usize>) -> f64 {
    let slice = seconds.get(range).unwrap_or_default();
    let calls: u64 = slice.iter().map(|s| s.calls).sum();
    let failed: u64 = slice.iter().map(|s| s.failed).sum();
    success(calls, failed)
}

/// The share of `calls` that did not fail; a second without calls counts as a good one.
fn success(calls: u64, failed: u64) -> f64 {
    if calls == 0 {
        1.0
    } else {
        1.0 - failed as f64 / calls as f64
    }
}

fn print_row(run: &Run) {
    let f = &run.figures;
    println!(
        "{:<9} {:<6} {:<9} {:>7} {:>8.4} {:>8.4} {:>8.4} {:>14} {:>18} {:>16} {:>7} {:>8} {:>9}",
        run.ceiling.name(),
        on_off(run.budget),
        overload_name(run.overload),
        run.report.calls,
        f.before,
        f.during,
        f.after,
        f.recovered(),
        format!(
            "{:.2}× ({})",
            f.worst_load,
            f.worst_second
                .map_or_else(|| "-".to_owned(), |s| format!("{s}s"))
        ),
        format!("{} ({}s)", f.peak_queue, f.peak_queue_second),
        f.shed,
        run.report.budget_refusals,
        run.report.saturated,
    );
}

fn to_json(run: &Run) -> serde_json::Value {
    let (r, f) = (&run.report, &run.figures);
    json!({
        "scenario": "metastable",
        "seed": r.seed,
        "ceiling": run.ceiling.name(),
        "budget": on_off(run.budget),
        "overload": overload_name(run.overload),
        "saturated": r.saturated,
        "rate": RATE,
        "duration_s": DURATION.as_secs_f64(),
        "workers": WORKERS,
        "queue": QUEUE,
        "trigger": {
            "after_s": TRIGGER_AT.as_secs_f64(),
            "slower": TRIGGER_SLOWER,
            "lasting_s": run.lasting.as_secs_f64(),
        },
        "calls": r.calls,
        "succeeded": r.succeeded,
        "attempts": r.attempts,
        "availability": r.availability(),
        "availability_before": f.before,
        "availability_during": f.during,
        "availability_after": f.after,
        "recovered_in_s": f.recovered_in,
        "worst_second_load": f.worst_load,
        "worst_second_s": f.worst_second,
        "peak_queue": f.peak_queue,
        "peak_queue_second_s": f.peak_queue_second,
        "shed": f.shed,
        "attempts_cut": r.attempts_cut,
        "budget_refusals": r.budget_refusals,
        "calls_per_second": r.seconds.iter().map(|s| s.calls).collect::<Vec<_>>(),
        "failed_per_second": r.seconds.iter().map(|s| s.failed).collect::<Vec<_>>(),
        "attempts_per_second": r.seconds.iter().map(|s| s.attempts).collect::<Vec<_>>(),
        "queue_per_second": r.seconds.iter().map(|s| s.queue).collect::<Vec<_>>(),
        "shed_per_second": r.seconds.iter().map(|s| s.shed).collect::<Vec<_>>(),
    })
}

/// Two charts, one above the other, the trigger shaded on both: the users' success rate per
/// second, and the attempts reaching the database per second (its load), for each run.
fn plot(path: &Path, args: &Args, runs: &[Run]) -> Result<()> {
    use plotters::prelude::*;

    let seconds = whole_seconds(DURATION) as f64;
    let in_run = whole_seconds(DURATION);
    let peak = runs
        .iter()
        .flat_map(|run| run.report.seconds.iter().take(in_run))
        .map(|s| s.attempts.max(s.calls))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let root = SVGBackend::new(path, (1100, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!(
            "a metastable failure: {WORKERS} workers, queue {QUEUE}, {TRIGGER_SLOWER}× slower for {}s ({RATE} calls/s, seed {})",
            runs.first().map_or(0, |run| run.lasting.as_secs()),
            args.seed
        ),
        ("sans-serif", 20),
    )?;
    let (upper, lower) = root.split_vertically(390);
    let trigger = (
        TRIGGER_AT.as_secs_f64(),
        (TRIGGER_AT + runs.first().map_or(Duration::ZERO, |run| run.lasting)).as_secs_f64(),
    );
    let shade = RGBColor(255, 160, 0);
    // Budget off red, on blue, with overload control magenta and green; the original
    // ceiling's runs paler.
    let color = |run: &Run| {
        let base = match (run.budget, run.overload.is_some()) {
            (false, false) => RED,
            (true, false) => BLUE,
            (false, true) => MAGENTA,
            (true, true) => GREEN,
        };
        match run.ceiling {
            Ceiling::Learning => base.stroke_width(2),
            Ceiling::Original => base.mix(0.45).stroke_width(2),
        }
    };

    let mut success_chart = ChartBuilder::on(&upper)
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds, 0f64..105f64)?;
    success_chart
        .configure_mesh()
        .x_desc("seconds into the run")
        .y_desc("users' calls succeeded (%)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    success_chart
        .draw_series(std::iter::once(Rectangle::new(
            [(trigger.0, 0.0), (trigger.1, 105.0)],
            shade.mix(0.15).filled(),
        )))?
        .label(format!("trigger ({TRIGGER_SLOWER}× slower)"))
        .legend(move |(x, y)| {
            Rectangle::new([(x, y - 5), (x + 16, y + 5)], shade.mix(0.4).filled())
        });
    for run in runs {
        let style = color(run);
        let points: Vec<(f64, f64)> = (run.report.seconds.iter().take(in_run).enumerate())
            .map(|(i, s)| (i as f64 + 0.5, 100.0 * success(s.calls, s.failed)))
            .collect();
        success_chart
            .draw_series(std::iter::once(PathElement::new(points, style)))?
            .label(format!(
                "{} ceiling, budget {}, overload {}: {}",
                run.ceiling.name(),
                on_off(run.budget),
                overload_name(run.overload),
                match run.figures.recovered_in {
                    Some(s) => format!("recovered {s}s after the trigger"),
                    None => "not recovered".to_owned(),
                }
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], style));
    }
    success_chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;

    let mut load_chart = ChartBuilder::on(&lower)
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds, 0f64..peak * 1.1)?;
    load_chart
        .configure_mesh()
        .x_desc("seconds into the run")
        .y_desc("attempts reaching the db / s")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    load_chart.draw_series(std::iter::once(Rectangle::new(
        [(trigger.0, 0.0), (trigger.1, peak * 1.1)],
        shade.mix(0.15).filled(),
    )))?;
    if let Some(first) = runs.first() {
        let calls: Vec<(f64, f64)> = (first.report.seconds.iter().take(in_run).enumerate())
            .map(|(i, s)| (i as f64 + 0.5, s.calls as f64))
            .collect();
        load_chart
            .draw_series(std::iter::once(PathElement::new(calls, BLACK.mix(0.4))))?
            .label("calls offered")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.mix(0.4)));
    }
    for run in runs {
        let style = color(run);
        let points: Vec<(f64, f64)> = (run.report.seconds.iter().take(in_run).enumerate())
            .map(|(i, s)| (i as f64 + 0.5, s.attempts as f64))
            .collect();
        load_chart
            .draw_series(std::iter::once(PathElement::new(points, style)))?
            .label(format!(
                "{} ceiling, budget {}, overload {}: worst second {:.2}× the calls, peak queue {}",
                run.ceiling.name(),
                on_off(run.budget),
                overload_name(run.overload),
                run.figures.worst_load,
                run.figures.peak_queue
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], style));
    }
    load_chart
        .configure_series_labels()
        // Between the calls offered and a db kept saturated by retries, where no line runs.
        .position(SeriesLabelPosition::MiddleRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
