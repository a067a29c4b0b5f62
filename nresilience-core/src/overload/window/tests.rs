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
    /// O5: the pace kept from slot to slot, and the pace per completion worked out from it,
    /// are those summed over the slots, whatever the events and however the clock moves
    /// between them.
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
            let paced = Pace::shorter_per_completion(
                summed(&window, u64::from(SLOTS)),
                summed(&window, RECENT_SLOTS),
                window.slot_nanos,
            );
            prop_assert_eq!(window.nanos_per_completion(), paced);
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

/// A window whose slots each are busy throughout, are sent `sent` attempts and finish
/// `per_slot[i]`, each answered after `latency`, or have no work at all (`None`), slot after
/// slot from its origin: whether it is settled after each.
fn settling(per_slot: &[Option<u32>], sent: u32, latency: Duration) -> Vec<bool> {
    let origin = Instant::now();
    let mut window = Window::new(Duration::from_secs(1), origin);
    let slot = Duration::from_millis(100);
    per_slot
        .iter()
        .zip(0u32..)
        .map(|(&count, index)| {
            let begin = origin + slot * index;
            if let Some(count) = count {
                window.busy_from(begin, u64::from(index));
                for _ in 0..sent {
                    window.sent(sent);
                }
                window.completed(count);
                for _ in 0..count {
                    window.answered();
                    window.latency(nanos(latency), false);
                }
                window.idle(begin + slot, u64::from(index), Some(nanos(slot)));
            }
            window.advance(begin + slot);
            window.settled()
        })
        .collect()
}

#[test]
fn o1_a_window_is_settled_once_what_it_answers_keeps_pace_until_a_window_has_no_work() {
    // Attempts of a second, ten a slot throughout: settled as soon as two whole windows compare.
    let second = Duration::from_secs(1);
    let steady = settling(&[Some(10); 30], 10, second);
    assert!(steady[..19].iter().all(|&settled| !settled), "{steady:?}");
    assert!(steady[19..].iter().all(|&settled| settled), "{steady:?}");
    // A ramp from one to ten a slot over three seconds, then ten a slot: not while it
    // finishes more, window after window; settled once it stops.
    let mut slots: Vec<_> = (0..30).map(|slot| Some(1 + slot / 3)).collect();
    slots.extend([Some(10); 20]);
    let ramp = settling(&slots, 10, second);
    let from = ramp.iter().position(|&settled| settled).unwrap();
    assert!((30..40).contains(&from), "{ramp:?}");
    assert!(ramp[from..].iter().all(|&settled| settled), "{ramp:?}");
    // The first answers of a ramp, a few against none a window before: not more than chance
    // allows, but what is sent outruns them tenfold.
    let mut first = vec![Some(0); 20];
    first.extend([Some(1); 5]);
    let first = settling(&first, 10, second);
    assert!(first.iter().all(|&settled| !settled), "{first:?}");
    // A window without work: what comes after ramps up again, and settles again once it stops.
    slots.extend([None; 10]);
    slots.extend((0..30).map(|slot| Some(1 + slot / 3)));
    slots.extend([Some(10); 20]);
    let again = settling(&slots, 10, second);
    let from = again[59..].iter().position(|&settled| settled).unwrap() + 59;
    assert!((90..100).contains(&from), "{again:?}");
    // Attempts answered within a slot ramp up within one: settled once one is finished.
    let quick = settling(
        &[None, None, Some(1), Some(1), Some(10)],
        1,
        Duration::from_millis(20),
    );
    assert_eq!(quick, [false, false, true, true, true]);
}

/// One slot's events: busy throughout, `sent` attempts sent, `answers` answered and finished,
/// each after `latency`, `given_up` given up on; `held` attempts held as the next begins.
struct Fill {
    sent: u32,
    answers: u32,
    latency: Duration,
    given_up: u32,
    held: u32,
}

