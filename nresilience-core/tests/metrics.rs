//! Metrics through the OpenTelemetry API, read back from an in-memory exporter (SPEC B12).
//!
//! Its own test binary: the meter provider is process-wide.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nresilience_core::fleet::{Allowance, RetryShare, ServerAdmission};
use nresilience_core::nesting::{self, NestingSource};
use nresilience_core::overload::OverloadControl;
use nresilience_core::telemetry::FleetGauges;
use nresilience_core::telemetry::{
    ADMISSION_LIMIT, ADMISSION_REFUSALS, ATTEMPTS, ATTEMPT_DURATION, BUDGET_ALLOWANCE,
    BUDGET_UTILIZATION, CALLS, CALL_DURATION, FLEET_ACCEPTED, FLEET_ALLOWANCE, FLEET_RETRIES,
    HEDGES, NESTED_RETRIES, OVERLOAD_LIMIT, OVERLOAD_REFUSALS, PER_CALL_BUDGETS, REJECTIONS,
};
use nresilience_core::{
    clock, Backoff, BudgetOptions, Criticality, Hedge, Jitter, RetryBudget, RetryPolicy,
};
use opentelemetry::global;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

mod one_at_a_time;

/// `(metric, sorted tags)` → summed value (count for histograms).
type Points = HashMap<(String, Vec<(String, String)>), f64>;

