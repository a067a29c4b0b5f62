//! The storm simulator: SPEC S1's storm, run on the shipping executor in virtual time, with
//! the retry budget off and on.
//!
//! The defaults are the original library's experiment: a dependency at p50 20 ms / p99 200 ms that turns
//! 8× slower from 30 s for a minute, 500 calls a second for five minutes, the default policy
//! with a 10 s deadline. See `docs/simulation.md` for the figures and what they mean.

mod fleet;
mod hedging;
mod metastable;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nresilience_core::overload::{LimitAlgorithm, OverloadControl};
use nresilience_core::{AttemptCeiling, Hedge, RetryBudget, RetryPolicy};
use serde_json::json;
use simulator::{Dependency, Load, Second, Simulation, SimulationReport, Tail};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// The original library freezes its attempt ceiling for a 75-second slice.
const ORIGINAL_REFRESH: Duration = Duration::from_secs(75);

/// Simulates the original library's retry storm (rule S1 of docs/rules.md) in virtual time,
/// budget off and on.
#[derive(Debug, clap::Parser)]
#[command(name = "simulator")]
pub(crate) struct Args {
    /// Which retry-budget settings to run.
    #[arg(long, value_enum, default_value_t = BudgetSetting::Both)]
    budget: BudgetSetting,
    /// The seed; the same seed gives the same figures.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print one JSON object per run, a line each, instead of the table.
    #[arg(long)]
    json: bool,
    /// Calls per second offered, open loop.
    #[arg(long, default_value_t = 500.0)]
    rate: f64,
    /// How long load is offered (`5m`, `300s`, `1500ms`).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    duration: Duration,
    /// The dependency's healthy median latency.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    p50: Duration,
    /// The dependency's healthy 99th-percentile latency.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    p99: Duration,
    /// The shape of the latency tail between and beyond p50 and p99.
    #[arg(long, value_enum, default_value_t = TailSetting::LogLogistic)]
    tail: TailSetting,
    /// When the brownout starts.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    brownout_after: Duration,
    /// How many times slower the dependency is during the brownout.
    #[arg(long, default_value_t = 8.0)]
    brownout_slower: f64,
    /// How long the brownout lasts.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    brownout_lasting: Duration,
    /// The share of attempts the dependency fails outright, all run long (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    failing: f64,
    /// How often the measured attempt ceiling is refitted (ours: 1s; the original: 75s).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    ceiling_refresh: Duration,
    /// Also run with the original library's 75 s refresh, side by side.
    #[arg(long)]
    compare_refresh: bool,
    /// Whether the ceiling learns from the attempts it cuts (rule E7). The original's 75 s
    /// refresh comes with its ceiling as it was, fed by successes only, whatever this says.
    #[arg(long, value_enum, default_value_t = Learning::On)]
    ceiling_learns: Learning,
    /// Services in series, each calling the next with the same policy; the last calls the
    /// dependency (3: frontend → backend → db client → db).
    #[arg(long, default_value_t = 1)]
    hops: usize,
    /// With `--hops` above 1: whether the hops follow the chain rules as nresilience hops do
    /// (each attempt's deadline passed on; overloaded after a refusal and retried after
    /// retrying answered, and not retried); `both` runs the chain each way, side by side.
    #[arg(long, value_enum, default_value_t = RulesSetting::On)]
    chain_rules: RulesSetting,
    /// Split the load over a fleet of 35 clients of five sizes, each with its own budget, and
    /// run it with the budget off, on, and on without its floor.
    #[arg(long, conflicts_with_all = ["hops", "plot", "compare_refresh", "budget"])]
    fleet: bool,
    /// With `--fleet`: this many clients of one size, sharing `--rate` equally, instead of the
    /// 35 of five sizes.
    #[arg(long, requires = "fleet", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    fleet_clients: Option<u32>,
    /// With `--fleet`: the share of retries per first attempt the coordinating dependency
    /// accepts in the `coordinated` row (F2), from 0 to 1.
    #[arg(long, requires = "fleet", default_value_t = nresilience_core::fleet::DEFAULT_ACCEPTED, value_parser = parse_share)]
    accepted_share: f64,
    /// Run the dependency healthy and through its brownout, each without and with hedging
    /// after this trigger (`p95`: the 95th percentile of recent attempts; or a delay such as
    /// `50ms`), and print (and with `--plot`, chart) p50, p99, p99.9 and the load multiplier.
    #[arg(long, value_parser = parse_hedge, conflicts_with_all = [
        "hops", "chain_rules", "fleet", "compare_refresh",
    ])]
    hedge: Option<Hedge>,
    /// Write an SVG chart of the attempts reaching the dependency per second (with
    /// `--scenario metastable`: the users' success rate and the db's load per second).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Run a fixed scenario instead of the storm. `metastable`: a db with workers and a
    /// bounded queue that finishes abandoned work, 5× slower for 5 s, budget off and on, with
    /// our attempt ceiling and the original's, overload control off and on (rules D3, O1,
    /// O2); `metastable-long`: the same, 20 s slower. Both take `--budget`, `--overload`,
    /// `--seed`, `--json` and `--plot`.
    #[arg(long, value_enum, conflicts_with_all = [
        "rate", "duration", "p50", "p99", "tail", "brownout_after", "brownout_slower",
        "brownout_lasting", "failing", "ceiling_refresh", "compare_refresh", "ceiling_learns",
        "hops", "chain_rules", "fleet", "hedge",
    ])]
    scenario: Option<Scenario>,
    /// Overload control's rows, comma-separated: `off`, or an algorithm (`accumulation`, the
    /// library's default, `gradient`, `aimd`, `vegas`). Defaults to the library's default for
    /// the storm (`off` for the original library's 75 s refresh, which has none),
    /// `off,accumulation` for a scenario.
    #[arg(long, value_enum, value_delimiter = ',', conflicts_with_all = ["fleet", "hedge"])]
    overload: Option<Vec<OverloadSetting>>,
}

