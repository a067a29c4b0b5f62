use proptest::prelude::*;
use rand::{rngs::StdRng, Rng, SeedableRng};

use super::*;

/// `2^(1/16) − 1`, the documented bound, with room for float rounding at bucket edges.
const MAX_RELATIVE_ERROR: f64 = 0.045;

const WINDOW: Duration = Duration::from_secs(300);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn relative_error(got: Duration, want: Duration) -> f64 {
    (got.as_secs_f64() - want.as_secs_f64()).abs() / want.as_secs_f64()
}

fn exact_quantile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    samples[rank - 1]
}

proptest! {
    #[test]
    fn e5_the_bucket_lookup_agrees_with_the_definition(
        nanos in prop_oneof![0u64..10_000_000_000_000, any::<u64>()]
    ) {
        prop_assert_eq!(bucket_of(Duration::from_nanos(nanos)), bucket_by_log2(nanos));
    }
}

#[test]
fn e5_the_bucket_lookup_agrees_with_the_definition_at_every_edge() {
    for &edge in &EDGES.lower[..BUCKETS - 1] {
        for nanos in edge.saturating_sub(2)..=edge.saturating_add(2) {
            assert_eq!(
                bucket_of(Duration::from_nanos(nanos)),
                bucket_by_log2(nanos)
            );
        }
    }
    assert_eq!(bucket_of(Duration::MAX), BUCKETS - 1);
    assert_eq!(bucket_of(Duration::ZERO), 0);
}

#[test]
fn quantile_is_none_below_the_minimum_samples() {
    // K4, E5: at least 20 samples before the estimate applies.
    let start = Instant::now();
    let mut window = LatencyWindow::new(WINDOW, start);
    for _ in 0..19 {
        window.record(ms(10), start);
    }
    assert_eq!(window.count(start), 19);
    assert_eq!(window.quantile(0.5, start), None);
    window.record(ms(10), start);
    assert!(window.quantile(0.5, start).is_some());
}

#[test]
fn minimum_samples_is_configurable() {
    let start = Instant::now();
    let mut window = LatencyWindow::new(WINDOW, start).with_minimum_samples(1);
    assert_eq!(window.minimum_samples(), 1);
    assert_eq!(window.quantile(0.5, start), None);
    window.record(ms(10), start);
    assert!(window.quantile(0.5, start).is_some());

    let zero = LatencyWindow::new(WINDOW, start).with_minimum_samples(0);
    assert_eq!(zero.quantile(0.5, start), None);
}

#[test]
fn median_and_p95_of_uniform_latencies_are_within_the_documented_error() {
    let start = Instant::now();
    let mut window = LatencyWindow::new(WINDOW, start);
    for n in 1..=1_000 {
        window.record(ms(n), start + Duration::from_millis(n));
    }
    let now = start + Duration::from_secs(2);
    let p50 = window.quantile(0.5, now).expect("1000 samples");
    let p95 = window.quantile(0.95, now).expect("1000 samples");
    assert!(
        relative_error(p50, ms(500)) <= MAX_RELATIVE_ERROR,
        "{p50:?}"
    );
    assert!(
        relative_error(p95, ms(950)) <= MAX_RELATIVE_ERROR,
        "{p95:?}"
    );
}

#[test]
fn quantiles_of_a_heavy_tailed_distribution_are_within_the_documented_error() {
    // E5, S1: a Pareto tail from 20 ms, the shape the attempt ceiling is fitted to.
    let start = Instant::now();
    let mut window = LatencyWindow::new(WINDOW, start);
    let mut rng = StdRng::seed_from_u64(42);
    let mut samples: Vec<Duration> = (0..10_000)
        .map(|_| {
            let u = 1.0 - rng.random::<f64>();
            Duration::from_secs_f64(0.020 * u.powf(-1.0 / 1.5))
        })
        .collect();
    for sample in &samples {
        window.record(*sample, start);
    }
    for q in [0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0] {
        let got = window.quantile(q, start).expect("10000 samples");
        let want = exact_quantile(&mut samples, q);
        assert!(
            relative_error(got, want) <= MAX_RELATIVE_ERROR,
            "q {q}: {got:?} vs {want:?}"
        );
    }
}

