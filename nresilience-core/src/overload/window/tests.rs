//! The window's paces and busy time, kept as events arrive, against the slots summed afresh.

use proptest::prelude::*;

use super::*;

/// The pace summed afresh over the `count` finished slots before the current one.
fn summed(window: &Window, count: u64) -> Pace {
    let current = window.filling.index;
    let oldest = current.saturating_sub(count);
    window
        .slots
        .iter()
        .filter(|slot| (oldest..current).contains(&slot.index))
        .fold(Pace::default(), Pace::and)
}

proptest! {
    /// O5: the pace kept from slot to slot is the pace summed over the slots, whatever
    /// the events and however the clock moves between them.
    #[test]
    fn o5_the_kept_pace_is_the_pace_summed_over_the_slots(
        events in prop::collection::vec((0u64..400, 0u8..5, 0u64..50), 1..300),
    ) {
        let origin = Instant::now();
        let mut window = Window::new(Duration::from_secs(1), origin);
        let mut now = origin;
        for (step, kind, amount) in events {
            now += Duration::from_millis(step);
            window.advance(now);
            match kind {
                0 => window.completed(u32::try_from(amount).unwrap()),
                1 => window.answered(),
                2 => {
                    window.busy_from(now, 1);
                    window.idle(now, 1, Some(amount * 1_000_000));
                }
                3 => window.sent(1),
                _ => {
                    let before = summed(&window, u64::from(SLOTS)).and(&window.filling);
                    let count = u32::try_from(amount).unwrap();
                    window.completed_over(count, amount * 40_000_000, now);
                    let after = summed(&window, u64::from(SLOTS)).and(&window.filling);
                    let credited = after.completions - before.completions;
                    prop_assert!(credited <= u64::from(count), "{credited} of {count}");
                }
            }
            prop_assert_eq!(window.finished, summed(&window, u64::from(SLOTS)));
            prop_assert_eq!(window.recent, summed(&window, RECENT_SLOTS));
        }
    }

    /// O1, O5: a spell of busy time is counted once, whole, across the slots it spans,
    /// whether events fall in them or not, and whether its end is known from the
    /// latency of the attempt that began it or from the clock.
    #[test]
    fn o1_busy_time_is_counted_once_across_the_slots_it_spans(
        start in 0u64..2_000_000,
        length in 0u64..900_000,
        mut steps in prop::collection::vec(0u64..900_000, 0..10),
        by_latency in any::<bool>(),
    ) {
        let origin = Instant::now();
        let mut window = Window::new(Duration::from_secs(1), origin);
        let begin = origin + Duration::from_micros(start);
        window.advance(begin);
        window.busy_from(begin, 7);
        steps.sort_unstable();
        for step in steps.into_iter().filter(|&step| step < length) {
            window.advance(begin + Duration::from_micros(step));
        }
        let end = begin + Duration::from_micros(length);
        window.advance(end);
        window.idle(end, 7, by_latency.then_some(length * 1_000));
        let counted = summed(&window, u64::from(SLOTS)).and(&window.filling);
        prop_assert_eq!(counted.busy_nanos, length * 1_000);
    }
}

/// A window whose slots each finish `per_slot[i]` attempts, slot after slot from its origin:
/// whether it is finishing more after each.
fn finishing(per_slot: &[u32]) -> Vec<bool> {
    let origin = Instant::now();
    let mut window = Window::new(Duration::from_secs(1), origin);
    per_slot
        .iter()
        .enumerate()
        .map(|(slot, &count)| {
            window.completed(count);
            window.advance(origin + Duration::from_millis(100) * (slot as u32 + 1));
            window.finishing_more()
        })
        .collect()
}

#[test]
fn o5_a_window_finishing_more_than_the_one_before_by_more_than_chance_is_finishing_more() {
    // Ten a slot throughout: the same, window after window.
    assert!(finishing(&[10; 40]).iter().all(|&more| !more));
    // A ramp from one to ten a slot over three seconds: more than a window ago, once there
    // are two whole windows to compare.
    let ramp: Vec<u32> = (0..30).map(|slot| 1 + slot / 3).collect();
    let more = finishing(&ramp);
    assert!(
        more[..19].iter().all(|&more| !more),
        "no whole window before: {more:?}"
    );
    assert!(more[19..].iter().all(|&more| more), "{more:?}");
    // Chance: 100 a window, then 120 (within two standard deviations, 2√220 ≈ 30), then 140.
    let mut noisy = vec![10; 20];
    noisy.extend([12; 10]);
    assert!(!finishing(&noisy)[29]);
    noisy.truncate(20);
    noisy.extend([14; 10]);
    assert!(finishing(&noisy)[29]);
}