/// A row's overload control (rules O1, O2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OverloadSetting {
    Off,
    Accumulation,
    Gradient,
    Aimd,
    Vegas,
}

impl Args {
    /// The overload rows asked for, in order, or `default`: `None` for off.
    fn overload_settings(&self, default: &[OverloadSetting]) -> Vec<Option<LimitAlgorithm>> {
        self.overload
            .as_deref()
            .unwrap_or(default)
            .iter()
            .map(|setting| match setting {
                OverloadSetting::Off => None,
                OverloadSetting::Accumulation => Some(LimitAlgorithm::Accumulation),
                OverloadSetting::Gradient => Some(LimitAlgorithm::Gradient),
                OverloadSetting::Aimd => Some(LimitAlgorithm::Aimd),
                OverloadSetting::Vegas => Some(LimitAlgorithm::Vegas),
            })
            .collect()
    }
}

/// Whether the attempt ceiling learns from the attempts it cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Learning {
    /// It does (E7; ours).
    On,
    /// It is fed by successes only.
    Off,
}

/// The scenarios `--scenario` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Scenario {
    /// A metastable failure (rule D3): a short slowdown of a db with a queue, and what
    /// retries do after it ends.
    Metastable,
    /// The same db slowed for 20 s: what is served while it lasts (O1, O2).
    MetastableLong,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BudgetSetting {
    On,
    Off,
    Both,
}

