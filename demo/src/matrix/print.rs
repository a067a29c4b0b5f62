//! The matrix for a person: a table per fault with its physical limit, then every cell's
//! users' success and db's worst second at a glance.

use std::time::Duration;

use super::{minutes, FaultRow, Matrix};
use crate::chain::{ChainArgs, RowSettings, Source, Stack, Summary};
use crate::format::{percent, table, wrap};

/// Prints each fault's table, the two grids, and what each row ran with.
pub(super) fn print(matrix: &Matrix, args: &ChainArgs) {
    for row in &matrix.faults {
        fault_table(row);
    }
    println!();
    grid(
        matrix,
        "users' calls that succeeded over the run, %; * the best of each fault (ties all marked)",
        |limit| format!("{:.1}", limit * 100.0),
        |row, cell| {
            let best = if row.best.contains(&cell.stack) {
                "*"
            } else {
                ""
            };
            format!("{:.1}{best}", cell.success_rate * 100.0)
        },
    );
    println!();
    grid(
        matrix,
        "db's worst second, × the users' calls that second",
        |_| "-".to_owned(),
        |_, cell| {
            cell.worst_db_second
                .as_ref()
                .map_or("-".to_owned(), |worst| {
                    format!("{:.2}", worst.multiple_of_baseline)
                })
        },
    );
    println!();
    let stacks: Vec<Stack> = matrix
        .faults
        .first()
        .map(|row| row.cells.iter().map(|cell| cell.stack).collect())
        .unwrap_or_default();
    let width = stacks.iter().map(|s| s.name().len()).max().unwrap_or(0);
    let mut changed = false;
    for stack in stacks {
        let settings = RowSettings::of(stack, args.retry, args.user_timeout());
        changed |= settings
            .settings
            .iter()
            .any(|s| s.source == Source::Changed);
        for (i, line) in wrap(&settings.description, 118 - width).iter().enumerate() {
            let name = if i == 0 { stack.name() } else { "" };
            println!("{name:<width$}  {line}");
        }
    }
    if changed {
        println!("* not the library's default");
    }
    println!(
        "\n{} cells in {}, {} at once",
        matrix
            .faults
            .iter()
            .map(|row| row.cells.len())
            .sum::<usize>(),
        minutes(Duration::from_secs_f64(matrix.took_seconds)),
        matrix.jobs
    );
}

/// A fault's table: its limit with the arithmetic, then a row per stack.
fn fault_table(row: &FaultRow) {
    let title = format!(
        "{}: {}. Physical limit {} of the run, {} of the calls started in the fault:",
        row.fault.name(),
        row.description,
        percent(Some(row.limit.run)),
        percent(Some(row.limit.during)),
    );
    println!();
    for line in wrap(&title, 120) {
        println!("{line}");
    }
    for line in wrap(&row.limit.arithmetic, 116) {
        println!("  {line}");
    }
    let rows: Vec<Vec<String>> = row
        .cells
        .iter()
        .map(|cell| {
            let best = if row.best.contains(&cell.stack) {
                " *"
            } else {
                ""
            };
            cell.cells(format!("{}{best}", cell.stack.name()))
        })
        .collect();
    table(&Summary::COLUMNS, &rows);
}

/// A stack per line, a fault per column, each cell as `value` writes it, under the limit.
fn grid(
    matrix: &Matrix,
    title: &str,
    limit: impl Fn(f64) -> String,
    value: impl Fn(&FaultRow, &Summary) -> String,
) {
    println!("{title}");
    let mut header = vec!["stack"];
    header.extend(matrix.faults.iter().map(|row| row.fault.name()));
    let mut rows = vec![{
        let mut cells = vec!["physical limit".to_owned()];
        cells.extend(matrix.faults.iter().map(|row| limit(row.limit.run)));
        cells
    }];
    let stacks = matrix.faults.first().map_or(0, |row| row.cells.len());
    for i in 0..stacks {
        let mut cells = vec![matrix.faults[0].cells[i].stack.name().to_owned()];
        cells.extend(matrix.faults.iter().map(|row| value(row, &row.cells[i])));
        rows.push(cells);
    }
    table(&header, &rows);
}
