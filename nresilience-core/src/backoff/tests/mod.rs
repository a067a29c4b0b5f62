use std::time::Duration;

use proptest::prelude::*;
use rand::{rngs::StdRng, SeedableRng};

use super::*;

mod validation;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn transient(attempt: u32) -> NextAttempt {
    NextAttempt::new(attempt, RetryKind::Transient)
}

fn throttled(attempt: u32) -> NextAttempt {
    NextAttempt::new(attempt, RetryKind::Throttled)
}

fn rng() -> StdRng {
    StdRng::seed_from_u64(42)
}

fn delays(backoff: &Backoff, next: fn(u32) -> NextAttempt, attempts: u32) -> Vec<Duration> {
    let mut rng = rng();
    (2..2 + attempts)
        .map(|n| backoff.compute_with(&next(n), &mut rng))
        .collect()
}

// ===== the curve (K12) =====

#[test]
fn transient_delays_double_from_100ms_up_to_the_30s_cap() {
    // K1, K12
    let backoff = Backoff::default().with_jitter(Jitter::None);
    let expected = [
        100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000, 30_000,
    ];
    assert_eq!(delays(&backoff, transient, 11), expected.map(ms).to_vec());
}

#[test]
fn throttled_delays_double_from_1s() {
    // K1, K12
    let backoff = Backoff::default().with_jitter(Jitter::None);
    let expected = [1, 2, 4, 8, 16, 30, 30];
    assert_eq!(delays(&backoff, throttled, 7), expected.map(secs).to_vec());
}

#[test]
fn attempts_before_the_first_retry_are_served_the_base() {
    // K12: the first retry is attempt 2
    let backoff = Backoff::default().with_jitter(Jitter::None);
    assert_eq!(backoff.compute(&transient(0)), ms(100));
    assert_eq!(backoff.compute(&transient(1)), ms(100));
    assert_eq!(backoff.compute(&throttled(1)), secs(1));
}

#[test]
fn fractional_factor_grows_the_delay_exactly() {
    let backoff = Backoff::default()
        .with_factor(1.5)
        .with_jitter(Jitter::None);
    let expected = [100_000, 150_000, 225_000, 337_500].map(Duration::from_micros);
    assert_eq!(delays(&backoff, transient, 4), expected.to_vec());
}

#[test]
fn huge_attempt_saturates_at_the_cap() {
    // K12
    let backoff = Backoff::default().with_jitter(Jitter::None);
    assert_eq!(backoff.compute(&transient(u32::MAX)), secs(30));
    assert_eq!(backoff.compute(&throttled(u32::MAX)), secs(30));
    assert!(Backoff::default().compute(&transient(u32::MAX)) <= secs(30));
}

#[test]
fn huge_attempt_without_a_cap_saturates_without_panicking() {
    // K8, K12
    let backoff = Backoff::default()
        .with_maximum_delay(None)
        .with_jitter(Jitter::None);
    assert_eq!(backoff.compute(&transient(u32::MAX)), Duration::MAX);
    assert_eq!(backoff.compute(&transient(2_000)), Duration::MAX);
    for jitter in [Jitter::Full, Jitter::Equal] {
        let jittered = backoff.clone().with_jitter(jitter);
        assert!(jittered.compute(&transient(u32::MAX)) <= Duration::MAX);
    }
}

#[test]
fn uncapped_curve_keeps_growing_past_30s() {
    // K8
    let backoff = Backoff::default()
        .with_maximum_delay(None)
        .with_jitter(Jitter::None);
    assert_eq!(backoff.compute(&transient(12)), ms(102_400));
}

#[test]
fn a_zero_base_never_waits() {
    let backoff = Backoff::default()
        .with_transient_base(Duration::ZERO)
        .with_maximum_delay(None)
        .with_factor(f64::INFINITY);
    assert_eq!(backoff.compute(&transient(u32::MAX)), Duration::ZERO);
}

