//! A budget built per call is no budget — it never sees the successes that fund it (B1) —
//! and the library says so: more than a hundred
//! policies with budgets of their own built in a second are reported with one `tracing`
//! warning, and counted in `nresilience.budget.per_call`.
//!
//! Its own test binary: the report is once per process.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use nresilience_core::{RetryBudget, RetryPolicy};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl<S: Subscriber> Layer<S> for Warnings {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        struct Message(String);
        impl Visit for Message {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        if *event.metadata().level() == Level::WARN {
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.lock().unwrap().push(message.0);
        }
    }
}

#[test]
fn b1_policies_built_one_per_call_are_reported_once_and_shared_or_reconfigured_ones_never() {
    let warnings = Warnings::default();
    let subscriber = tracing_subscriber::registry().with(warnings.clone());
    tracing::subscriber::with_default(subscriber, || {
        // A shared budget is one bucket however many policies name it; a reconfigured policy
        // keeps its bucket: neither is a budget of its own.
        let shared = RetryBudget::Shared("orders".into(), Default::default());
        let base = RetryPolicy::builder().build().unwrap();
        for _ in 0..300 {
            RetryPolicy::builder()
                .budget(shared.clone())
                .build()
                .unwrap();
            base.reconfigure().max_attempts(2).build().unwrap();
        }
        assert_eq!(warnings.0.lock().unwrap().len(), 0, "nothing per call yet");

        // A policy per call, as a handler that builds its own would.
        for _ in 0..300 {
            RetryPolicy::default();
        }
        let said = warnings.0.lock().unwrap().clone();
        assert_eq!(said.len(), 1, "reported once: {said:?}");
        assert!(said[0].contains("a policy built per call"), "{said:?}");
    });
}
