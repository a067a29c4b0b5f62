//! A run's line a second, as a narrow table: what happened in that second at each hop.

use super::stack::{Library, Stack};
use super::stats::{Hop, Stats};

/// The columns of [`print`]'s lines.
pub(super) const HEADER: &str = "    t  calls    ok   frontend  backend     db  × calls  db queue  db refused  budget refused  saturated";

/// The line for `second`: the users' calls started in it and the share of those ending in it
/// that succeeded, the attempts at each hop and db's as a multiple of the calls, db's longest
/// queue and its refusals, and, on nresilience's rows, the retries its budgets refused and the
/// calls overload control ended.
pub(super) fn print(stack: Stack, stats: &Stats, second: usize) {
    println!("{}", line(stack, stats, second));
}

fn line(stack: Stack, stats: &Stats, second: usize) -> String {
    let calls = stats.calls_in(second);
    let db = stats.received_in(Hop::Db, second);
    let ok = stats
        .success_rate_in(second)
        .map_or_else(|| "-".to_owned(), |rate| format!("{:.0}%", rate * 100.0));
    let (refused, saturated) = match stack.library() {
        Library::Nresilience(..) => (
            stats.refusals_in(second).to_string(),
            stats.saturated_in(second).to_string(),
        ),
        Library::Peer(_) => ("-".to_owned(), "-".to_owned()),
    };
    format!(
        "{second:>5}  {calls:>5}  {ok:>4}   {:>8}  {:>7}  {db:>5}  {:>7.2}  {:>8}  {:>10}  {refused:>14}  {saturated:>9}",
        stats.received_in(Hop::Frontend, second),
        stats.received_in(Hop::Backend, second),
        if calls == 0 { 0.0 } else { db as f64 / calls as f64 },
        stats.db_queue_in(second),
        stats.db_refused_in(second),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d4_a_seconds_line_fits_a_120_column_terminal_under_its_header() {
        let stats = Stats::new();
        for _ in 0..3 {
            stats.call_started_in(0);
            stats.received(Hop::Db);
        }
        let line = line(Stack::Nresilience, &stats, 0);
        assert!(HEADER.chars().count() <= 120, "{HEADER}");
        assert_eq!(
            line.chars().count(),
            HEADER.chars().count(),
            "{line}\n{HEADER}"
        );
        assert!(line.contains("  1.00  "), "{line}");
    }
}