#[test]
fn invalid_factors_never_panic_or_go_negative() {
    // K12: never negative, never overflowing, whatever `validate` would say.
    for factor in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -2.0,
        0.0,
        0.5,
        1e300,
    ] {
        for cap in [None, Some(secs(30))] {
            let backoff = Backoff::default()
                .with_factor(factor)
                .with_maximum_delay(cap)
                .with_jitter(Jitter::None);
            for attempt in [0, 2, 3, 4, 1_000, u32::MAX] {
                let delay = backoff.compute(&transient(attempt));
                assert!(cap.is_none_or(|cap| delay <= cap), "{factor} {attempt}");
            }
        }
    }
}

#[test]
fn full_jitter_spreads_delays_over_the_whole_interval() {
    // K7
    let backoff = Backoff::default();
    let mut rng = rng();
    let samples: Vec<Duration> = (0..2_000)
        .map(|_| backoff.compute_with(&transient(2), &mut rng))
        .collect();
    let mean = samples.iter().sum::<Duration>() / 2_000;
    assert!(samples.iter().all(|d| *d <= ms(100)));
    assert!(samples.iter().any(|d| *d < ms(10)));
    assert!(samples.iter().any(|d| *d > ms(90)));
    assert!(mean > ms(45) && mean < ms(55), "mean {mean:?}");
}

proptest! {
    // K7, K12: jitter never leaves [0, d] (Full) or [d/2, d] (Equal) of the capped curve.
    #[test]
    fn jittered_delay_stays_within_the_jitter_bounds(
        attempt in 0u32..64,
        throttle in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let next = if throttle { throttled(attempt) } else { transient(attempt) };
        let exact = Backoff::default().with_jitter(Jitter::None).compute(&next);
        let mut rng = StdRng::seed_from_u64(seed);

        let full = Backoff::default().compute_with(&next, &mut rng);
        prop_assert!(full <= exact);

        let equal = Backoff::default().with_jitter(Jitter::Equal).compute_with(&next, &mut rng);
        prop_assert!(equal >= exact / 2 && equal <= exact);
    }

    // K12: never above the cap, whatever the terms.
    #[test]
    fn delay_never_exceeds_the_cap(
        attempt in any::<u32>(),
        base_ms in 0u64..10_000_000,
        factor in 1.0f64..100.0,
        cap_ms in 0u64..10_000_000,
        seed in any::<u64>(),
    ) {
        let backoff = Backoff::default()
            .with_transient_base(ms(base_ms))
            .with_factor(factor)
            .with_maximum_delay(Some(ms(cap_ms)));
        let delay = backoff.compute_with(&transient(attempt), &mut StdRng::seed_from_u64(seed));
        prop_assert!(delay <= ms(cap_ms));
    }
}

// ===== server pushback (K13) =====

#[test]
fn pushback_is_served_verbatim_without_jitter() {
    // K13: Full jitter is configured and still not applied.
    let backoff = Backoff::default();
    let next = throttled(4).with_retry_after(Duration::from_millis(1_234));
    let mut rng = rng();
    for _ in 0..100 {
        assert_eq!(backoff.compute_with(&next, &mut rng), ms(1_234));
    }
}

#[test]
fn pushback_is_capped_by_the_cap() {
    // K13
    let next = transient(2).with_retry_after(secs(120));
    assert_eq!(Backoff::default().compute(&next), secs(30));
    let uncapped = Backoff::default().with_maximum_delay(None);
    assert_eq!(uncapped.compute(&next), secs(120));
    assert_eq!(Backoff::constant(secs(2)).compute(&next), secs(2));
}

#[test]
fn zero_pushback_retries_at_once() {
    let next = throttled(2).with_retry_after(Duration::ZERO);
    assert_eq!(Backoff::default().compute(&next), Duration::ZERO);
}

#[test]
fn pushback_wins_over_a_custom_curve() {
    // K6, K13
    let backoff = Backoff::custom(|_| secs(9));
    assert_eq!(
        backoff.compute(&transient(2).with_retry_after(ms(1))),
        ms(1)
    );
}

// ===== the opt-in clamp (K16) =====