/// Fills the slot of `index` of `window`, from its origin, as `fill` says, and moves to the next.
fn fill(window: &mut Window, origin: Instant, index: u32, fill: &Fill) {
    let slot = Duration::from_millis(100);
    let begin = origin + slot * index;
    window.busy_from(begin, u64::from(index));
    for _ in 0..fill.sent {
        window.sent(fill.held);
    }
    window.completed(fill.answers);
    for _ in 0..fill.answers {
        window.answered();
        window.latency(nanos(fill.latency), false);
    }
    for _ in 0..fill.given_up {
        window.given_up();
    }
    window.idle(begin + slot, u64::from(index), Some(nanos(slot)));
    window.advance(begin + slot);
    window.weigh(fill.held);
}

/// The slot of `index` of a ramp from idle: ten sent, one answered in 10 ms, the rest held;
/// `given_up` given up on.
fn ramp(index: u32, given_up: u32) -> Fill {
    Fill {
        sent: 10,
        answers: 1,
        latency: Duration::from_millis(10),
        given_up,
        held: 9 * (index + 1),
    }
}

#[test]
fn o1_o5_a_window_holding_what_it_was_sent_long_before_its_answers_is_a_ramp() {
    let origin = Instant::now();
    // Ten sent a slot, one answered in 10 ms, the rest held: the answers are survivors, the
    // pace no expected wait, the window settled or not.
    let mut window = Window::new(Duration::from_secs(1), origin);
    for index in 0..15 {
        fill(&mut window, origin, index, &ramp(index, 0));
        assert!(
            window.answers_are_survivors() && !window.pace_tells_wait(),
            "{index}"
        );
    }
    assert!(window.settled());
    // The slower share lands, a second each, the work held what a second sends: the pace
    // tells the wait once the recent slots count it.
    for index in 15..15 + RECENT_SLOTS as u32 {
        let landed = Fill {
            sent: 10,
            answers: 10,
            latency: Duration::from_secs(1),
            given_up: 0,
            held: 100,
        };
        fill(&mut window, origin, index, &landed);
        assert!(!window.answers_are_survivors(), "{index}");
        let counted = index == 14 + RECENT_SLOTS as u32;
        assert_eq!(window.pace_tells_wait(), counted, "{index}");
    }
    // A queue filling from idle, ten sent a slot and five answered, first in first out: what
    // it holds was sent after the attempt it answers, over that attempt's latency.
    let mut queue = Window::new(Duration::from_secs(1), origin);
    for index in 0..60 {
        let latency = Duration::from_millis(50) * (index + 1);
        let filling = Fill {
            sent: 10,
            answers: 5,
            latency,
            given_up: 0,
            held: 5 * (index + 1),
        };
        fill(&mut queue, origin, index, &filling);
        assert!(!queue.answers_are_survivors(), "{index}");
    }
    // Survivors, but callers give up on more than a fifth of what ends: work done for nobody,
    // whatever the answers. One caller leaving is not that.
    let mut given_up = Window::new(Duration::from_secs(1), origin);
    for index in 0..15 {
        let leaving = match index {
            3 => 1,
            5 => 3,
            _ => 0,
        };
        fill(&mut given_up, origin, index, &ramp(index, leaving));
        // Until the window no longer holds them.
        assert_eq!(
            given_up.answers_are_survivors(),
            !(5..14).contains(&index),
            "{index}"
        );
    }
}

#[test]
fn o5_a_window_without_an_answer_for_five_of_its_usual_gaps_is_silent() {
    let origin = Instant::now();
    let fast = Duration::from_millis(10);
    let answering = |answers| Fill {
        sent: 10,
        answers,
        latency: fast,
        given_up: 0,
        held: 0,
    };
    // A hundred answers a window: one slot without is ten gaps.
    let mut busy = Window::new(Duration::from_secs(1), origin);
    for index in 0..10 {
        fill(&mut busy, origin, index, &answering(10));
    }
    assert!(!busy.silent());
    fill(&mut busy, origin, 10, &answering(0));
    assert!(busy.silent());
    // Two answers a window, one each five slots: not silent between them, nor until the
    // window holds none.
    let mut sparse = Window::new(Duration::from_secs(1), origin);
    for index in 0..20 {
        fill(
            &mut sparse,
            origin,
            index,
            &answering(u32::from(index % 5 == 0)),
        );
    }
    for index in 20..26 {
        assert!(!sparse.silent(), "{index}");
        fill(&mut sparse, origin, index, &answering(0));
    }
    assert!(sparse.silent());
}
