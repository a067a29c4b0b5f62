//! The matrix's cells, each a run of the chain in a process of its own (this binary with
//! `--cell`), a few at once: a process per cell keeps each run's counters, ports and
//! runtime its own.

use std::collections::VecDeque;
use std::process::Command;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use super::{minutes, MatrixFault};
use crate::chain::{self, ChainArgs, CurrentRun, Result, Stack, Stats, Summary};

/// Runs `stacks` through each fault's chain, `jobs` cells at once, printing a line as each
/// ends when `progress` says; returns, per fault, a summary per stack in order.
pub(super) fn run_all(
    chains: &[(MatrixFault, ChainArgs)],
    stacks: &[Stack],
    jobs: u32,
    progress: bool,
) -> Result<Vec<Vec<Summary>>> {
    let queue: VecDeque<(usize, usize)> = (0..chains.len())
        .flat_map(|fault| (0..stacks.len()).map(move |stack| (fault, stack)))
        .collect();
    let total = queue.len();
    let queue = Arc::new(Mutex::new(queue));
    let (done, finished) = mpsc::channel();
    let started = Instant::now();
    let mut runs: Vec<Vec<Option<Summary>>> = vec![vec![None; stacks.len()]; chains.len()];
    std::thread::scope(|scope| -> Result<()> {
        for _ in 0..jobs.max(1) {
            let (queue, done) = (Arc::clone(&queue), done.clone());
            scope.spawn(move || loop {
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                let Some((fault, stack)) = next else { break };
                let cell = cell_args(&chains[fault].1, stacks[stack]);
                if done.send((fault, stack, spawn_cell(&cell))).is_err() {
                    break;
                }
            });
        }
        drop(done);
        for (count, (fault, stack, summary)) in finished.iter().enumerate() {
            let summary = summary?;
            if progress {
                println!(
                    "[{:>3}/{total}] {}",
                    count + 1,
                    line(chains[fault].0, &summary, started)
                );
            }
            runs[fault][stack] = Some(summary);
        }
        Ok(())
    })?;
    Ok(runs
        .into_iter()
        .map(|row| row.into_iter().flatten().collect())
        .collect())
}

/// The chain's settings for one cell: one stack, its summary as JSON.
fn cell_args(chain: &ChainArgs, stack: Stack) -> ChainArgs {
    ChainArgs {
        stacks: Some(vec![stack]),
        matrix: false,
        faults: None,
        plot: None,
        json: true,
        ..chain.clone()
    }
}

/// Runs `cell` in a process of its own and reads its summary.
fn spawn_cell(cell: &ChainArgs) -> Result<Summary> {
    let output = Command::new(std::env::current_exe()?)
        .arg("--cell")
        .arg(serde_json::to_string(cell)?)
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "a cell of the matrix failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// Runs the one cell `json` describes, in this process, and prints its summary as JSON.
pub async fn run_cell(json: &str, current: &CurrentRun) -> Result<Summary> {
    let args: ChainArgs = serde_json::from_str(json)?;
    args.validate()?;
    let stack = match args.stacks().as_slice() {
        [stack] => *stack,
        _ => return Err("a cell runs one stack".into()),
    };
    let stats = Arc::new(Stats::new());
    current.start(Arc::clone(&stats));
    let summary = chain::run(&args, stack, stats).await?;
    println!("{}", serde_json::to_string(&summary)?);
    Ok(summary)
}

/// A cell's line: `slow × tower-5s: 83.3 % (33.9 % during), db 3.30× at worst, 1.10 at db a call`.
fn line(fault: MatrixFault, cell: &Summary, started: Instant) -> String {
    let during = cell
        .success
        .during
        .map_or("-".to_owned(), |rate| format!("{:.1} %", rate * 100.0));
    format!(
        "{:<8} × {:<21} {:>5.1} % ({during} during), db {:.2}× at worst, {:.2} at db a call  ({} in)",
        fault.name(),
        cell.stack.name(),
        cell.success_rate * 100.0,
        cell.worst_db_second
            .as_ref()
            .map_or(0.0, |worst| worst.multiple_of_baseline),
        cell.db_attempts_per_call,
        minutes(started.elapsed()),
    )
}
