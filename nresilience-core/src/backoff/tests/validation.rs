//! A backoff's terms refused, and the measured base (K4).

use super::*;

#[test]
fn validation_rejects_a_factor_below_one() {
    let err = Backoff::default()
        .with_factor(0.5)
        .validate()
        .expect_err("factor 0.5");
    assert_eq!(
        err.to_string(),
        "backoff factor must be a finite number >= 1, got 0.5"
    );
}

#[test]
fn validation_rejects_a_nan_or_infinite_factor() {
    for factor in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let result = Backoff::default().with_factor(factor).validate();
        assert!(result.is_err(), "{factor}");
    }
    assert_eq!(Backoff::default().with_factor(1.0).validate(), Ok(()));
}

#[test]
fn validation_ignores_the_factor_of_curves_that_do_not_grow() {
    assert_eq!(Backoff::constant(ms(1)).with_factor(0.5).validate(), Ok(()));
    assert_eq!(
        Backoff::custom(|_| ms(1)).with_factor(f64::NAN).validate(),
        Ok(())
    );
}

#[test]
fn validation_rejects_bad_measured_terms() {
    // K4
    assert!(Backoff::measured(0.0).validate().is_err());
    assert!(Backoff::try_measured(0.0).is_err());
    assert!(Backoff::try_measured(f64::NAN).is_err());
    let quantile = Backoff::default()
        .with_measured_base(Some(MeasuredBase::times(1.0).with_quantile(0.6)))
        .validate()
        .expect_err("quantile 0.6");
    assert_eq!(
        quantile.to_string(),
        "measured base quantile must be in (0, 0.5], got 0.6"
    );
    let spread = Backoff::default()
        .with_measured_base(Some(MeasuredBase::times(1.0).with_spread(1.0)))
        .validate();
    assert!(spread.is_err());
}

#[test]
fn validation_rejects_a_measured_base_on_a_constant_curve() {
    let err = Backoff::constant(ms(100))
        .with_measured_base(Some(MeasuredBase::times(1.0)))
        .validate()
        .expect_err("measured constant");
    assert_eq!(
        err.to_string(),
        "a measured base needs an exponential backoff, this one is constant"
    );
}

#[test]
fn invalid_backoff_is_a_std_error() {
    fn assert_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    let err = Backoff::default()
        .with_factor(0.5)
        .validate()
        .expect_err("factor 0.5");
    assert_error(&err);
}

// ===== measured base (K4) =====

#[test]
fn measured_is_the_default_curve_with_a_measured_base() {
    // K4
    let backoff = Backoff::measured(2.0);
    assert_eq!(backoff.measured_base(), Some(MeasuredBase::times(2.0)));
    assert_eq!(backoff.transient_base(), ms(100));
    assert_eq!(backoff.clone().with_measured_base(None), Backoff::default());
    assert_eq!(Backoff::try_measured(2.0), Ok(backoff));
}

#[test]
fn bare_compute_serves_the_unmeasured_curve() {
    // K4
    let backoff = Backoff::measured(1.0).with_jitter(Jitter::None);
    assert_eq!(
        delays(&backoff, transient, 3),
        [100, 200, 400].map(ms).to_vec()
    );
}

#[test]
fn measured_base_moves_only_the_transient_base() {
    // K4
    let backoff = Backoff::measured(2.0).with_jitter(Jitter::None);
    let observed = Some(ms(30));
    let mut rng = rng();
    assert_eq!(
        backoff.compute_with_base(&transient(2), observed, &mut rng),
        ms(60)
    );
    assert_eq!(
        backoff.compute_with_base(&transient(4), observed, &mut rng),
        ms(240)
    );
    assert_eq!(
        backoff.compute_with_base(&throttled(2), observed, &mut rng),
        secs(1)
    );
    let pushed = transient(2).with_retry_after(ms(7));
    assert_eq!(
        backoff.compute_with_base(&pushed, observed, &mut rng),
        ms(7)
    );
}

#[test]
fn measured_base_is_clamped_to_ten_times_either_way_of_the_configured_base() {
    // K4: spread 10
    let backoff = Backoff::measured(1.0).with_jitter(Jitter::None);
    let mut rng = rng();
    let slow = backoff.compute_with_base(&transient(2), Some(secs(60)), &mut rng);
    assert_eq!(slow, secs(1));
    let fast = backoff.compute_with_base(&transient(2), Some(Duration::from_micros(3)), &mut rng);
    assert_eq!(fast, ms(10));
}

#[test]
fn measured_base_is_still_capped() {
    let backoff = Backoff::measured(1.0)
        .with_maximum_delay(Some(ms(500)))
        .with_jitter(Jitter::None);
    let delay = backoff.compute_with_base(&transient(2), Some(secs(60)), &mut rng());
    assert_eq!(delay, ms(500));
}

#[test]
fn an_estimate_without_a_measured_base_is_ignored() {
    let backoff = Backoff::default().with_jitter(Jitter::None);
    let delay = backoff.compute_with_base(&transient(2), Some(secs(60)), &mut rng());
    assert_eq!(delay, ms(100));
}