fn clamped(margin: Duration) -> Backoff {
    exact().with_pushback_margin(Some(margin))
}

fn exact() -> Backoff {
    Backoff::default().with_jitter(Jitter::None)
}

#[test]
fn k16_pushback_is_verbatim_unless_a_margin_is_set() {
    assert_eq!(Backoff::default().pushback_margin(), None);
    assert_eq!(
        exact().compute(&throttled(2).with_retry_after(secs(20))),
        secs(20)
    );
}

#[test]
fn k16_a_clamped_hint_stays_within_the_margin_above_the_curve() {
    // The throttled first retry computes 1 s; the third 4 s.
    let backoff = clamped(secs(5));
    let cases = [
        (throttled(2).with_retry_after(secs(3_600)), secs(6)),
        (throttled(2).with_retry_after(Duration::ZERO), secs(1)),
        (throttled(2).with_retry_after(ms(2_500)), ms(2_500)),
        (throttled(4).with_retry_after(secs(1)), secs(4)),
        (transient(2).with_retry_after(ms(10)), ms(100)),
    ];
    for (next, expected) in cases {
        assert_eq!(backoff.compute(&next), expected, "{next:?}");
    }
}

#[test]
fn k16_a_clamped_hint_is_still_capped_by_the_cap() {
    let backoff = clamped(secs(5)).with_maximum_delay(Some(secs(4)));
    assert_eq!(
        backoff.compute(&throttled(2).with_retry_after(secs(60))),
        secs(4)
    );
}

#[test]
fn k16_a_clamp_leaves_a_delay_without_a_hint_to_the_curve() {
    assert_eq!(clamped(secs(5)).compute(&throttled(3)), secs(2));
}

#[test]
fn k16_a_custom_curve_serves_pushback_verbatim_whatever_the_margin() {
    let backoff = Backoff::custom(|_| secs(9)).with_pushback_margin(Some(secs(1)));
    assert_eq!(backoff.pushback_margin(), None);
    assert_eq!(
        backoff.compute(&transient(2).with_retry_after(ms(1))),
        ms(1)
    );
}

#[test]
fn k16_the_margin_is_part_of_equality_and_debug() {
    assert_ne!(exact(), clamped(secs(5)));
    assert_eq!(clamped(secs(5)), clamped(secs(5)));
    let text = format!("{:?}", clamped(secs(5)));
    assert!(text.contains("pushback_margin: 5s"), "{text}");
}

proptest! {
    #[test]
    fn k16_a_clamped_hint_never_leaves_its_interval(
        attempt in 2u32..40,
        hint_ms in 0u64..10_000_000,
        margin_ms in 0u64..100_000,
        seed in any::<u64>(),
    ) {
        // Jittered: the interval is the curve's own draw from the same seed.
        let backoff = Backoff::default().with_pushback_margin(Some(ms(margin_ms)));
        let plain = Backoff::default();
        let next = throttled(attempt);
        let computed = plain.compute_with(&next, &mut StdRng::seed_from_u64(seed));
        let served = backoff.compute_with(
            &next.with_retry_after(ms(hint_ms)),
            &mut StdRng::seed_from_u64(seed),
        );
        let upper = (computed + ms(margin_ms)).min(secs(30));
        prop_assert!(served >= computed && served <= upper, "{served:?} not in [{computed:?}, {upper:?}]");
        if ms(hint_ms) >= computed && ms(hint_ms) <= upper {
            prop_assert_eq!(served, ms(hint_ms));
        }
    }
}

// ===== constructors and terms =====

#[test]
fn default_spells_out_the_shipped_terms() {
    // K1
    let backoff = Backoff::default();
    assert_eq!(backoff.kind(), BackoffKind::Exponential);
    assert_eq!(backoff.transient_base(), ms(100));
    assert_eq!(backoff.throttled_base(), secs(1));
    assert_eq!(backoff.factor(), 2.0);
    assert_eq!(backoff.maximum_delay(), Some(secs(30)));
    assert_eq!(backoff.jitter(), Jitter::Full);
    assert_eq!(backoff.measured_base(), None);
    assert_eq!(backoff.validate(), Ok(()));
}

