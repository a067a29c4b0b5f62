//! `demo --matrix`: every stack through every kind of fault (P3), a run of the chain per cell,
//! each in a process of its own so that cells can run side by side; per fault, its physical
//! limit and the stack that came nearest it.

mod cells;
mod faults;
mod heatmap;
mod print;

pub use cells::run_cell;
pub use faults::MatrixFault;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::chain::{physical_limit, ChainArgs, Limit, Result, Stack, Summary};

/// What the matrix measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Matrix {
    /// A row per fault, in the order run.
    pub faults: Vec<FaultRow>,
    /// How long the matrix took, in seconds of wall time.
    pub took_seconds: f64,
    /// How many cells ran at once.
    pub jobs: u32,
}

/// One fault's cells.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultRow {
    /// The fault, as `--faults` spells it.
    pub fault: MatrixFault,
    /// What it does, in a few words.
    pub description: String,
    /// The most db's capacity could serve in time.
    pub limit: Limit,
    /// The stacks whose users fared best: the largest share of calls served, to a tenth of a
    /// point (every stack tied there).
    pub best: Vec<Stack>,
    /// A run per stack, in the order asked.
    pub cells: Vec<Summary>,
}

/// Runs the matrix `args` asks for (its faults and stacks), prints a line per cell as each
/// ends, then the tables (or the JSON), and draws the heatmap when asked.
pub fn run(args: &ChainArgs) -> Result<Matrix> {
    let faults = args
        .faults
        .clone()
        .unwrap_or_else(|| MatrixFault::ALL.to_vec());
    let stacks = args.stacks();
    let started = Instant::now();
    let chains: Vec<(MatrixFault, ChainArgs)> = faults
        .iter()
        .map(|&fault| (fault, fault.chain(args)))
        .collect();
    let runs = cells::run_all(&chains, &stacks, args.jobs, !args.json)?;
    let matrix = Matrix {
        faults: chains
            .iter()
            .zip(runs)
            .map(|((fault, chain), cells)| FaultRow {
                fault: *fault,
                description: chain.db.fault().describe(),
                limit: physical_limit(chain),
                best: best(&cells),
                cells,
            })
            .collect(),
        took_seconds: started.elapsed().as_secs_f64(),
        jobs: args.jobs,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&matrix)?);
    } else {
        print::print(&matrix, args);
    }
    if let Some(path) = &args.plot {
        heatmap::draw(path, &matrix)?;
        if !args.json {
            println!("\nheatmap written to {}", path.display());
        }
    }
    Ok(matrix)
}

/// The stacks that served the largest share of their calls, to a tenth of a point.
fn best(cells: &[Summary]) -> Vec<Stack> {
    let tenths = |cell: &Summary| (cell.success_rate * 1_000.0).round() as i64;
    let top = cells.iter().map(tenths).max();
    cells
        .iter()
        .filter(|cell| Some(tenths(cell)) == top)
        .map(|cell| cell.stack)
        .collect()
}

/// `13 min 20 s`.
fn minutes(took: Duration) -> String {
    let seconds = took.as_secs();
    format!("{} min {} s", seconds / 60, seconds % 60)
}
