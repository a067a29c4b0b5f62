//! Counts `NestedRetry` reports by hop, reading the policy name each span carries, and the
//! largest potential amplification they report.

use std::sync::{Arc, PoisonError, RwLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, Layer};

use super::stats::{Hop, Stats};

/// The [`Stats`] of the run going on: a process that runs the chain twice (budgets off, then
/// on) counts each run's reports into its own.
#[derive(Debug)]
pub struct CurrentRun {
    stats: RwLock<Arc<Stats>>,
}

impl CurrentRun {
    /// Counting into `stats`.
    pub fn new(stats: Arc<Stats>) -> Self {
        Self {
            stats: RwLock::new(stats),
        }
    }

    /// Counts into `stats` from now on.
    pub fn start(&self, stats: Arc<Stats>) {
        *self.stats.write().unwrap_or_else(PoisonError::into_inner) = stats;
    }

    /// The run's counters.
    pub fn stats(&self) -> Arc<Stats> {
        Arc::clone(&self.stats.read().unwrap_or_else(PoisonError::into_inner))
    }
}

/// A tracing layer that counts `NestedRetry` spans into the current run's [`Stats`] by their
/// policy, which the demo names after the hop.
#[derive(Debug)]
pub struct NestedCounter {
    run: Arc<CurrentRun>,
}

impl NestedCounter {
    /// Counts into whatever `run` holds when a report arrives.
    pub fn new(run: Arc<CurrentRun>) -> Self {
        Self { run }
    }
}

/// The fields of a `NestedRetry` span the demo reads: the hop, by the policy's name, and
/// the attempts that could reach the dependency through the nested call.
#[derive(Default)]
struct NestedFields {
    hop: Option<Hop>,
    potential_attempts: u64,
}

impl Visit for NestedFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "nresilience.policy" {
            self.hop = Hop::ALL.into_iter().find(|hop| hop.name() == value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "nresilience.potential_attempts" {
            self.potential_attempts = u64::try_from(value).unwrap_or(0);
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl<S: Subscriber> Layer<S> for NestedCounter {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() == "NestedRetry" {
            let mut fields = NestedFields::default();
            attrs.record(&mut fields);
            if let Some(hop) = fields.hop {
                self.run.stats().nested(hop, fields.potential_attempts);
            }
        }
    }
}