#[test]
fn exponential_starts_from_the_defaults() {
    // K3
    assert_eq!(Backoff::exponential(), Backoff::default());
}

#[test]
fn default_equals_a_value_that_spells_the_defaults_out() {
    // K11
    let spelled = Backoff::exponential()
        .with_transient_base(ms(100))
        .with_throttled_base(secs(1))
        .with_factor(2.0)
        .with_maximum_delay(Some(secs(30)))
        .with_jitter(Jitter::Full);
    assert_eq!(Backoff::default(), spelled);
    assert_ne!(Backoff::default(), spelled.with_jitter(Jitter::Equal));
}

#[test]
fn changing_one_term_keeps_the_others() {
    // K10
    let slower = Backoff::default().with_maximum_delay(Some(Duration::from_secs(120)));
    assert_eq!(slower.maximum_delay(), Some(secs(120)));
    assert_eq!(slower.transient_base(), ms(100));
    assert_eq!(slower.throttled_base(), secs(1));
    assert_eq!(slower.factor(), 2.0);
    assert_eq!(slower.jitter(), Jitter::Full);
    assert_eq!(slower.kind(), BackoffKind::Exponential);
}

#[test]
fn each_constructor_chooses_its_kind() {
    // K9
    assert_eq!(Backoff::default().kind(), BackoffKind::Exponential);
    assert_eq!(Backoff::exponential().kind(), BackoffKind::Exponential);
    assert_eq!(Backoff::measured(1.0).kind(), BackoffKind::Exponential);
    assert_eq!(Backoff::constant(ms(5)).kind(), BackoffKind::Constant);
    assert_eq!(Backoff::none().kind(), BackoffKind::Constant);
    assert_eq!(Backoff::custom(|_| ms(5)).kind(), BackoffKind::Custom);
}

#[test]
fn setters_never_change_the_kind() {
    // K9
    let constant = Backoff::constant(ms(5))
        .with_factor(3.0)
        .with_maximum_delay(None);
    assert_eq!(constant.kind(), BackoffKind::Constant);
    let custom = Backoff::custom(|_| ms(5)).with_transient_base(secs(1));
    assert_eq!(custom.kind(), BackoffKind::Custom);
}

#[test]
fn backoff_can_be_shared_across_tasks() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Backoff>();
    assert_send_sync::<InvalidBackoff>();
}

#[test]
fn none_retries_immediately() {
    // K2
    let backoff = Backoff::none();
    for attempt in [2, 3, 10, u32::MAX] {
        assert_eq!(backoff.compute(&transient(attempt)), Duration::ZERO);
        assert_eq!(backoff.compute(&throttled(attempt)), Duration::ZERO);
    }
    assert_eq!(backoff.transient_base(), Duration::ZERO);
    assert_eq!(backoff.throttled_base(), Duration::ZERO);
    assert_eq!(backoff, Backoff::constant(Duration::ZERO));
    // K13: pushback is capped by the zero cap until the cap is raised.
    let pushed = throttled(2).with_retry_after(secs(3));
    assert_eq!(backoff.compute(&pushed), Duration::ZERO);
    let honouring = backoff.with_maximum_delay(None);
    assert_eq!(honouring.compute(&pushed), secs(3));
}

#[test]
fn constant_serves_the_same_delay_every_attempt() {
    // K5
    let backoff = Backoff::constant(ms(250)).with_jitter(Jitter::None);
    assert_eq!(delays(&backoff, transient, 5), vec![ms(250); 5]);
    assert_eq!(delays(&backoff, throttled, 5), vec![ms(250); 5]);
    assert_eq!(backoff.compute(&transient(u32::MAX)), ms(250));
    assert_eq!(backoff.factor(), 1.0);
    assert_eq!(backoff.maximum_delay(), Some(ms(250)));
}

