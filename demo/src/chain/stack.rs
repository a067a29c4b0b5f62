//! The stacks the chain runs on: nresilience, and the libraries a Rust user picks instead
//! (SPEC P1), each a row of the comparison.

use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::retry_args::{Budget, Overload, RetryArgs};

/// What the frontend and backend retry with: one row of the comparison. Every row has the
/// same users, db and fault; only the two retrying hops change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Stack {
    /// nresilience as `RetryPolicy::default()` and `Client::new` make it: the library's
    /// defaults.
    Nresilience,
    /// nresilience's defaults with overload control turned off.
    NresilienceNoOverload,
    /// nresilience's defaults with the retry budget off.
    NresilienceNoBudget,
    /// No retries: reqwest 0.13 as `Client::new()` makes it, no timeout.
    None,
    /// reqwest 0.13's own retries (`reqwest::retry::for_host`), 1 s timeout per request.
    #[value(name = "reqwest-1s")]
    Reqwest1s,
    /// reqwest 0.13's own retries, 5 s timeout per request.
    #[value(name = "reqwest-5s")]
    Reqwest5s,
    /// reqwest-retry 0.9's `RetryTransientMiddleware`, 1 s timeout per attempt.
    #[value(name = "reqwest-retry-1s")]
    ReqwestRetry1s,
    /// reqwest-retry 0.9's `RetryTransientMiddleware`, 5 s timeout per attempt.
    #[value(name = "reqwest-retry-5s")]
    ReqwestRetry5s,
    /// tower 0.5's `Retry` with a `TpsBudget` over hyper-util, 1 s `Timeout` per attempt.
    #[value(name = "tower-1s")]
    Tower1s,
    /// tower 0.5's `Retry` with a `TpsBudget` over hyper-util, 5 s `Timeout` per attempt.
    #[value(name = "tower-5s")]
    Tower5s,
    /// tower-resilience 0.13's retry with its token-bucket budget and its AIMD concurrency
    /// limit over hyper-util, 1 s per attempt.
    #[value(name = "tower-resilience-1s")]
    TowerResilience1s,
    /// tower-resilience 0.13, 5 s per attempt.
    #[value(name = "tower-resilience-5s")]
    TowerResilience5s,
}

/// The library a row's retrying hops are built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    /// nresilience-client: the library's defaults, but for the budget and what the row turns on.
    Nresilience(Budget, RetryArgs),
    /// Another library.
    Peer(Peer),
}

/// A library a Rust user picks instead of nresilience, with its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// reqwest with no retry policy and no timeout: one attempt.
    NoRetries,
    /// reqwest's built-in `reqwest::retry`; the timeout covers the whole request.
    Reqwest(Duration),
    /// reqwest-middleware with reqwest-retry; the timeout bounds each attempt.
    ReqwestRetry(Duration),
    /// tower's `Retry` over hyper-util's client; the timeout bounds each attempt.
    Tower(Duration),
    /// tower-resilience's retry and AIMD limit over hyper-util's client; the timeout bounds
    /// each attempt.
    TowerResilience(Duration),
}

impl Stack {
    /// Every row, in the order the demo runs them.
    pub const ALL: [Self; 12] = [
        Self::Nresilience,
        Self::NresilienceNoOverload,
        Self::NresilienceNoBudget,
        Self::None,
        Self::Reqwest1s,
        Self::Reqwest5s,
        Self::ReqwestRetry1s,
        Self::ReqwestRetry5s,
        Self::Tower1s,
        Self::Tower5s,
        Self::TowerResilience1s,
        Self::TowerResilience5s,
    ];

