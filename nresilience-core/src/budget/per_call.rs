//! Noticing budgets built one per call. A policy's automatic budget is private to it and its
//! clones; a policy built for each request, or resolved from a scoped container, is
//! discarded before its bucket has seen enough traffic to bound anything, and every call
//! retries on a full bucket: no budget at all. It cannot be refused — a policy built once
//! per call is legal — so it is reported, once, with a `tracing` warning and a counter.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use opentelemetry::global;
use opentelemetry::metrics::Counter;

use crate::telemetry::PER_CALL_BUDGETS;

/// Policies with budgets of their own built in one second past which they can only be one
/// per call: no process holds a hundred dependencies, each with a policy built that second.
const PER_SECOND: u64 = 100;

/// How many policies with budgets of their own a second of the process saw built.
#[derive(Debug, Default)]
pub(crate) struct BuildRate {
    second: AtomicU64,
    built: AtomicU64,
    warned: AtomicBool,
}

/// What one more build says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Built {
    /// Within the rate.
    Alone,
    /// Past it: this policy's budget is one of those built per call; `first` the first such
    /// build of the process.
    PerCall { first: bool },
}

impl BuildRate {
    /// One more policy with a budget of its own, built in `second` of the process. Counts are
    /// per second; a build that races a new second's reset may count in either.
    pub(crate) fn built(&self, second: u64) -> Built {
        if self.second.swap(second, Ordering::Relaxed) != second {
            self.built.store(0, Ordering::Relaxed);
        }
        if self.built.fetch_add(1, Ordering::Relaxed) < PER_SECOND {
            return Built::Alone;
        }
        Built::PerCall {
            first: !self.warned.swap(true, Ordering::Relaxed),
        }
    }
}

/// Notes a policy with a budget of its own built at `now`, and reports it when such
/// policies are built at a rate that can only mean one per call.
pub(crate) fn note_build(now: Instant) {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    static RATE: BuildRate = BuildRate {
        second: AtomicU64::new(0),
        built: AtomicU64::new(0),
        warned: AtomicBool::new(false),
    };
    let origin = *ORIGIN.get_or_init(|| now);
    let second = now.saturating_duration_since(origin).as_secs();
    if let Built::PerCall { first } = RATE.built(second) {
        reported(first);
    }
}

#[cold]
fn reported(first: bool) {
    static COUNTER: OnceLock<Counter<u64>> = OnceLock::new();
    COUNTER
        .get_or_init(|| {
            global::meter("nresilience")
                .u64_counter(PER_CALL_BUDGETS)
                .with_description(
                    "policies with budgets of their own built past 100 a second: one per call, bounding nothing",
                )
                .build()
        })
        .add(1, &[]);
    if first {
        tracing::warn!(
            "more than {PER_SECOND} retry policies with budgets of their own were built in one \
             second: a policy built per call (or per request scope) is discarded before its \
             budget sees enough traffic to bound anything, and every call retries on a full \
             bucket. Build one policy per dependency and clone it (clones share the budget), \
             or name a shared budget (RetryBudget::Shared). Reported once; \
             nresilience.budget.per_call counts them"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b1_a_hundred_budgets_a_second_are_alone_and_the_next_ones_per_call_reported_once() {
        let rate = BuildRate::default();
        for _ in 0..PER_SECOND {
            assert_eq!(rate.built(3), Built::Alone);
        }
        assert_eq!(rate.built(3), Built::PerCall { first: true });
        assert_eq!(rate.built(3), Built::PerCall { first: false });
        // A new second counts afresh, and the warning is not repeated.
        assert_eq!(rate.built(4), Built::Alone);
        for _ in 1..PER_SECOND {
            rate.built(4);
        }
        assert_eq!(rate.built(4), Built::PerCall { first: false });
    }

    #[test]
    fn b1_a_steady_ninety_a_second_is_never_per_call() {
        let rate = BuildRate::default();
        for second in 0..50 {
            for _ in 0..90 {
                assert_eq!(rate.built(second), Built::Alone);
            }
        }
    }
}