#[test]
fn constant_is_jittered_like_any_other_curve() {
    // K7
    let backoff = Backoff::constant(secs(1));
    let mut rng = rng();
    let samples: Vec<Duration> = (0..50)
        .map(|_| backoff.compute_with(&transient(2), &mut rng))
        .collect();
    assert!(samples.iter().all(|d| *d <= secs(1)));
    assert!(samples.iter().any(|d| *d != samples[0]));
}

#[test]
fn constant_clamps_a_raised_base_back_to_the_cap() {
    // K5
    let backoff = Backoff::constant(ms(200))
        .with_transient_base(secs(5))
        .with_jitter(Jitter::None);
    assert_eq!(backoff.transient_base(), ms(200));
    assert_eq!(backoff.compute(&transient(2)), ms(200));
    assert_eq!(
        backoff,
        Backoff::constant(ms(200)).with_jitter(Jitter::None)
    );

    let lowered = Backoff::constant(ms(200)).with_throttled_base(ms(50));
    assert_eq!(lowered.throttled_base(), ms(50));
    assert_eq!(lowered.transient_base(), ms(200));

    let raised_cap = backoff.with_maximum_delay(Some(secs(10)));
    assert_eq!(raised_cap.transient_base(), secs(5));
}

#[test]
fn custom_reports_zero_bases_and_no_cap() {
    // K6
    let backoff = Backoff::custom(|_| ms(5))
        .with_transient_base(secs(1))
        .with_maximum_delay(Some(secs(1)))
        .with_jitter(Jitter::Full);
    assert_eq!(backoff.transient_base(), Duration::ZERO);
    assert_eq!(backoff.throttled_base(), Duration::ZERO);
    assert_eq!(backoff.maximum_delay(), None);
    assert_eq!(backoff.jitter(), Jitter::None);
    assert_eq!(backoff.factor(), 1.0);
    assert_eq!(backoff.measured_base(), None);
}

#[test]
fn custom_ignores_the_cap_and_jitter() {
    // K6
    let backoff = Backoff::custom(|next| secs(60) * next.attempt())
        .with_maximum_delay(Some(secs(1)))
        .with_jitter(Jitter::Full);
    let mut rng = rng();
    for _ in 0..20 {
        assert_eq!(backoff.compute_with(&transient(3), &mut rng), secs(180));
    }
    assert_eq!(backoff.compute(&throttled(2)), secs(120));
}

#[test]
fn custom_sees_the_kind_of_retry() {
    let backoff = Backoff::custom(|next| match next.kind() {
        RetryKind::Transient => ms(1),
        RetryKind::Throttled => ms(2),
    });
    assert_eq!(backoff.compute(&transient(2)), ms(1));
    assert_eq!(backoff.compute(&throttled(2)), ms(2));
}

#[test]
fn custom_curves_are_equal_only_when_they_share_the_function() {
    // K11
    let a = Backoff::custom(|_| ms(5));
    let b = Backoff::custom(|_| ms(5));
    assert_eq!(a, a.clone());
    assert_eq!(a, a.clone().with_factor(9.0));
    assert_ne!(a, b);
    assert_ne!(a, Backoff::none());
}

#[test]
fn equality_distinguishes_kinds_with_the_same_terms() {
    let constant = Backoff::constant(ms(100)).with_maximum_delay(Some(secs(30)));
    let flat = Backoff::default()
        .with_throttled_base(ms(100))
        .with_factor(1.0);
    assert_eq!(constant.factor(), flat.factor());
    assert_ne!(constant, flat);
}

#[test]
fn a_nan_factor_still_equals_its_clone() {
    let backoff = Backoff::default().with_factor(f64::NAN);
    assert_eq!(backoff, backoff.clone());
}

#[test]
fn debug_shows_the_effective_terms() {
    let text = format!(
        "{:?}",
        Backoff::constant(ms(200)).with_transient_base(secs(9))
    );
    assert!(
        text.contains("Constant") && text.contains("200ms"),
        "{text}"
    );
    assert!(!text.contains("9s"), "{text}");
    let custom = format!("{:?}", Backoff::custom(|_| ms(1)));
    assert_eq!(custom, "Backoff { kind: Custom, .. }");
}