impl BudgetSetting {
    /// The budget settings to run, off before on.
    fn budgets(self) -> &'static [bool] {
        match self {
            Self::Off => &[false],
            Self::On => &[true],
            Self::Both => &[false, true],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RulesSetting {
    On,
    Off,
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TailSetting {
    LogLogistic,
    LogNormal,
}

/// One simulation run and its settings.
struct Run {
    refresh: Duration,
    budget: bool,
    chain_rules: bool,
    overload: Option<LimitAlgorithm>,
    report: SimulationReport,
    wall: Duration,
}

fn main() -> Result<()> {
    run(&<Args as clap::Parser>::parse())
}

fn run(args: &Args) -> Result<()> {
    match args.scenario {
        Some(Scenario::Metastable) => return metastable::main(args, metastable::TRIGGER_LASTING),
        Some(Scenario::MetastableLong) => {
            return metastable::main(args, metastable::LONG_TRIGGER_LASTING)
        }
        None => {}
    }
    if let Some(hedge) = args.hedge {
        return hedging::main(args, hedge);
    }
    let dependency = dependency(args);
    if args.fleet {
        return fleet::main(args, &dependency);
    }
    let mut refreshes = vec![args.ceiling_refresh];
    if args.compare_refresh && args.ceiling_refresh != ORIGINAL_REFRESH {
        refreshes.push(ORIGINAL_REFRESH);
    }
    let budgets = args.budget.budgets();
    if !args.json {
        println!(
            "storm: {}; {} polic{} in series",
            storm(args),
            args.hops,
            if args.hops == 1 { "y" } else { "ies" },
        );
        println!(
            "{:<8} {:<6} {:>7} {:>12} {:>10} {:>13} {:>12} {:>8} {:>8} {:>7} {:>8}",
            "refresh",
            "budget",
            "calls",
            "availability",
            "load mult",
            "amplification",
            "worst second",
            "p50",
            "p99",
            "cut",
            "refusals",
        );
    }
    let signals: &[bool] = match args.chain_rules {
        _ if args.hops <= 1 => &[true],
        RulesSetting::On => &[true],
        RulesSetting::Off => &[false],
        RulesSetting::Both => &[false, true],
    };
    let mut runs = Vec::new();
    for &refresh in &refreshes {
        // The original library's experiment runs as it did, without overload control.
        let original = refresh == ORIGINAL_REFRESH;
        let overloads = args.overload_settings(if original {
            &[OverloadSetting::Off]
        } else {
            &[OverloadSetting::Accumulation]
        });
        for &budget in budgets {
            for (&chain_rules, &overload) in signals
                .iter()
                .flat_map(|rules| overloads.iter().map(move |o| (rules, o)))
            {
                let run = simulate(args, &dependency, refresh, budget, chain_rules, overload)?;
                if args.json {
                    println!("{}", to_json(args, &run));
                } else {
                    print_row(&run);
                }
                runs.push(run);
            }
        }
    }
    if let Some(path) = &args.plot {
        plot(path, args, &runs)?;
        if !args.json {
            println!("chart written to {}", path.display());
        }
    }
    Ok(())
}

/// The load and the dependency the arguments set, for a table's first line.
fn storm(args: &Args) -> String {
    format!(
        "{} calls/s for {:?} against p50 {:?} / p99 {:?} ({:?} tail), {}× slower from {:?} for {:?}; seed {}",
        args.rate,
        args.duration,
        args.p50,
        args.p99,
        args.tail,
        args.brownout_slower,
        args.brownout_after,
        args.brownout_lasting,
        args.seed,
    )
}

/// SPEC S1's dependency, with the knobs the arguments turn.
fn dependency(args: &Args) -> Dependency {
    healthy(args).brownout(
        args.brownout_after,
        args.brownout_slower,
        args.brownout_lasting,
    )
}

/// SPEC S1's dependency without its brownout.
fn healthy(args: &Args) -> Dependency {
    let tail = match args.tail {
        TailSetting::LogLogistic => Tail::LogLogistic,
        TailSetting::LogNormal => Tail::LogNormal,
    };
    Dependency::healthy(args.p50, args.p99)
        .tail(tail)
        .failing(args.failing)
}

/// The attempt ceiling refitted every `refresh`: the original library's at its 75 s, ours
/// otherwise, learning from its cuts as `learning` says.
fn ceiling(refresh: Duration, learning: Learning) -> AttemptCeiling {
    if refresh == ORIGINAL_REFRESH {
        return AttemptCeiling::original();
    }
    AttemptCeiling::default()
        .refresh(refresh)
        .learn_from_cuts(learning == Learning::On)
}

/// SPEC S1's policy: the defaults with a 10 s deadline, with `ceiling`.
fn policy(ceiling: AttemptCeiling, budget: bool) -> Result<RetryPolicy> {
    let builder = RetryPolicy::builder()
        .deadline(Some(Duration::from_secs(10)))
        .attempt_ceiling(Some(ceiling));
    let builder = if budget {
        builder
    } else {
        builder.budget(RetryBudget::None)
    };
    Ok(builder.build()?)
}

fn simulate(
    args: &Args,
    dependency: &Dependency,
    refresh: Duration,
    budget: bool,
    chain_rules: bool,
    overload: Option<LimitAlgorithm>,
) -> Result<Run> {
    let control = overload.map(|algorithm| OverloadControl::new().algorithm(algorithm));
    let policy = policy(ceiling(refresh, args.ceiling_learns), budget)?
        .to_builder()
        .overload_control(control)
        .build()?;
    let started = Instant::now();
    let report = Simulation::chain(std::iter::repeat_n(policy, args.hops.max(1)))
        .against(dependency.clone())
        .under(Load::constant(args.rate))
        .for_duration(args.duration)
        .chain_rules(chain_rules)
        .run(args.seed)?;
    Ok(Run {
        refresh,
        budget,
        chain_rules,
        overload,
        report,
        wall: started.elapsed(),
    })
}

fn on_off(budget: bool) -> &'static str {
    if budget {
        "on"
    } else {
        "off"
    }
}

/// When the run's worst second began, for the table.
fn worst_second(report: &SimulationReport) -> String {
    report
        .worst_second
        .map_or_else(|| "-".to_owned(), |at| format!("{}s", at.as_secs()))
}

fn print_row(run: &Run) {
    let r = &run.report;
    println!(
        "{:<8} {:<6} {:>7} {:>12.4} {:>10.3} {:>13.3} {:>12} {:>8} {:>8} {:>7} {:>8}",
        format!("{:?}", run.refresh),
        on_off(run.budget),
        r.calls,
        r.availability(),
        r.load_multiplier(),
        r.amplification,
        worst_second(r),
        format!("{:?}", r.latency(0.5)),
        format!("{:?}", r.latency(0.99)),
        r.attempts_cut,
        r.budget_refusals,
    );
    // Wall time varies run to run; stdout stays byte-identical for one seed (S2).
    eprintln!("simulated in {:.1}s", run.wall.as_secs_f64());
    if let Some(algorithm) = run.overload {
        println!(
            "{:<15} overload control {}: {} calls saturated",
            "",
            algorithm.name(),
            r.saturated
        );
    }
    if r.hops.len() > 1 {
        println!("{:<15} chain rules {}", "", on_off(run.chain_rules));
        for (n, hop) in r.hops.iter().enumerate() {
            println!(
                "{:<15} hop {}: calls {}, attempts {}, cut {}, refusals {}, amplification {:.3}",
                "",
                n + 1,
                hop.calls,
                hop.attempts,
                hop.attempts_cut,
                hop.budget_refusals,
                hop.amplification
            );
        }
    }
}

fn to_json(args: &Args, run: &Run) -> serde_json::Value {
    let r = &run.report;
    json!({
        "seed": r.seed,
        "ceiling_refresh_s": run.refresh.as_secs_f64(),
        "budget": on_off(run.budget),
        "chain_rules": run.chain_rules,
        "rate": args.rate,
        "duration_s": r.duration.as_secs_f64(),
        "calls": r.calls,
        "succeeded": r.succeeded,
        "availability": r.availability(),
        "attempts": r.attempts,
        "load_multiplier": r.load_multiplier(),
        "amplification": r.amplification,
        "worst_second_s": r.worst_second.map(|at| at.as_secs()),
        "latency_p50_ms": r.latency(0.5).as_secs_f64() * 1e3,
        "latency_p99_ms": r.latency(0.99).as_secs_f64() * 1e3,
        "attempts_cut": r.attempts_cut,
        "budget_refusals": r.budget_refusals,
        "overload": metastable::overload_name(run.overload),
        "saturated": r.saturated,
        "hops": r.hops.iter().map(|hop| json!({
            "calls": hop.calls,
            "succeeded": hop.succeeded,
            "attempts": hop.attempts,
            "attempts_cut": hop.attempts_cut,
            "budget_refusals": hop.budget_refusals,
            "amplification": hop.amplification,
        })).collect::<Vec<_>>(),
        "calls_per_second": r.seconds.iter().map(|s| s.calls).collect::<Vec<_>>(),
        "attempts_per_second": r.seconds.iter().map(|s| s.attempts).collect::<Vec<_>>(),
    })
}

/// Attempts reaching the dependency per second, one line per run, the brownout shaded.
fn plot(path: &Path, args: &Args, runs: &[Run]) -> Result<()> {
    use plotters::prelude::*;

    let seconds = runs
        .iter()
        .map(|run| run.report.seconds.len())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let peak = runs
        .iter()
        .flat_map(|run| run.report.seconds.iter().map(|s| s.attempts.max(s.calls)))
        .max()
        .unwrap_or(1) as f64;
    let root = SVGBackend::new(path, (1100, 550)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "attempts reaching the dependency per second ({} calls/s, seed {})",
                args.rate, args.seed
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds, 0f64..peak * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("seconds into the run")
        .y_desc("attempts / s")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;

    let start = args.brownout_after.as_secs_f64();
    let end = start + args.brownout_lasting.as_secs_f64();
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(start, 0.0), (end, peak * 1.1)],
            RGBColor(255, 160, 0).mix(0.15).filled(),
        )))?
        .label(format!("brownout ({}× slower)", args.brownout_slower))
        .legend(|(x, y)| {
            Rectangle::new(
                [(x, y - 5), (x + 16, y + 5)],
                RGBColor(255, 160, 0).mix(0.4).filled(),
            )
        });

    if let Some(first) = runs.first() {
        let calls = per_second(&first.report, |s| s.calls);
        chart
            .draw_series(std::iter::once(PathElement::new(calls, BLACK.mix(0.4))))?
            .label("calls offered")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.mix(0.4)));
    }
    let palette = [RED, BLUE, MAGENTA, CYAN];
    for (run, color) in runs.iter().zip(palette.iter().cycle()) {
        let points = per_second(&run.report, |s| s.attempts);
        let color = *color;
        chart
            .draw_series(std::iter::once(PathElement::new(
                points,
                color.stroke_width(2),
            )))?
            .label(format!(
                "budget {}, refresh {:?}: amplification {:.2}",
                on_off(run.budget),
                run.refresh,
                run.report.amplification
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// One count of each second of the run, plotted at the middle of its second.
fn per_second(report: &SimulationReport, count: fn(&Second) -> u64) -> Vec<(f64, f64)> {
    (report.seconds.iter().enumerate())
        .map(|(i, second)| (i as f64 + 0.5, count(second) as f64))
        .collect()
}

/// `300`, `300s`, `5m`, `1500ms`, `1.5s`, `1h`: a number of seconds, or a number and a unit.
fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 300ms, 30s or 5m"))?;
    let seconds = match unit.trim() {
        "ms" => number / 1e3,
        "" | "s" => number,
        "m" | "min" => number * 60.0,
        "h" => number * 3_600.0,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}`: use ms, s, m or h"
            ))
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("`{text}`: {e}"))
}

/// `p95` (a quantile of recent latency, as a percentile) or a delay such as `50ms`.
fn parse_share(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(share) if (0.0..=1.0).contains(&share) => Ok(share),
        _ => Err(format!("`{text}` is not a share between 0 and 1, like 0.1")),
    }
}

fn parse_hedge(text: &str) -> std::result::Result<Hedge, String> {
    let text = text.trim();
    let Some(percentile) = text.strip_prefix('p') else {
        let delay = parse_duration(text)?;
        if delay.is_zero() {
            return Err("a hedge delay must be longer than zero".to_owned());
        }
        return Ok(Hedge::after(delay));
    };
    match percentile.parse::<f64>() {
        Ok(p) if p > 0.0 && p < 100.0 => Ok(Hedge::at_quantile(p / 100.0)),
        _ => Err(format!(
            "`{text}` is not a percentile between p0 and p100 (exclusive), like p95 or p99.5"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hg1_hedge_triggers_parse_as_percentiles_or_delays() {
        assert_eq!(parse_hedge("p95"), Ok(Hedge::at_quantile(0.95)));
        assert_eq!(parse_hedge("p99.5"), Ok(Hedge::at_quantile(0.995)));
        assert_eq!(
            parse_hedge("50ms"),
            Ok(Hedge::after(Duration::from_millis(50)))
        );
        for bad in ["p0", "p100", "pfast", "0ms", "soon"] {
            assert!(parse_hedge(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_parse_with_and_without_units() {
        assert_eq!(parse_duration("75s"), Ok(Duration::from_secs(75)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1_500)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("fast").is_err());
    }
}
