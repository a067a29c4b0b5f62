//! What one run of the chain did, and the runs side by side.

use serde::Serialize;

use super::args::{Ceiling, ChainArgs, Overload, Rules};
use super::stack::{Library, Stack};
use super::stats::{Hop, Stats};

/// The users' success rate a second must reach to count as recovered.
const RECOVERED: f64 = 0.99;

/// What one run of the chain did. Success rates count the users' calls by the second they
/// started in.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// What the frontend and backend retried with: the row's name.
    pub stack: Stack,
    /// The row's library and settings, in a few words.
    pub description: &'static str,
    /// The hops' attempt ceiling; `None` on a peer's row.
    pub ceiling: Option<Ceiling>,
    /// Whether the hops followed the chain rules; `None` on a peer's row.
    pub chain_rules: Option<Rules>,
    /// Whether the hops used overload control; `None` on a peer's row.
    pub overload: Option<Overload>,
    /// Calls the users made.
    pub calls: u64,
    /// Calls that succeeded.
    pub succeeded: u64,
    /// `succeeded / calls`.
    pub success_rate: f64,
    /// The success rate of calls started before the fault, during it, and after it.
    pub success: Phases,
    /// Seconds from the fault's end to the first second whose calls succeeded at least 99 %
    /// of the time; `None` when none did before the run ended.
    pub recovered_in_seconds: Option<u64>,
    /// Requests each hop received.
    pub attempts: HopCounts,
    /// `NestedRetry` reports at each hop.
    pub nested_retries: HopCounts,
    /// The most attempts a `NestedRetry` at each hop said could reach the dependency
    /// through it: the chain's worst case.
    pub potential_attempts: HopCounts,
    /// Retries each hop's budget refused; `None` on a peer's row, whose libraries do not
    /// report them.
    pub budget_refusals: Option<HopCounts>,
    /// Calls each hop's overload control ended (O1, O2, O4); `None` on a peer's row.
    pub saturated: Option<HopCounts>,
    /// Queries db refused, its queue full.
    pub db_refused: u64,
    /// db's longest queue.
    pub db_peak_queue: u64,
    /// The second db received the most requests per user call.
    pub worst_db_second: Option<WorstSecond>,
    /// Each second of the run.
    pub seconds: Vec<SecondFigures>,
}

/// A success rate before, during and after the fault; `None` where no call started.
#[derive(Debug, Serialize)]
pub struct Phases {
    /// Calls started before the fault.
    pub before: Option<f64>,
    /// Calls started while it lasted.
    pub during: Option<f64>,
    /// Calls started after it ended.
    pub after: Option<f64>,
}

/// A count per hop.
#[derive(Debug, Serialize)]
pub struct HopCounts {
    /// At the frontend.
    pub frontend: u64,
    /// At the backend.
    pub backend: u64,
    /// At db.
    pub db: u64,
}

impl HopCounts {
    fn of(count: impl Fn(Hop) -> u64) -> Self {
        Self {
            frontend: count(Hop::Frontend),
            backend: count(Hop::Backend),
            db: count(Hop::Db),
        }
    }
}

/// The second when db received the most requests per user call.
#[derive(Debug, Serialize)]
pub struct WorstSecond {
    /// Seconds into the run.
    pub second: usize,
    /// db's requests that second over the users' calls.
    pub multiple_of_baseline: f64,
}

/// One second of a run.
#[derive(Debug, Serialize)]
pub struct SecondFigures {
    /// Calls the users started.
    pub calls: u64,
    /// The share of them that succeeded.
    pub success_rate: Option<f64>,
    /// Requests db received.
    pub db_requests: u64,
    /// db's longest queue.
    pub db_queue: u64,
    /// Calls overload control ended, at every hop.
    pub saturated: u64,
}

impl Summary {
    /// The summary of a run on `stack`, from its counters.
    pub fn of(stats: &Stats, args: &ChainArgs, stack: Stack) -> Self {
        let calls = stats.calls_total();
        let succeeded = stats.succeeded();
        let run = usize::try_from(args.duration()).unwrap_or(usize::MAX);
        let nresilience = matches!(stack.library(), Library::Nresilience(_));
        let (start, end) = args.db.fault_window();
        let start = usize::try_from(start.as_secs())
            .unwrap_or(usize::MAX)
            .min(run);
        let end = usize::try_from(end.as_secs())
            .unwrap_or(usize::MAX)
            .min(run);
        let rate = |second: usize| stats.success_rate_of_started(second..second + 1);
        Self {
            stack,
            description: stack.description(),
            ceiling: nresilience.then_some(args.retry.ceiling),
            chain_rules: nresilience.then_some(args.retry.chain_rules),
            overload: nresilience.then_some(args.retry.overload),
            calls,
            succeeded,
            success_rate: if calls == 0 {
                0.0
            } else {
                succeeded as f64 / calls as f64
            },
            success: Phases {
                before: stats.success_rate_of_started(0..start),
                during: stats.success_rate_of_started(start..end),
                after: stats.success_rate_of_started(end..run),
            },
            recovered_in_seconds: recovered_in(&(0..run).map(rate).collect::<Vec<_>>(), end),
            attempts: HopCounts::of(|hop| stats.received_total(hop)),
            nested_retries: HopCounts::of(|hop| stats.nested_total(hop)),
            potential_attempts: HopCounts::of(|hop| stats.potential_attempts(hop)),
            budget_refusals: nresilience.then(|| HopCounts::of(|hop| stats.refusals(hop))),
            saturated: nresilience.then(|| HopCounts::of(|hop| stats.saturated_total(hop))),
            db_refused: stats.db_refused_total(),
            db_peak_queue: stats.db_queue_peak(),
            worst_db_second: stats
                .worst_db_second(run)
                .map(|(second, multiple)| WorstSecond {
                    second,
                    multiple_of_baseline: multiple,
                }),
            seconds: (0..run)
                .map(|second| SecondFigures {
                    calls: stats.calls_in(second),
                    success_rate: rate(second),
                    db_requests: stats.received_in(Hop::Db, second),
                    db_queue: stats.db_queue_in(second),
                    saturated: stats.saturated_in(second),
                })
                .collect(),
        }
    }
}

