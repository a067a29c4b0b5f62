//! The chain's flags: the run's, each retrying hop's, and db's. A hop run alone takes only
//! the flags it uses; anything else is refused by the parser, not ignored.

use std::path::PathBuf;
use std::time::Duration;

use nresilience_core::AttemptCeiling;
use serde::Serialize;

use super::stack::Stack;

/// Whether each hop's retry budget is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Budget {
    /// Retries are bounded by 10 % of successes.
    On,
    /// Only the attempt count bounds retries.
    Off,
}

/// Which measured attempt ceiling the hops' clients use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ceiling {
    /// Refitted every second, learning from the attempts it cuts (SPEC E5, E7; the default).
    Learning,
    /// The original library's: refitted once per 75 s slice, fed by successes only.
    Original,
}

impl Ceiling {
    /// Both, ours first.
    pub const ALL: [Self; 2] = [Self::Learning, Self::Original];

    /// Its name, as the flag spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Ceiling::Learning => "learning",
            Ceiling::Original => "original",
        }
    }

    /// The ceiling's settings.
    pub const fn settings(self) -> AttemptCeiling {
        match self {
            Ceiling::Learning => AttemptCeiling::new(),
            Ceiling::Original => AttemptCeiling::original(),
        }
    }
}

/// Whether the retrying hops follow the chain rules (SPEC C1–C7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rules {
    /// They do not retry an answer marked overloaded or retried, and give up with their
    /// caller's deadline (the default).
    On,
    /// They retry every retryable status and keep their own deadline, as retry layers that
    /// know nothing of each other do.
    Off,
}

/// Whether the retrying hops use overload control (O1, O2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Overload {
    /// An attempt the next hop cannot serve before the caller gives up is not sent, and
    /// attempts in flight are held to an adaptive limit (the default).
    On,
    /// Every attempt is sent.
    Off,
}

/// How a retrying hop (frontend, backend) calls the next one.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct RetryArgs {
    /// Attempts each hop makes at most (the first included).
    #[arg(long, default_value_t = 4)]
    pub attempts: u32,
    /// How long a hop's call may take in all, in milliseconds, when its caller says nothing
    /// shorter (C2). In the whole chain the frontend, which faces the users, takes their
    /// `--user-timeout-ms`.
    #[arg(long, default_value_t = 30_000)]
    pub deadline_ms: u64,
    /// Whether the hops' clients use overload control.
    #[arg(long, value_enum, default_value_t = Overload::On)]
    pub overload: Overload,
    /// The hops' measured attempt ceiling.
    #[arg(long, value_enum, default_value_t = Ceiling::Learning)]
    pub ceiling: Ceiling,
    /// Whether the hops follow the chain rules.
    #[arg(long, value_enum, default_value_t = Rules::On)]
    pub chain_rules: Rules,
}

/// db's capacity and its fault: a trigger that ends.
#[derive(Debug, Clone, Copy, clap::Args)]
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
    /// When db's fault starts, in seconds from its start.
    #[arg(long, default_value_t = 5)]
    pub fault_start: u64,
    /// How long db's fault lasts, in seconds.
    #[arg(long, default_value_t = 5)]
    pub fault_length: u64,
    /// How many times longer a query takes during the fault.
    #[arg(long, default_value_t = 5.0)]
    pub fault_slowdown: f64,
    /// The share of queries that fail with 503 during the fault, 0 to 1.
    #[arg(long, default_value_t = 0.0)]
    pub fault_error_rate: f64,
}

/// The whole chain in one process: the users' traffic and the three hops.
#[derive(Debug, Clone, clap::Args)]
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
    /// Draw the users' success rate and db's load per second, for each run, to this SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// How the retrying hops call the next one.
    #[command(flatten)]
    pub retry: RetryArgs,
    /// db's capacity and fault.
    #[command(flatten)]
    pub db: DbArgs,
}

/// The longest a run, a fault or its start may be: a day.
const MAX_SECONDS: u64 = 86_400;

/// How long a run goes on after the fault ends unless `--duration` says: long enough to see
/// which rows recover and which stay down.
const AFTER_THE_FAULT: u64 = 10;

impl ChainArgs {
    /// The rows to run, in order: those asked for, or every one.
    pub fn stacks(&self) -> Vec<Stack> {
        match (&self.stacks, self.budget, self.compare) {
            (Some(stacks), _, _) => stacks.clone(),
            (None, Some(budget), _) => vec![Stack::nresilience(budget)],
            (None, None, true) => vec![Stack::NresilienceNoBudget, Stack::Nresilience],
            (None, None, false) => Stack::ALL.to_vec(),
        }
    }

    /// How long the users call, in seconds: as asked, or until 10 s past the fault's end.
    pub fn duration(&self) -> u64 {
        self.duration.unwrap_or_else(|| {
            (self.db.fault_start)
                .saturating_add(self.db.fault_length)
                .saturating_add(AFTER_THE_FAULT)
        })
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
        self.retry.validate()
    }

    /// How long a user waits for an answer.
    pub fn user_timeout(&self) -> Duration {
        Duration::from_millis(self.user_timeout_ms)
    }
}

impl RetryArgs {
    /// Refuses an attempt count or a deadline a hop cannot run with.
    pub fn validate(&self) -> Result<(), String> {
        if self.attempts == 0 {
            return Err("--attempts must be at least 1 (the first attempt)".to_owned());
        }
        if !(1..=86_400_000).contains(&self.deadline_ms) {
            return Err(format!(
                "--deadline-ms must be from 1 to 86400000 (a day), got {}",
                self.deadline_ms
            ));
        }
        Ok(())
    }

    /// The settings of the hop facing users who wait `users_wait`: its deadline is theirs.
    pub fn facing_users(self, users_wait: Duration) -> Self {
        Self {
            deadline_ms: u64::try_from(users_wait.as_millis()).unwrap_or(u64::MAX),
            ..self
        }
    }
}

impl DbArgs {
    /// Refuses a capacity or fault db cannot run with: a value that would make every query
    /// fail or panic is a mistake to report, not a run to make.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.fault_error_rate) {
            return Err(format!(
                "--fault-error-rate must be a share from 0 to 1, got {}",
                self.fault_error_rate
            ));
        }
        if !(self.fault_slowdown.is_finite() && (1.0..=1_000.0).contains(&self.fault_slowdown)) {
            return Err(format!(
                "--fault-slowdown must be a finite factor from 1 (no slowdown) to 1000, got {}",
                self.fault_slowdown
            ));
        }
        at_most_a_day("--fault-start", self.fault_start)?;
        at_most_a_day("--fault-length", self.fault_length)?;
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

    /// When the fault starts and ends, from db's start.
    pub fn fault_window(&self) -> (Duration, Duration) {
        let start = Duration::from_secs(self.fault_start);
        (start, start + Duration::from_secs(self.fault_length))
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