    /// The row's name, as `--stacks` spells it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Nresilience => "nresilience",
            Self::NresilienceNoOverload => "nresilience-no-overload",
            Self::NresilienceNoBudget => "nresilience-no-budget",
            Self::None => "none",
            Self::Reqwest1s => "reqwest-1s",
            Self::Reqwest5s => "reqwest-5s",
            Self::ReqwestRetry1s => "reqwest-retry-1s",
            Self::ReqwestRetry5s => "reqwest-retry-5s",
            Self::Tower1s => "tower-1s",
            Self::Tower5s => "tower-5s",
            Self::TowerResilience1s => "tower-resilience-1s",
            Self::TowerResilience5s => "tower-resilience-5s",
        }
    }

    /// How a peer row's hops retry, in a few words; an nresilience row's settings depend on
    /// the flags too, and are described by [`RowSettings`](super::RowSettings).
    #[must_use]
    pub const fn peer_description(peer: Peer) -> &'static str {
        const SHORT: Duration = Duration::from_secs(1);
        match peer {
            Peer::NoRetries => "reqwest 0.13, no retries, no timeout",
            Peer::Reqwest(SHORT) => "reqwest 0.13 retry::for_host, 2 retries, 1 s total timeout",
            Peer::Reqwest(_) => "reqwest 0.13 retry::for_host, 2 retries, 5 s total timeout",
            Peer::ReqwestRetry(SHORT) => "reqwest-retry 0.9, 3 retries, 1 s timeout per attempt",
            Peer::ReqwestRetry(_) => "reqwest-retry 0.9, 3 retries, 5 s timeout per attempt",
            Peer::Tower(SHORT) => "tower 0.5 Retry + TpsBudget, 3 retries, 1 s Timeout per attempt",
            Peer::Tower(_) => "tower 0.5 Retry + TpsBudget, 3 retries, 5 s Timeout per attempt",
            Peer::TowerResilience(SHORT) => {
                "tower-resilience 0.13 retry + token bucket + AIMD limit, 1 s per attempt"
            }
            Peer::TowerResilience(_) => {
                "tower-resilience 0.13 retry + token bucket + AIMD limit, 5 s per attempt"
            }
        }
    }

    /// The library the row's hops are built on.
    #[must_use]
    pub const fn library(self) -> Library {
        const SHORT: Duration = Duration::from_secs(1);
        const LONG: Duration = Duration::from_secs(5);
        const DEFAULTS: RetryArgs = RetryArgs {
            attempts: None,
            deadline_ms: None,
            overload: None,
            ceiling: None,
            chain_rules: None,
        };
        match self {
            Self::Nresilience => Library::Nresilience(Budget::On, DEFAULTS),
            Self::NresilienceNoOverload => Library::Nresilience(
                Budget::On,
                RetryArgs {
                    overload: Some(Overload::Off),
                    ..DEFAULTS
                },
            ),
            Self::NresilienceNoBudget => Library::Nresilience(Budget::Off, DEFAULTS),
            Self::None => Library::Peer(Peer::NoRetries),
            Self::Reqwest1s => Library::Peer(Peer::Reqwest(SHORT)),
            Self::Reqwest5s => Library::Peer(Peer::Reqwest(LONG)),
            Self::ReqwestRetry1s => Library::Peer(Peer::ReqwestRetry(SHORT)),
            Self::ReqwestRetry5s => Library::Peer(Peer::ReqwestRetry(LONG)),
            Self::Tower1s => Library::Peer(Peer::Tower(SHORT)),
            Self::Tower5s => Library::Peer(Peer::Tower(LONG)),
            Self::TowerResilience1s => Library::Peer(Peer::TowerResilience(SHORT)),
            Self::TowerResilience5s => Library::Peer(Peer::TowerResilience(LONG)),
        }
    }

    /// The nresilience row with `budget`.
    #[must_use]
    pub const fn nresilience(budget: Budget) -> Self {
        match budget {
            Budget::On => Self::Nresilience,
            Budget::Off => Self::NresilienceNoBudget,
        }
    }
}

impl Serialize for Stack {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Stack {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Self::ALL
            .into_iter()
            .find(|stack| stack.name() == name)
            .ok_or_else(|| D::Error::custom(format!("no row is named {name:?}")))
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn p1_every_row_is_named_as_the_flag_spells_it() {
        for stack in Stack::ALL {
            let flag = stack.to_possible_value().expect("every row can be picked");
            assert_eq!(flag.get_name(), stack.name());
            assert_eq!(Stack::from_str(stack.name(), false), Ok(stack));
        }
        assert_eq!(Stack::value_variants(), Stack::ALL);
    }

    #[test]
    fn p1_each_peer_runs_with_a_short_and_a_long_timeout() {
        let peers: Vec<Peer> = Stack::ALL
            .iter()
            .filter_map(|stack| match stack.library() {
                Library::Peer(peer) => Some(peer),
                Library::Nresilience(..) => None,
            })
            .collect();
        let (short, long) = (Duration::from_secs(1), Duration::from_secs(5));
        for with in [
            Peer::Reqwest,
            Peer::ReqwestRetry,
            Peer::Tower,
            Peer::TowerResilience,
        ] {
            assert!(peers.contains(&with(short)) && peers.contains(&with(long)));
        }
        assert!(peers.contains(&Peer::NoRetries));
    }
}
