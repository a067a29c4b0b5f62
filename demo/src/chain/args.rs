//! The chain's flags: the run's, each retrying hop's, and db's. A hop run alone takes only
//! the flags it uses; anything else is refused by the parser, not ignored.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::fault::{Fault, FaultArgs};
use super::retry_args::{Budget, RetryArgs};
use super::stack::Stack;
use crate::matrix::MatrixFault;

/// db's capacity and its fault.
#[derive(Debug, Clone, Copy, PartialEq, clap::Args, Serialize, Deserialize)]
pub struct DbArgs {
    /// Queries db serves at once.
    #[arg(long, default_value_t = 4)]
    pub db_workers: u32,
    /// Queries db holds waiting for a worker; one more is refused with 503.
    #[arg(long, default_value_t = 400)]
    pub db_queue: u32,
    /// How long a query holds its worker when db is healthy, in milliseconds.
    #[arg(long, default_value_t = 10)]
    pub db_query_ms: u64,
    /// What goes wrong, when, and how badly.
    #[command(flatten)]
    pub fault: FaultArgs,
}

/// The whole chain in one process: the users' traffic and the three hops.
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
pub struct ChainArgs {
    /// How long the users call, in seconds. Defaults to 10 s past the fault's end (20 s).
    #[arg(long)]
    pub duration: Option<u64>,
    /// Calls per second from the users to the frontend.
    #[arg(long, default_value_t = 200)]
    pub rps: u32,
    /// How long a user waits for an answer, in milliseconds, before giving up.
    #[arg(long, default_value_t = 2_000)]
    pub user_timeout_ms: u64,
    /// The rows to run, comma-separated, in the order given. Without it (and without
    /// `--budget` or `--compare`) every row runs.
    #[arg(long, value_enum, value_delimiter = ',', conflicts_with_all = ["budget", "compare"])]
    pub stacks: Option<Vec<Stack>>,
    /// Run nresilience alone, with every hop's retry budget on or off.
    #[arg(long, value_enum)]
    pub budget: Option<Budget>,
    /// Run nresilience with budgets off then on, side by side.
    #[arg(long, conflicts_with = "budget")]
    pub compare: bool,
    /// Run every stack through every kind of fault, a cell each, and print the table with
    /// each fault's physical limit (`--faults` and `--stacks` pick).
    #[arg(
        long,
        conflicts_with_all = ["budget", "compare", "duration", "fault", "fault_slowdown", "fault_error_rate", "fault_surge", "fault_throttle_rps"]
    )]
    pub matrix: bool,
    /// The matrix's faults, comma-separated, in the order given. Without it every one.
    #[arg(long, value_enum, value_delimiter = ',', requires = "matrix")]
    pub faults: Option<Vec<MatrixFault>>,
    /// How many of the matrix's cells run at once, each in a process of its own, from 1 to 16.
    #[arg(long, default_value_t = 3)]
    pub jobs: u32,
    /// Draw each run's users' success rate and db's load per second (the matrix: a heatmap
    /// of each cell's) to this SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// One cell of a matrix, run by the matrix in a process of its own: the chain's settings
    /// as JSON.
    #[arg(long, hide = true, conflicts_with = "matrix")]
    #[serde(skip)]
    pub cell: Option<String>,
    /// How the retrying hops call the next one.
    #[command(flatten)]
    pub retry: RetryArgs,
    /// db's capacity and fault.
    #[command(flatten)]
    pub db: DbArgs,
}

/// The longest a run may be: a day.
const MAX_SECONDS: u64 = 86_400;

/// The chain's flags alone, for their defaults.
#[derive(clap::Parser)]
struct Defaults {
    #[command(flatten)]
    chain: ChainArgs,
}

impl Default for ChainArgs {
    /// The settings `demo` runs with when given no flag.
    fn default() -> Self {
        <Defaults as clap::Parser>::parse_from(["demo"]).chain
    }
}

impl Default for DbArgs {
    /// db as `demo db` runs it when given no flag.
    fn default() -> Self {
        ChainArgs::default().db
    }
}

/// How long a run goes on after the fault ends unless `--duration` says: long enough to see
/// which rows recover and which stay down.
const AFTER_THE_FAULT: u64 = 10;

impl ChainArgs {
    /// The rows to run, in order: those asked for, or every one.
    #[must_use]
    pub fn stacks(&self) -> Vec<Stack> {
        match (&self.stacks, self.budget, self.compare) {
            (Some(stacks), _, _) => stacks.clone(),
            (None, Some(budget), _) => vec![Stack::nresilience(budget)],
            (None, None, true) => vec![Stack::NresilienceNoBudget, Stack::Nresilience],
            (None, None, false) => Stack::ALL.to_vec(),
        }
    }

    /// How long the users call, in seconds: as asked, or until 10 s past the fault's end.
    #[must_use]
    pub fn duration(&self) -> u64 {
        self.duration.unwrap_or_else(|| {
            (self.db.fault.fault_start)
                .saturating_add(self.db.fault.fault_length)
                .saturating_add(AFTER_THE_FAULT)
        })
    }

    /// Whether a run prints its line a second: not when its output is JSON.
    #[must_use]
    pub fn prints_seconds(&self) -> bool {
        !self.json
    }

    /// Refuses settings the chain cannot run with, saying which and why, before anything
    /// starts.
    pub fn validate(&self) -> Result<(), String> {
        // The fault first: the run's default length is read from it.
        self.db.validate()?;
        at_most_a_day("--duration", self.duration())?;
        if self.rps == 0 {
            return Err("--rps must be at least 1 call a second".to_owned());
        }
        if !(1..=600_000).contains(&self.user_timeout_ms) {
            return Err(format!(
                "--user-timeout-ms must be from 1 to 600000 (ten minutes), got {}",
                self.user_timeout_ms
            ));
        }
        if !(1..=16).contains(&self.jobs) {
            return Err(format!("--jobs must be from 1 to 16, got {}", self.jobs));
        }
        self.retry.validate()
    }

    /// How long a user waits for an answer.
    #[must_use]
    pub fn user_timeout(&self) -> Duration {
        Duration::from_millis(self.user_timeout_ms)
    }
}

impl DbArgs {
    /// Refuses a capacity or fault db cannot run with: a value that would make every query
    /// fail or panic is a mistake to report, not a run to make.
    pub fn validate(&self) -> Result<(), String> {
        self.fault.validate()?;
        if self.db_workers == 0 || self.db_workers > 10_000 {
            return Err(format!(
                "--db-workers must be from 1 to 10000, got {}",
                self.db_workers
            ));
        }
        if self.db_queue > 1_000_000 {
            return Err(format!(
                "--db-queue must be at most 1000000, got {}",
                self.db_queue
            ));
        }
        if !(1..=60_000).contains(&self.db_query_ms) {
            return Err(format!(
                "--db-query-ms must be from 1 to 60000 (a minute), got {}",
                self.db_query_ms
            ));
        }
        Ok(())
    }

    /// db's fault, its strength resolved.
    #[must_use]
    pub fn fault(&self) -> Fault {
        self.fault.fault()
    }

    /// Queries a second db serves when healthy: its workers over a query's time.
    #[must_use]
    pub fn capacity(&self) -> f64 {
        f64::from(self.db_workers) * 1_000.0 / self.db_query_ms as f64
    }
}

fn at_most_a_day(flag: &str, seconds: u64) -> Result<(), String> {
    if seconds > MAX_SECONDS {
        return Err(format!(
            "{flag} must be at most {MAX_SECONDS} seconds (a day), got {seconds}"
        ));
    }
    Ok(())
}
