//! How a retrying hop (frontend, backend) calls the next one: the flags every row and a hop
//! run alone share.

use std::time::Duration;

use nresilience_core::AttemptCeiling;
use serde::{Deserialize, Serialize};

/// Whether each hop's retry budget is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Budget {
    /// Retries are bounded by 10 % of successes.
    On,
    /// Only the attempt count bounds retries.
    Off,
}

/// Which measured attempt ceiling the hops' clients use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ceiling {
    /// Refitted every second from recent attempts, learning from the ones it cuts (the
    /// library's default).
    Learning,
    /// The original library's: refitted once per 75 s slice, fed by successes only.
    Original,
}

impl Ceiling {
    /// Both, ours first.
    pub const ALL: [Self; 2] = [Self::Learning, Self::Original];

    /// Its name, as the flag spells it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Learning => "learning",
            Self::Original => "original",
        }
    }

    /// The ceiling's settings.
    #[must_use]
    pub const fn settings(self) -> AttemptCeiling {
        match self {
            Self::Learning => AttemptCeiling::new(),
            Self::Original => AttemptCeiling::original(),
        }
    }
}

/// Whether the retrying hops follow the chain rules (SPEC C1–C7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rules {
    /// They do not retry an answer marked overloaded or retried, and give up with their
    /// caller's deadline (the library's default).
    On,
    /// They retry every retryable status and keep their own deadline, as retry layers that
    /// know nothing of each other do.
    Off,
}

/// Whether the retrying hops use overload control (O1, O2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Overload {
    /// An attempt the next hop cannot serve before the caller gives up is not sent, and
    /// attempts in flight are held to a limit once work accumulates (the library's default).
    On,
    /// Every attempt is sent.
    Off,
}

/// How a retrying hop (frontend, backend) calls the next one. A setting left out is the
/// library's default (`RetryPolicy::default()`, `Client::new`); one given is named in the
/// row's description.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args, Serialize, Deserialize)]
pub struct RetryArgs {
    /// Attempts each hop makes at most (the first included). Defaults to the library's, 3.
    #[arg(long)]
    pub attempts: Option<u32>,
    /// How long a hop's call may take in all, in milliseconds, when its caller says nothing
    /// shorter (C2). Defaults to the library's, 30 s. In the whole chain the frontend, which
    /// faces the users, takes their `--user-timeout-ms`.
    #[arg(long)]
    pub deadline_ms: Option<u64>,
    /// Whether the hops' clients use overload control. Defaults to the library's (on).
    #[arg(long, value_enum)]
    pub overload: Option<Overload>,
    /// The hops' measured attempt ceiling. Defaults to the library's (learning).
    #[arg(long, value_enum)]
    pub ceiling: Option<Ceiling>,
    /// Whether the hops follow the chain rules. Defaults to the library's (on).
    #[arg(long, value_enum)]
    pub chain_rules: Option<Rules>,
}

impl RetryArgs {
    /// Refuses an attempt count or a deadline a hop cannot run with.
    pub fn validate(&self) -> Result<(), String> {
        if self.attempts == Some(0) {
            return Err("--attempts must be at least 1 (the first attempt)".to_owned());
        }
        if let Some(deadline) = self.deadline_ms.filter(|ms| !(1..=86_400_000).contains(ms)) {
            return Err(format!(
                "--deadline-ms must be from 1 to 86400000 (a day), got {deadline}"
            ));
        }
        Ok(())
    }

    /// The settings of the hop facing users who wait `users_wait`: its deadline is theirs.
    #[must_use]
    pub fn facing_users(self, users_wait: Duration) -> Self {
        Self {
            deadline_ms: Some(u64::try_from(users_wait.as_millis()).unwrap_or(u64::MAX)),
            ..self
        }
    }

    /// These settings, each left out taken from `row`: what a row turns on is the row's, what
    /// a flag says wins.
    #[must_use]
    pub fn over(self, row: Self) -> Self {
        Self {
            attempts: self.attempts.or(row.attempts),
            deadline_ms: self.deadline_ms.or(row.deadline_ms),
            overload: self.overload.or(row.overload),
            ceiling: self.ceiling.or(row.ceiling),
            chain_rules: self.chain_rules.or(row.chain_rules),
        }
    }
}
