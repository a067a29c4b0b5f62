//! Counts `NestedRetry` reports by hop, reading the policy name each span carries.

use std::sync::Arc;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, Layer};

use super::stats::{Hop, Stats};

/// A tracing layer that counts `NestedRetry` spans into [`Stats`] by their policy, which the
/// demo names after the hop.
#[derive(Debug)]
pub struct NestedCounter {
    stats: Arc<Stats>,
}

impl NestedCounter {
    /// Counts into `stats`.
    pub fn new(stats: Arc<Stats>) -> Self {
        Self { stats }
    }
}

struct PolicyField(Option<Hop>);

impl Visit for PolicyField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "nresilience.policy" {
            self.0 = Hop::ALL.into_iter().find(|hop| hop.name() == value);
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl<S: Subscriber> Layer<S> for NestedCounter {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() == "NestedRetry" {
            let mut policy = PolicyField(None);
            attrs.record(&mut policy);
            if let Some(hop) = policy.0 {
                self.stats.nested(hop);
            }
        }
    }
}
