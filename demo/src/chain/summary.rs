//! What one run of the chain did, and the runs side by side.

use serde::{Deserialize, Serialize};

use super::args::ChainArgs;
use super::settings::{RowSettings, Source};
use super::stack::{Library, Stack};
use super::stats::{Hop, Stats};
use crate::format::{percent, recovery, table, thousands, wrap};

/// The users' success rate a second must reach to count as recovered.
const RECOVERED: f64 = 0.99;

/// What one run of the chain did. Success rates count the users' calls by the second they
/// started in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// What the frontend and backend retried with: the row's name.
    pub stack: Stack,
    /// The row's library and the settings its hops ran with.
    pub settings: RowSettings,
    /// db's fault, in a few words.
    pub fault: String,
    /// The seconds of the run its fault starts and ends in.
    pub fault_window: [u64; 2],
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
    /// Requests db received per call the users made.
    pub db_attempts_per_call: f64,
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Phases {
    /// Calls started before the fault.
    pub before: Option<f64>,
    /// Calls started while it lasted.
    pub during: Option<f64>,
    /// Calls started after it ended.
    pub after: Option<f64>,
}

/// A count per hop.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorstSecond {
    /// Seconds into the run.
    pub second: usize,
    /// db's requests that second over the users' calls.
    pub multiple_of_baseline: f64,
}

/// One second of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// The columns of [`cells`](Self::cells).
    pub(crate) const COLUMNS: [&'static str; 8] = [
        "stack",
        "succeeded",
        "before",
        "during",
        "after",
        "back ≥ 99 %",
        "db's worst second",
        "at db / call",
    ];

    /// The run as a row of a table of [`COLUMNS`](Self::COLUMNS), named `name`.
    pub(crate) fn cells(&self, name: String) -> Vec<String> {
        let left = (self.seconds.len() as u64).saturating_sub(self.fault_window[1]);
        vec![
            name,
            percent(Some(self.success_rate)),
            percent(self.success.before),
            percent(self.success.during),
            percent(self.success.after),
            recovery(self.recovered_in_seconds, left),
            self.worst_db_second
                .as_ref()
                .map_or("-".to_owned(), |worst| {
                    format!("{:.2}× (t={}s)", worst.multiple_of_baseline, worst.second)
                }),
            format!("{:.2}", self.db_attempts_per_call),
        ]
    }

    /// The summary of a run on `stack`, from its counters.
    pub fn of(stats: &Stats, args: &ChainArgs, stack: Stack, settings: RowSettings) -> Self {
        let calls = stats.calls_total();
        let succeeded = stats.succeeded();
        let run = usize::try_from(args.duration()).unwrap_or(usize::MAX);
        let nresilience = matches!(stack.library(), Library::Nresilience(..));
        let fault = args.db.fault();
        let start = usize::try_from(fault.start.as_secs())
            .unwrap_or(usize::MAX)
            .min(run);
        let end = usize::try_from(fault.end.as_secs())
            .unwrap_or(usize::MAX)
            .min(run);
        let rate = |second: usize| stats.success_rate_of_started(second..second + 1);
        Self {
            stack,
            settings,
            fault: fault.describe(),
            fault_window: [start as u64, end as u64],
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
            db_attempts_per_call: if calls == 0 {
                0.0
            } else {
                stats.received_total(Hop::Db) as f64 / calls as f64
            },
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

/// Prints `runs` side by side, a row each, then what each row ran with.
pub(super) fn print(runs: &[Summary], args: &ChainArgs) {
    let fault = args.db.fault();
    let (start, end, duration) = (fault.start.as_secs(), fault.end.as_secs(), args.duration());
    println!(
        "\nusers' calls that succeeded, by the second they started: the whole run, before the fault (0–{start} s),\nduring it ({start}–{end} s), after it ({end}–{duration} s); db: {}",
        fault.describe()
    );
    let mut header = Summary::COLUMNS.to_vec();
    header.push("db refused");
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            let mut cells = run.cells(run.stack.name().to_owned());
            cells.push(thousands(run.db_refused));
            cells
        })
        .collect();
    table(&header, &rows);
    let own: Vec<Vec<String>> = runs
        .iter()
        .filter(|run| matches!(run.stack.library(), Library::Nresilience(..)))
        .map(|run| {
            let pair = |counts: &Option<HopCounts>| {
                counts.as_ref().map_or("-".to_owned(), |c| {
                    format!("{} / {}", thousands(c.frontend), thousands(c.backend))
                })
            };
            let (n, p) = (&run.nested_retries, &run.potential_attempts);
            vec![
                run.stack.name().to_owned(),
                pair(&run.budget_refusals),
                pair(&run.saturated),
                format!(
                    "{} (up to {}×)",
                    thousands(n.frontend + n.backend + n.db),
                    p.frontend.max(p.backend).max(p.db)
                ),
            ]
        })
        .collect();
    if !own.is_empty() {
        println!();
        let header = [
            "nresilience's own",
            "budget refusals f / b",
            "saturated f / b",
            "NestedRetry",
        ];
        table(&header, &own);
    }
    println!();
    let width = runs
        .iter()
        .map(|run| run.stack.name().len())
        .max()
        .unwrap_or(0);
    for run in runs {
        for (i, line) in wrap(&run.settings.description, 118 - width)
            .iter()
            .enumerate()
        {
            let name = if i == 0 { run.stack.name() } else { "" };
            println!("{name:<width$}  {line}");
        }
    }
    if runs.iter().any(|run| {
        run.settings
            .settings
            .iter()
            .any(|s| s.source == Source::Changed)
    }) {
        println!("* not the library's default");
    }
}

/// Seconds from `end` to the first second at or after it whose rate reached 99 %.
fn recovered_in(rates: &[Option<f64>], end: usize) -> Option<u64> {
    (end..rates.len())
        .find(|&second| rates[second].is_some_and(|rate| rate >= RECOVERED))
        .map(|second| (second - end) as u64)
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
}