#[test]
fn old_slices_expire_after_the_window() {
    let start = Instant::now();
    let mut window = LatencyWindow::new(Duration::from_secs(10), start);
    for _ in 0..30 {
        window.record(ms(5), start);
    }
    assert_eq!(window.count(start + Duration::from_millis(9_999)), 30);
    assert!(window
        .quantile(0.5, start + Duration::from_millis(9_999))
        .is_some());
    assert_eq!(window.count(start + Duration::from_secs(10)), 0);
    assert_eq!(window.quantile(0.5, start + Duration::from_secs(10)), None);
}

#[test]
fn a_sample_counts_for_at_least_nine_tenths_of_the_window() {
    let start = Instant::now();
    let mut window = LatencyWindow::new(Duration::from_secs(10), start);
    let recorded = start + Duration::from_millis(999);
    window.record(ms(5), recorded);
    assert_eq!(window.count(recorded + Duration::from_millis(9_000)), 1);
    assert_eq!(window.count(recorded + Duration::from_millis(10_000)), 0);
}

#[test]
fn a_reused_slice_forgets_what_it_held() {
    let start = Instant::now();
    let mut window = LatencyWindow::new(Duration::from_secs(10), start).with_minimum_samples(1);
    for _ in 0..50 {
        window.record(ms(1), start);
    }
    // Same slot, one full window later.
    let later = start + Duration::from_secs(10);
    window.record(ms(100), later);
    assert_eq!(window.count(later), 1);
    let median = window.quantile(0.5, later).expect("one sample");
    assert!(relative_error(median, ms(100)) <= MAX_RELATIVE_ERROR);
}

#[test]
fn the_window_slides_a_tenth_at_a_time() {
    let start = Instant::now();
    let mut window = LatencyWindow::new(Duration::from_secs(10), start).with_minimum_samples(1);
    for second in 0..20u64 {
        window.record(ms(second + 1), start + Duration::from_secs(second));
    }
    let now = start + Duration::from_secs(19);
    assert_eq!(window.count(now), 10);
    let min = window.quantile(0.0, now).expect("ten samples");
    assert!(relative_error(min, ms(11)) <= MAX_RELATIVE_ERROR, "{min:?}");
}

#[test]
fn an_earlier_now_is_taken_as_the_latest_seen() {
    let start = Instant::now();
    let mut window = LatencyWindow::new(Duration::from_secs(10), start).with_minimum_samples(1);
    let late = start + Duration::from_secs(30);
    window.record(ms(7), late);
    // Recorded "at" start, but counted at `late`: it must not land in a dead slice.
    window.record(ms(7), start);
    assert_eq!(window.count(start), 2);
    assert_eq!(window.count(late), 2);
    assert!(window.quantile(0.5, start).is_some());
}

#[test]
fn a_now_before_construction_does_not_panic() {
    let start = Instant::now();
    let later = start + Duration::from_secs(60);
    let mut window = LatencyWindow::new(WINDOW, later).with_minimum_samples(1);
    window.record(ms(3), start);
    assert_eq!(window.count(start), 1);
}

#[test]
fn a_far_future_now_does_not_panic() {
    let start = Instant::now();
    let Some(far) = start.checked_add(Duration::from_secs(100 * 365 * 24 * 3_600)) else {
        return;
    };
    let mut window = LatencyWindow::new(Duration::from_nanos(1), start).with_minimum_samples(1);
    window.record(ms(3), far);
    assert_eq!(window.count(far), 1);
    assert!(window.quantile(1.0, far).is_some());
}

#[test]
fn a_zero_window_holds_samples_for_at_most_a_nanosecond() {
    let start = Instant::now();
    let mut window = LatencyWindow::new(Duration::ZERO, start).with_minimum_samples(1);
    window.record(ms(3), start);
    assert_eq!(window.count(start + Duration::from_millis(1)), 0);
}

#[test]
fn huge_and_zero_latencies_land_in_the_edge_buckets() {
    let start = Instant::now();
    let mut window = LatencyWindow::new(WINDOW, start).with_minimum_samples(1);
    window.record(Duration::ZERO, start);
    window.record(Duration::MAX, start);
    let min = window.quantile(0.0, start).expect("two samples");
    let max = window.quantile(1.0, start).expect("two samples");
    assert!(min <= Duration::from_nanos(1_100), "{min:?}");
    assert!(max >= Duration::from_secs(68 * 60), "{max:?}");
    assert!(max <= Duration::from_secs(72 * 60), "{max:?}");
}