fn collect(provider: &SdkMeterProvider, exporter: &InMemoryMetricExporter) -> Points {
    provider.force_flush().unwrap();
    let mut points = Points::new();
    for resource in exporter.get_finished_metrics().unwrap() {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics() {
                let name = metric.name().to_owned();
                let mut put = |attrs: Vec<(String, String)>, value: f64| {
                    let mut attrs = attrs;
                    attrs.sort();
                    points.insert((name.clone(), attrs), value);
                };
                let tags = |it: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
                    it.map(|kv| (kv.key.to_string(), kv.value.to_string()))
                        .collect::<Vec<_>>()
                };
                match metric.data() {
                    AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                        for p in sum.data_points() {
                            put(tags(&mut p.attributes()), p.value() as f64);
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        for p in h.data_points() {
                            put(tags(&mut p.attributes()), p.count() as f64);
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Gauge(g)) => {
                        for p in g.data_points() {
                            put(tags(&mut p.attributes()), p.value());
                        }
                    }
                    AggregatedMetrics::U64(MetricData::Gauge(g)) => {
                        for p in g.data_points() {
                            put(tags(&mut p.attributes()), p.value() as f64);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    points
}

fn get(points: &Points, name: &str, tags: &[(&str, &str)]) -> f64 {
    let mut key: Vec<(String, String)> = tags
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    key.sort();
    points
        .get(&(name.to_owned(), key))
        .copied()
        .unwrap_or_else(|| panic!("no {name} {tags:?} in {points:#?}"))
}

#[tokio::test(start_paused = true)]
async fn b11_b12_c3_c4_hg2_o4_f2_f3_f4_counters_histograms_and_gauges_carry_the_original_names_and_tags(
) {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    global::set_meter_provider(provider.clone());

    // B11: the budget's gauge is observed at every collection, from the first: a policy no
    // call has used reads 0 (its bucket is full), a policy without a budget has no series,
    // and a keyed bucket is its own series.
    let idle = RetryPolicy::builder().name("idle").build().unwrap();
    let unbudgeted = RetryPolicy::builder()
        .name("unbudgeted")
        .budget(RetryBudget::None)
        .build()
        .unwrap();
    let first = collect(&provider, &exporter);
    assert_eq!(
        get(
            &first,
            BUDGET_UTILIZATION,
            &[("nresilience.policy", "idle")]
        ),
        0.0
    );
    let keyed = RetryPolicy::builder()
        .name("keyed")
        .budget(
            RetryBudget::automatic().with_options(
                BudgetOptions::default()
                    .minimum_per_second(0.0)
                    .capacity(2.0),
            ),
        )
        .build()
        .unwrap();
    let now = clock::now();
    let db = keyed.keyed_bucket("db:5432", now).unwrap();
    assert!(db.try_withdraw(now, Criticality::Normal));
    // F3: another dependency advised its bucket a quarter of its budget.
    let cache = keyed.keyed_bucket("cache:6379", now).unwrap();
    cache.follow(Allowance::new(0.25), now);

    let options = BudgetOptions::default()
        .minimum_per_second(0.0)
        .capacity(2.0);
    let policy = RetryPolicy::builder()
        .name("orders")
        .backoff(Backoff::none())
        .attempt_ceiling(None)
        .budget(RetryBudget::automatic().with_options(options))
        .build()
        .unwrap();

    policy
        .execute(|_| async { Ok::<(), ()>(()) })
        .await
        .unwrap();
    // Three attempts, two retries: the bucket's two tokens.
    let _ = policy.execute(|_| async { Err::<(), ()>(()) }).await;
    // The first attempt runs, the retry is refused.
    let _ = policy.execute(|_| async { Err::<(), ()>(()) }).await;
    nesting::scope(NestingSource::Header, async {
        policy
            .execute(|_| async { Ok::<(), ()>(()) })
            .await
            .unwrap();
    })
    .await;
    // Dropped by its caller while it waits for its retry.
    let patient = RetryPolicy::builder()
        .name("patient")
        .backoff(Backoff::constant(Duration::from_secs(1)).with_jitter(Jitter::None))
        .attempt_ceiling(None)
        .build()
        .unwrap();
    let call = patient.execute(|_| async { Err::<(), ()>(()) });
    assert!(tokio::time::timeout(Duration::from_millis(10), call)
        .await
        .is_err());
    tokio::time::advance(Duration::from_millis(1)).await;

    // HG2: one hedge sent, then one the emptied bucket suppressed.
    let hedging = RetryPolicy::builder()
        .name("hedging")
        .backoff(Backoff::none())
        .attempt_ceiling(None)
        .budget(
            RetryBudget::automatic().with_options(
                BudgetOptions::default()
                    .minimum_per_second(0.0)
                    .capacity(1.0),
            ),
        )
        .hedge(Some(Hedge::after(Duration::from_millis(50))))
        .build()
        .unwrap();
    for _ in 0..2 {
        hedging
            .execute(|attempt| async move {
                let wait = if attempt.is_hedge() { 10 } else { 200 };
                tokio::time::sleep(Duration::from_millis(wait)).await;
                Ok::<(), ()>(())
            })
            .await
            .unwrap();
    }

    // O4: a call overload control refuses, per dependency.
    let now = std::time::Instant::now();
    let (saturating, _running) = one_at_a_time::one_running("saturating", now);
    one_at_a_time::refused(&saturating, now);

    // F2: a service's view of its fleet, 80 retries among 200 first attempts.
    let share = Arc::new(RetryShare::new(0.1, now).unwrap());
    let fleet_gauges = FleetGauges::new(&share);
    for i in 0..200 {
        share.record(false, now);
        if i % 5 < 2 {
            share.record(true, now);
        }
    }
    // F4: a service whose limit binds at 2 refuses a retry with one request in a handler.
    let control = OverloadControl::new().floor(1).initial(2);
    let admission = ServerAdmission::with_control(control, now).unwrap();
    let handled = admission
        .admit(false, Criticality::Normal, None, now)
        .unwrap();
    assert!(admission
        .admit(true, Criticality::Normal, None, now)
        .is_err());
    admission.finished(handled, now);

    // A policy per call: past a hundred budgets of their own in a second, each is counted.
    for _ in 0..200 {
        drop(RetryPolicy::builder().name("per-call").build().unwrap());
    }

    let points = collect(&provider, &exporter);
    assert!(get(&points, PER_CALL_BUDGETS, &[]) >= 100.0, "{points:#?}");
    assert_eq!(get(&points, FLEET_RETRIES, &[]), 0.4);
    assert_eq!(get(&points, FLEET_ACCEPTED, &[]), 0.1);
    assert_eq!(get(&points, FLEET_ALLOWANCE, &[]), 0.625); // the floor cut to a quarter
    let refusal = [
        ("nresilience.cause", "limit"),
        ("nresilience.attempt", "retry"),
        c_normal(),
    ];
    assert_eq!(get(&points, ADMISSION_REFUSALS, &refusal), 1.0);
    assert_eq!(get(&points, ADMISSION_LIMIT, &[]), 2.0);
    drop(fleet_gauges);
    let s = ("nresilience.policy", "saturating");
    // O4: the refusal by cause, per dependency.
    assert_eq!(
        get(
            &points,
            OVERLOAD_REFUSALS,
            &[
                s,
                ("nresilience.cause", "limit"),
                c_normal(),
                ("nresilience.dependency", "db:5432"),
            ]
        ),
        1.0
    );
    assert_eq!(
        get(
            &points,
            CALLS,
            &[s, ("nresilience.outcome", "saturated"), c_normal()]
        ),
        1.0
    );
    assert_eq!(
        get(
            &points,
            REJECTIONS,
            &[s, ("nresilience.reason", "saturated"), c_normal()]
        ),
        1.0
    );
    assert_eq!(
        get(
            &points,
            OVERLOAD_LIMIT,
            &[s, ("nresilience.dependency", "db:5432")]
        ),
        1.0
    );
    let h = ("nresilience.policy", "hedging");
    assert_eq!(
        get(&points, HEDGES, &[h, ("nresilience.outcome", "sent")]),
        1.0
    );
    assert_eq!(
        get(&points, HEDGES, &[h, ("nresilience.outcome", "suppressed")]),
        1.0
    );
    // The first attempt the hedge beat is an attempt too, dropped unanswered.
    assert_eq!(
        get(
            &points,
            ATTEMPTS,
            &[h, ("nresilience.verdict", "cancelled")]
        ),
        1.0
    );
    // It has no duration: no (empty) duration series for it.
    assert!(
        !points.keys().any(|(name, tags)| name == ATTEMPT_DURATION
            && tags.iter().any(|(_, value)| value == "cancelled")),
        "{points:#?}"
    );
    let p = ("nresilience.policy", "orders");
    // C3: calls and refusals carry the call's criticality.
    let c = ("nresilience.criticality", "normal");
    assert_eq!(
        get(
            &points,
            CALLS,
            &[p, ("nresilience.outcome", "succeeded"), c]
        ),
        2.0
    );
    assert_eq!(
        get(
            &points,
            CALLS,
            &[p, ("nresilience.outcome", "attempts_exhausted"), c]
        ),
        1.0
    );
    assert_eq!(
        get(
            &points,
            CALLS,
            &[p, ("nresilience.outcome", "budget_exhausted"), c]
        ),
        1.0
    );
    assert_eq!(
        get(&points, ATTEMPTS, &[p, ("nresilience.verdict", "ok")]),
        2.0
    );
    assert_eq!(
        get(
            &points,
            ATTEMPTS,
            &[p, ("nresilience.verdict", "transient")]
        ),
        4.0
    );
    assert_eq!(
        get(
            &points,
            REJECTIONS,
            &[p, ("nresilience.reason", "budget_exhausted"), c]
        ),
        1.0
    );
    assert_eq!(
        get(
            &points,
            NESTED_RETRIES,
            &[
                p,
                ("nresilience.source", "header"),
                // C4: how deep and how far the amplification reaches, as on the span.
                ("nresilience.nesting.depth", "1"),
                ("nresilience.potential_attempts", "3"),
            ]
        ),
        1.0
    );
    assert_eq!(
        get(
            &points,
            CALL_DURATION,
            &[p, ("nresilience.outcome", "succeeded"), c]
        ),
        2.0
    );
    assert_eq!(
        get(
            &points,
            ATTEMPT_DURATION,
            &[p, ("nresilience.verdict", "transient")]
        ),
        4.0
    );
    assert_eq!(
        get(
            &points,
            CALLS,
            &[
                ("nresilience.policy", "patient"),
                ("nresilience.outcome", "cancelled"),
                c
            ]
        ),
        1.0
    );
    // The bucket as the collection found it: the refusal emptied it, the nested call's
    // success put a tenth of a token back (1 - 0.1 / 2).
    assert!((get(&points, BUDGET_UTILIZATION, &[p]) - 0.95).abs() < 1e-9);
    let k = ("nresilience.policy", "keyed");
    assert_eq!(
        get(
            &points,
            BUDGET_UTILIZATION,
            &[k, ("nresilience.dependency", "db:5432")]
        ),
        0.5
    );
    // The policy's own bucket, which no unkeyed call has used: full.
    assert_eq!(get(&points, BUDGET_UTILIZATION, &[k]), 0.0);
    // F3: each bucket's advised allowance beside its utilization; unadvised, the whole.
    let cache_key = ("nresilience.dependency", "cache:6379");
    assert_eq!(get(&points, BUDGET_ALLOWANCE, &[k, cache_key]), 0.25);
    let db_key = ("nresilience.dependency", "db:5432");
    assert_eq!(get(&points, BUDGET_ALLOWANCE, &[k, db_key]), 1.0);
    assert_eq!(get(&points, BUDGET_ALLOWANCE, &[k]), 1.0);
    assert_eq!(get(&points, BUDGET_ALLOWANCE, &[p]), 1.0);
    assert_eq!(
        get(
            &points,
            BUDGET_UTILIZATION,
            &[("nresilience.policy", "idle")]
        ),
        0.0
    );
    assert!(
        !points.keys().any(|(name, tags)| name == BUDGET_UTILIZATION
            && tags.iter().any(|(_, value)| value == "unbudgeted")),
        "a policy without a budget has no utilization: {points:#?}"
    );
    drop((idle, unbudgeted));
    // Durations in seconds get buckets for seconds, not the SDK's default (0 to 10,000).
    for name in [CALL_DURATION, ATTEMPT_DURATION] {
        let bounds = bounds(&exporter, name);
        assert_eq!(bounds.first(), Some(&0.005), "{name}: {bounds:?}");
        assert_eq!(bounds.last(), Some(&10.0), "{name}: {bounds:?}");
    }

    // O4, F4: a limit is recorded when it moves, by the event that moves it. A service that
    // handled one request in 10 ms, then forty held with none answered: once the work has
    // accumulated for two windows, the limit binds where it stood, and reading it is the event
    // that records it.
    let stalled = ServerAdmission::new(now);
    let initial = stalled.limit(now);
    let seen = stalled
        .admit(false, Criticality::Normal, None, now)
        .unwrap();
    stalled.finished(seen, now + Duration::from_millis(10));
    let start = now + Duration::from_secs(1);
    let held: Vec<_> = (0..40)
        .map(|_| {
            stalled
                .admit(false, Criticality::Normal, None, start)
                .unwrap()
        })
        .collect();
    let mut later = start;
    while stalled.limit(later) == initial {
        later += Duration::from_millis(100);
        assert!(
            later < now + Duration::from_secs(5),
            "the limit never moved"
        );
    }
    let points = collect(&provider, &exporter);
    assert_eq!(
        get(&points, ADMISSION_LIMIT, &[]),
        f64::from(stalled.limit(later))
    );
    drop(held);
}

fn c_normal() -> (&'static str, &'static str) {
    ("nresilience.criticality", "normal")
}

/// The bucket boundaries of the histogram `name`'s first data point.
fn bounds(exporter: &InMemoryMetricExporter, name: &str) -> Vec<f64> {
    for resource in exporter.get_finished_metrics().unwrap() {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics().filter(|metric| metric.name() == name) {
                if let AggregatedMetrics::F64(MetricData::Histogram(h)) = metric.data() {
                    if let Some(point) = h.data_points().next() {
                        return point.bounds().collect();
                    }
                }
            }
        }
    }
    panic!("no histogram {name}")
}
