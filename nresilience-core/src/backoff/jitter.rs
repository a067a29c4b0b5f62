use std::time::Duration;

use rand::Rng;

use super::duration_from_nanos;

/// How much randomness is applied to a computed delay.
///
/// Clients that failed together retry together unless something spreads them out; only
/// [`Jitter::Full`] spreads them over the whole interval, so it is the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Jitter {
    /// Uniform in `[0, d]`.
    #[default]
    Full,
    /// `d/2` plus uniform in `[0, d/2]`: keeps a floor under the delay.
    Equal,
    /// Exactly `d`. Meant for tests: clients that fail together stay in step.
    None,
}

impl Jitter {
    /// Applies this jitter to `delay`, drawing from `rng`.
    ///
    /// The result never exceeds `delay`, and is exact to the nanosecond even for delays too
    /// long for an `f64` to hold precisely.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use nresilience_core::Jitter;
    ///
    /// let d = Duration::from_secs(1);
    /// let jittered = Jitter::Equal.apply(d, &mut rand::rng());
    /// assert!(jittered >= d / 2 && jittered <= d);
    /// ```
    pub fn apply<R: Rng + ?Sized>(self, delay: Duration, rng: &mut R) -> Duration {
        match self {
            Self::Full => uniform_up_to(delay, rng),
            Self::Equal => {
                let floor = delay / 2;
                // `delay - floor` rather than `floor` again, so an odd nanosecond is not lost.
                floor.saturating_add(uniform_up_to(delay.saturating_sub(floor), rng))
            }
            Self::None => delay,
        }
    }
}

fn uniform_up_to<R: Rng + ?Sized>(max: Duration, rng: &mut R) -> Duration {
    duration_from_nanos(rng.random_range(0..=max.as_nanos()))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rand::{rngs::StdRng, SeedableRng};

    use super::*;

    #[test]
    fn full_is_the_default() {
        // K1, K7
        assert_eq!(Jitter::default(), Jitter::Full);
    }

    #[test]
    fn no_jitter_returns_the_delay() {
        let mut rng = StdRng::seed_from_u64(7);
        let d = Duration::new(3, 141_592_653);
        assert_eq!(Jitter::None.apply(d, &mut rng), d);
    }

    #[test]
    fn jitter_of_the_longest_duration_stays_in_bounds() {
        let mut rng = StdRng::seed_from_u64(7);
        assert!(Jitter::Full.apply(Duration::MAX, &mut rng) <= Duration::MAX);
        assert!(Jitter::Equal.apply(Duration::MAX, &mut rng) >= Duration::MAX / 2);
    }

    #[test]
    fn jitter_of_zero_is_zero() {
        let mut rng = StdRng::seed_from_u64(7);
        for jitter in [Jitter::Full, Jitter::Equal, Jitter::None] {
            assert_eq!(jitter.apply(Duration::ZERO, &mut rng), Duration::ZERO);
        }
    }

    proptest! {
        // K7: Full is uniform in [0, d].
        #[test]
        fn full_jitter_stays_within_zero_and_the_delay(nanos in any::<u64>(), seed in any::<u64>()) {
            let d = Duration::from_nanos(nanos);
            let jittered = Jitter::Full.apply(d, &mut StdRng::seed_from_u64(seed));
            prop_assert!(jittered <= d);
        }

        // K7: Equal is d/2 + uniform in [0, d/2].
        #[test]
        fn equal_jitter_stays_within_half_and_the_whole_delay(nanos in any::<u64>(), seed in any::<u64>()) {
            let d = Duration::from_nanos(nanos);
            let jittered = Jitter::Equal.apply(d, &mut StdRng::seed_from_u64(seed));
            prop_assert!(jittered >= d / 2);
            prop_assert!(jittered <= d);
        }
    }
}