/// Prints `runs` side by side, a row each.
pub(super) fn print(runs: &[Summary], args: &ChainArgs) {
    let (start, end) = args.db.fault_window();
    let (start, end, duration) = (start.as_secs(), end.as_secs(), args.duration());
    println!(
        "\nusers' calls that succeeded, by the second they started: the whole run, before the fault (0–{start} s), during it ({start}–{end} s), after it ({end}–{duration} s)"
    );
    let header = [
        "stack",
        "calls",
        "succeeded",
        "before",
        "during",
        "after",
        "back ≥ 99 %",
        "db's worst second",
        "db refused",
        "attempts backend / db",
        "budget refusals f / b",
        "saturated f / b",
        "NestedRetry",
    ];
    let rows: Vec<[String; 13]> = runs
        .iter()
        .map(|run| {
            [
                run.stack.name().to_owned(),
                thousands(run.calls),
                percent(Some(run.success_rate)),
                percent(run.success.before),
                percent(run.success.during),
                percent(run.success.after),
                match run.recovered_in_seconds {
                    Some(seconds) => format!("in {seconds} s"),
                    None => format!("not in {} s", duration.saturating_sub(end)),
                },
                run.worst_db_second
                    .as_ref()
                    .map_or("-".to_owned(), |worst| {
                        format!("{:.2}× (t={}s)", worst.multiple_of_baseline, worst.second)
                    }),
                thousands(run.db_refused),
                format!(
                    "{} / {}",
                    thousands(run.attempts.backend),
                    thousands(run.attempts.db)
                ),
                run.budget_refusals.as_ref().map_or("-".to_owned(), |r| {
                    format!("{} / {}", thousands(r.frontend), thousands(r.backend))
                }),
                run.saturated.as_ref().map_or("-".to_owned(), |r| {
                    format!("{} / {}", thousands(r.frontend), thousands(r.backend))
                }),
                match run.ceiling {
                    None => "-".to_owned(),
                    Some(_) => {
                        let n = &run.nested_retries;
                        let p = &run.potential_attempts;
                        format!(
                            "{} ({}×)",
                            thousands(n.frontend + n.backend + n.db),
                            p.frontend.max(p.backend).max(p.db)
                        )
                    }
                },
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .chain([header[column].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (column, cell) in cells.enumerate() {
            let pad = widths[column] - cell.chars().count();
            if column == 0 {
                out.push_str(&format!("{cell}{}", " ".repeat(pad)));
            } else {
                out.push_str(&format!("  {}{cell}", " ".repeat(pad)));
            }
        }
        println!("{out}");
    };
    line(&mut header.iter().copied());
    for row in &rows {
        line(&mut row.iter().map(String::as_str));
    }
    println!();
    for run in runs {
        println!(
            "{:<w$}  {}",
            run.stack.name(),
            run.description,
            w = widths[0]
        );
    }
}

/// Seconds from `end` to the first second at or after it whose rate reached 99 %.
fn recovered_in(rates: &[Option<f64>], end: usize) -> Option<u64> {
    (end..rates.len())
        .find(|&second| rates[second].is_some_and(|rate| rate >= RECOVERED))
        .map(|second| (second - end) as u64)
}

fn percent(rate: Option<f64>) -> String {
    rate.map_or("-".to_owned(), |rate| format!("{:.1} %", rate * 100.0))
}

/// `12,345`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d4_recovery_counts_from_the_faults_end_to_the_first_second_at_99_percent() {
        let rates = [
            Some(1.0),
            Some(0.0),
            Some(0.5),
            Some(0.98),
            None,
            Some(0.99),
            Some(1.0),
        ];
        assert_eq!(recovered_in(&rates, 2), Some(3));
        assert_eq!(
            recovered_in(&rates, 1),
            Some(4),
            "a second without calls is no recovery"
        );
        assert_eq!(
            recovered_in(&rates[..5], 2),
            None,
            "not before the run ended"
        );
        assert_eq!(recovered_in(&rates, 0), Some(0), "no fault to recover from");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