#[test]
fn quantile_clamps_q_and_refuses_nan() {
    let start = Instant::now();
    let mut window = LatencyWindow::new(WINDOW, start).with_minimum_samples(1);
    window.record(ms(1), start);
    window.record(ms(1_000), start);
    assert_eq!(window.quantile(f64::NAN, start), None);
    assert_eq!(window.quantile(-3.0, start), window.quantile(0.0, start));
    assert_eq!(window.quantile(7.0, start), window.quantile(1.0, start));
    assert_eq!(
        window.quantile(f64::INFINITY, start),
        window.quantile(1.0, start)
    );
}

#[test]
fn memory_is_about_ten_kibibytes_whatever_the_traffic() {
    assert_eq!(std::mem::size_of::<Slice>(), 1_040);
    assert_eq!(SLICES * std::mem::size_of::<Slice>(), 10_400);
    assert!(std::mem::size_of::<LatencyWindow>() <= 128);
    let window = LatencyWindow::new(WINDOW, Instant::now());
    assert_eq!(window.slices.len(), SLICES);
}

#[test]
fn every_bucket_answers_within_the_documented_error_of_its_edges() {
    for bucket in 0..BUCKETS {
        let low = SMALLEST_NANOS * (bucket as f64 / BUCKETS_PER_DOUBLING).exp2();
        let high = SMALLEST_NANOS * ((bucket + 1) as f64 / BUCKETS_PER_DOUBLING).exp2();
        let mid = representative(bucket).as_nanos() as f64;
        assert!(mid / low - 1.0 <= MAX_RELATIVE_ERROR, "bucket {bucket}");
        assert!(1.0 - mid / high <= MAX_RELATIVE_ERROR, "bucket {bucket}");
    }
    assert!(representative(BUCKETS - 1) >= Duration::from_secs(68 * 60));
}

#[test]
fn debug_is_short() {
    let window = LatencyWindow::new(WINDOW, Instant::now());
    let text = format!("{window:?}");
    assert_eq!(
        text,
        "LatencyWindow { window: 300s, minimum_samples: 20, count: 0, .. }"
    );
}

proptest! {
    #[test]
    fn any_latency_is_reported_within_the_documented_error(nanos in 1_000u64..4_000_000_000_000) {
        let latency = Duration::from_nanos(nanos);
        let got = representative(bucket_of(latency));
        prop_assert!(relative_error(got, latency) <= MAX_RELATIVE_ERROR, "{got:?} for {latency:?}");
    }

    #[test]
    fn quantile_is_within_the_documented_error_of_the_exact_one(
        mut micros in proptest::collection::vec(1u64..3_600_000_000, 1..300),
        q in 0.0f64..=1.0,
    ) {
        let start = Instant::now();
        let mut window = LatencyWindow::new(WINDOW, start).with_minimum_samples(1);
        for m in &micros {
            window.record(Duration::from_micros(*m), start);
        }
        micros.sort_unstable();
        let mut samples: Vec<Duration> = micros.into_iter().map(Duration::from_micros).collect();
        let want = exact_quantile(&mut samples, q);
        let got = window.quantile(q, start).expect("at least one sample");
        prop_assert!(relative_error(got, want) <= MAX_RELATIVE_ERROR, "{got:?} vs {want:?}");
    }

    #[test]
    fn recording_anything_at_any_time_never_panics(
        events in proptest::collection::vec((any::<u64>(), any::<u32>(), 0u64..1_000_000_000), 0..100),
        window_ms in 0u64..1_000_000,
    ) {
        let start = Instant::now();
        let mut window = LatencyWindow::new(Duration::from_millis(window_ms), start);
        for (latency_ns, extra_ns, at_ms) in events {
            let latency = Duration::from_nanos(latency_ns) * (extra_ns % 4 + 1);
            let now = start + Duration::from_millis(at_ms);
            window.record(latency, now);
            let _ = window.quantile(0.95, now);
            prop_assert!(window.count(now) <= 100);
        }
    }
}
