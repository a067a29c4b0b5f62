//! The storm simulator (SPEC S1, S2): the shipping executor on a virtual clock.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use nresilience_core::{
    AttemptCeiling, BudgetOptions, RetryBudget, RetryPolicy, RetryPolicyBuilder,
};
use simulator::{Dependency, Load, Simulation, SimulationReport};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn s(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// SPEC S1's policy: the defaults with a 10 s deadline.
fn s1_policy(budget: bool, refresh: Duration) -> RetryPolicy {
    s1_builder(budget, refresh).build().unwrap()
}

/// SPEC S1's policy with overload control off: the measured ceiling alone decides which
/// attempts of a slowed dependency are cut, as in the original library.
fn ceiling_alone(budget: bool) -> RetryPolicy {
    s1_builder(budget, s(1))
        .overload_control(None)
        .build()
        .unwrap()
}

/// SPEC S1's policy before it is built, with the budget on or off and the ceiling's refresh.
fn s1_builder(budget: bool, refresh: Duration) -> RetryPolicyBuilder {
    let builder = RetryPolicy::builder()
        .deadline(Some(s(10)))
        .attempt_ceiling(Some(AttemptCeiling::default().refresh(refresh)));
    if budget {
        builder
    } else {
        builder.budget(RetryBudget::None)
    }
}

/// SPEC S1's scenario, shortened: the brownout's shape at a tenth of the length.
fn short_storm(policy: RetryPolicy) -> Simulation {
    Simulation::policy(policy)
        .against(Dependency::healthy(ms(20), ms(200)).brownout(s(5), 8.0, s(10)))
        .under(Load::constant(500.0))
        .for_duration(s(30))
}

#[test]
fn s2_the_same_seed_gives_a_byte_identical_report() {
    for budget in [false, true] {
        // The policy's own state counts from when it was built, in real time; the run must not
        // depend on how long ago that was.
        let simulation = short_storm(s1_policy(budget, s(1)));
        let first = simulation.run(42).unwrap();
        std::thread::sleep(ms(3));
        let second = simulation.run(42).unwrap();
        assert_eq!(format!("{first:?}"), format!("{second:?}"));
        assert_eq!(first.to_string(), second.to_string());
        assert_eq!(first.seconds, second.seconds);
        assert_eq!(first, second);
        let other = simulation.run(43).unwrap();
        assert_ne!(first.seconds, other.seconds, "another seed, another run");
    }
}

#[test]
fn s2_a_used_policy_simulates_like_a_new_one_and_is_left_alone() {
    // The simulation starts from the policy's settings, not its state: a drained bucket and a
    // warm latency window of the caller's policy change nothing, and the run does not touch
    // them.
    let policy = s1_policy(true, s(1));
    let fresh = short_storm(policy.clone()).run(5).unwrap();
    let now = std::time::Instant::now();
    let bucket = policy.bucket(now).unwrap();
    while bucket.try_withdraw(now, nresilience_core::Criticality::Normal) {}
    let used = short_storm(policy.clone()).run(5).unwrap();
    assert_eq!(format!("{fresh:?}"), format!("{used:?}"));
    assert_eq!(bucket.balance(now), 0.0);
}

#[tokio::test]
async fn s2_runs_from_inside_an_async_runtime() {
    let report = Simulation::policy(RetryPolicy::default())
        .against(Dependency::healthy(ms(5), ms(50)))
        .under(Load::constant(100.0))
        .for_duration(s(2))
        .run(1)
        .unwrap();
    assert!(report.calls > 150, "{report}");
    assert_eq!(report.succeeded, report.calls);
}

#[test]
fn s1_the_offered_load_is_the_rate_asked_for_and_the_same_under_any_policy() {
    let off = short_storm(s1_policy(false, s(1))).run(42).unwrap();
    let on = short_storm(s1_policy(true, s(1))).run(42).unwrap();
    assert_eq!(off.calls, on.calls);
    let expected = 500.0 * 30.0;
    assert!(
        (off.calls as f64 - expected).abs() < 0.02 * expected,
        "{}",
        off.calls
    );
    assert_eq!(off.seconds.iter().map(|s| s.calls).sum::<u64>(), off.calls);
    assert_eq!(
        off.seconds.iter().map(|s| s.attempts).sum::<u64>(),
        off.attempts
    );
}

#[test]
fn s1_a_healthy_dependency_without_errors_is_almost_never_retried() {
    let report = Simulation::policy(s1_policy(false, s(1)))
        .against(Dependency::healthy(ms(20), ms(200)))
        .under(Load::constant(200.0))
        .for_duration(s(20))
        .run(9)
        .unwrap();
    // Only the tail beyond the measured ceiling (3 × p95) is cut and retried.
    assert!(report.load_multiplier() < 1.02, "{report}");
    assert!(report.availability() > 0.999, "{report}");
    let p50 = report.latency(0.5);
    assert!(p50 >= ms(19) && p50 <= ms(23), "{report}");
}

#[test]
fn s1_the_budget_bounds_the_brownout_storm() {
    // The brownout meets a ceiling fitted to healthy latency, which cuts its attempts until
    // the estimate follows the latency up: without a budget they are retried, with one the
    // retries are held to 10 % of successes plus the floor. The ceiling alone: with overload
    // control the attempts run for their expected wait, and few are cut.
    let off = short_storm(ceiling_alone(false)).run(42).unwrap();
    let on = short_storm(ceiling_alone(true)).run(42).unwrap();
    assert!(off.attempts_cut > 0, "{off}");
    assert!(on.budget_refusals > 0, "{on}");
    assert_eq!(off.budget_refusals, 0);
    assert!(off.load_multiplier() > on.load_multiplier(), "{off}\n{on}");
    assert!(off.amplification > on.amplification, "{off}\n{on}");
    assert!(
        on.amplification < 1.5,
        "the budget keeps the worst second near 1.1×: {on}"
    );
    assert!(off.availability() >= on.availability(), "{off}\n{on}");
    // The worst second is in the brownout.
    let worst = on.worst_second.unwrap();
    assert!(worst >= s(5) && worst < s(15), "{on}");
}

#[test]
fn e5_o1_the_expected_wait_keeps_the_ceiling_from_cutting_the_brownout() {
    // The ceiling refits at most once a second and trails the brownout's latency; the
    // expected wait counts the attempts the brownout holds as they pile up. Bounded by the
    // ceiling and the wait beyond a typical attempt, fewer attempts are cut, fewer retries
    // are asked of the budget, and no call is lost for it.
    let alone = short_storm(ceiling_alone(true)).run(42).unwrap();
    let defaults = short_storm(s1_policy(true, s(1))).run(42).unwrap();
    assert!(
        defaults.attempts_cut < alone.attempts_cut,
        "{defaults}\n{alone}"
    );
    assert_eq!(defaults.budget_refusals, 0, "{defaults}");
    assert!(
        defaults.budget_refusals < alone.budget_refusals,
        "{defaults}\n{alone}"
    );
    assert!(
        defaults.availability() >= alone.availability(),
        "{defaults}\n{alone}"
    );
    assert!(
        defaults.amplification <= alone.amplification,
        "{defaults}\n{alone}"
    );
}

#[test]
fn s1_without_impairment_the_budget_changes_nothing() {
    let run = |budget| {
        Simulation::policy(s1_policy(budget, s(1)))
            .against(Dependency::healthy(ms(20), ms(20)))
            .under(Load::constant(100.0))
            .for_duration(s(5))
            .run(3)
            .unwrap()
    };
    let (off, on) = (run(false), run(true));
    assert_eq!(off.attempts, off.calls);
    assert_eq!(on.attempts, on.calls);
    assert_eq!(off.succeeded, on.succeeded);
}

#[test]
fn s1_an_outage_is_retried_up_to_max_attempts_without_a_budget() {
    let report = Simulation::policy(s1_policy(false, s(1)))
        .against(Dependency::healthy(ms(10), ms(10)).outage(s(1), s(2)))
        .under(Load::constant(100.0))
        .for_duration(s(4))
        .run(11)
        .unwrap();
    // Every call in the outage makes three attempts, each failing at once.
    assert!(report.amplification > 2.9, "{report}");
    let on = Simulation::policy(
        RetryPolicy::builder()
            .budget(RetryBudget::Automatic(
                BudgetOptions::default().minimum_per_second(0.0),
            ))
            .build()
            .unwrap(),
    )
    .against(Dependency::healthy(ms(10), ms(10)).outage(s(1), s(2)))
    .under(Load::constant(100.0))
    .for_duration(s(4))
    .run(11)
    .unwrap();
    // With no floor and no successes, one banked token and then no retries at all.
    assert!(on.amplification < 1.1, "{on}");
    assert!(on.budget_refusals > 150, "{on}");
}

#[test]
fn s1_capacity_sheds_past_three_times_and_peers_count_against_it() {
    let run = |peers| {
        Simulation::policy(s1_policy(false, s(1)))
            .against(Dependency::healthy(ms(50), ms(50)).capacity(10))
            .under(Load::constant(200.0).peers(peers))
            .for_duration(s(5))
            .run(2)
            .unwrap()
    };
    // 200/s × 50 ms = 10 in flight: at capacity alone, shedding with ten peers.
    let alone = run(1);
    let crowded = run(10);
    assert!(alone.availability() > 0.99, "{alone}");
    assert!(crowded.availability() < 0.5, "{crowded}");
    assert!(crowded.load_multiplier() > alone.load_multiplier());
}

#[test]
fn s1_nested_policies_multiply_attempts_and_budgets_hold_each_layer() {
    let off = nested(false, false);
    let on = nested(true, false);
    assert_eq!(off.hops.len(), 3);
    // 3 × 3 × 3 attempts at the bottom for a call that fails all the way down.
    assert!(off.amplification > 20.0, "{off}");
    assert!(off.amplification <= 27.0, "{off}");
    assert!(on.amplification < off.amplification / 2.0, "{on}");
    assert_eq!(off.hops[0].calls, off.calls);
    assert_eq!(off.hops[2].attempts, off.attempts);
}

#[test]
fn c6_a_chain_following_the_rules_retries_at_one_layer() {
    let deaf = nested(false, false);
    let report = nested(false, true);
    // Each call reaches the bottom at most three times, as through one hop: a hop whose
    // caller cannot wait for a retry does not make it, and a hop that retried is not retried.
    assert!(report.load_multiplier() <= 3.0, "{report}");
    assert!(
        deaf.load_multiplier() > 2.0 * report.load_multiplier(),
        "{deaf}"
    );
    assert!(report.amplification < deaf.amplification / 2.0, "{report}");
}

/// Three hops of S1's policy through a two-second outage, the budget and the chain rules on
/// or off, and no overload control: what the retry layers multiply, and what budgets and the
/// chain rules hold, on their own.
fn nested(budget: bool, rules: bool) -> SimulationReport {
    let without_overload =
        |policy: RetryPolicy| policy.to_builder().overload_control(None).build().unwrap();
    Simulation::chain((0..3).map(|_| without_overload(s1_policy(budget, s(1)))))
        .against(Dependency::healthy(ms(5), ms(5)).outage(s(2), s(2)))
        .under(Load::constant(100.0))
        .for_duration(s(6))
        .chain_rules(rules)
        .run(4)
        .unwrap()
}

#[test]
fn invalid_simulations_say_what_is_missing() {
    let policy = RetryPolicy::default();
    let error = Simulation::policy(policy.clone()).run(1).unwrap_err();
    assert_eq!(
        error.reason(),
        "the simulation has no dependency: call against()"
    );
    let error = Simulation::policy(policy.clone())
        .against(Dependency::healthy(ms(1), ms(1)))
        .run(1)
        .unwrap_err();
    assert_eq!(error.reason(), "the simulation has no load: call under()");
    let error = Simulation::policy(policy)
        .against(Dependency::healthy(ms(1), ms(1)))
        .under(Load::constant(-1.0))
        .for_duration(s(1))
        .run(1)
        .unwrap_err();
    assert!(error.to_string().starts_with("invalid simulation: load"));
    assert!(Simulation::chain([]).run(1).is_err());
}

/// Clients of very different sizes, calls per second.
const FLEET_SIZES: [f64; 10] = [200.0, 50.0, 20.0, 5.0, 5.0, 5.0, 1.0, 1.0, 1.0, 1.0];

fn fleet(budget: RetryBudget) -> Simulation {
    let client = RetryPolicy::builder().budget(budget).build().unwrap();
    Simulation::fleet(
        FLEET_SIZES
            .iter()
            .map(|&rate| (client.clone(), Load::constant(rate))),
    )
    .against(Dependency::healthy(ms(5), ms(20)).failing(0.5))
    .for_duration(s(60))
}

#[test]
fn s1_a_fleet_of_one_is_the_single_policy_run() {
    let policy = s1_policy(true, s(1));
    let dependency = Dependency::healthy(ms(20), ms(200)).brownout(s(2), 8.0, s(3));
    let single = Simulation::policy(policy.clone())
        .against(dependency.clone())
        .under(Load::constant(200.0))
        .for_duration(s(8))
        .run(9)
        .unwrap();
    let fleet = Simulation::fleet([(policy, Load::constant(200.0))])
        .against(dependency)
        .for_duration(s(8))
        .run(9)
        .unwrap();
    assert_eq!(format!("{single:?}"), format!("{fleet:?}"));
    assert_eq!(single.seconds, fleet.seconds);
}

#[test]
fn s2_a_fleet_is_deterministic_and_its_members_draw_their_own_streams() {
    let (small, large) = (Load::constant(20.0), Load::constant(80.0));
    let run = |loads: [Load; 2]| {
        Simulation::fleet(loads.map(|load| (s1_policy(true, s(1)), load)))
            .against(Dependency::healthy(ms(20), ms(200)).brownout(s(2), 8.0, s(3)))
            .for_duration(s(8))
            .run(5)
            .unwrap()
    };
    let first = run([small, large]);
    assert_eq!(first, run([small, large]));
    let swapped = run([large, small]);
    // Swapping the members swaps which stream each arrival loop draws from.
    assert_ne!(first.seconds, swapped.seconds);
    assert_eq!(first.hops.len(), 2);
    assert!(first.hops[0].calls < first.hops[1].calls, "{first:?}");
    assert!(swapped.hops[0].calls > swapped.hops[1].calls, "{swapped:?}");
}

#[test]
fn b1_the_fleet_wide_bound_is_one_plus_the_fraction_however_the_clients_differ() {
    // With no floor, a client's retries are at most a tenth of its successes plus the one
    // token its bucket starts with (B1, B3, B4), so the fleet's are too, whatever each size.
    let pure = BudgetOptions::new().minimum_per_second(0.0);
    let on = fleet(RetryBudget::automatic().with_options(pure))
        .run(11)
        .unwrap();
    let off = fleet(RetryBudget::None).run(11).unwrap();
    assert_eq!(on.calls, off.calls, "the same seed offers the same calls");
    assert_eq!(on.hops.len(), FLEET_SIZES.len());
    assert_eq!(on.calls, on.hops.iter().map(|h| h.calls).sum::<u64>());
    for (member, &rate) in on.hops.iter().zip(&FLEET_SIZES) {
        let expected = rate * 60.0;
        assert!(
            (member.calls as f64 - expected).abs() < 0.2 * expected + 10.0,
            "{rate}/s for 60 s: {member:?}"
        );
    }
    assert_eq!(on.attempts, on.hops.iter().map(|h| h.attempts).sum::<u64>());
    for member in &on.hops {
        let retries = member.attempts - member.calls;
        assert!(
            retries as f64 <= 0.1 * member.succeeded as f64 + 1.0,
            "{member:?}"
        );
    }
    let bound = 1.0 + 0.1 * on.availability() + FLEET_SIZES.len() as f64 / on.calls as f64;
    assert!(on.load_multiplier() <= bound, "{on}");
    assert!(
        on.load_multiplier() > 1.03,
        "the budget spends what it earns: {on}"
    );
    // Three attempts at a coin-flip dependency: 1 + ½ + ¼.
    assert!((off.load_multiplier() - 1.75).abs() < 0.05, "{off}");
}

#[test]
fn b2_the_floor_lets_small_clients_retry_past_the_fraction() {
    // The default floor, 3 retries a second, is more than a 1-call-a-second client can
    // spend: it retries as if it had no budget, while the 200-call-a-second one is held.
    let on = fleet(RetryBudget::automatic()).run(11).unwrap();
    let multiplier = simulator::HopReport::load_multiplier;
    let largest = multiplier(&on.hops[0]);
    let smallest = multiplier(&on.hops[FLEET_SIZES.len() - 1]);
    assert!(largest < 1.15, "{:?}", on.hops[0]);
    assert!(smallest > 1.6, "{:?}", on.hops[FLEET_SIZES.len() - 1]);
}

#[test]
fn invalid_fleets_say_why() {
    let policy = RetryPolicy::default();
    let error = Simulation::fleet([(policy.clone(), Load::constant(1.0))])
        .against(Dependency::healthy(ms(1), ms(1)))
        .under(Load::constant(1.0))
        .for_duration(s(1))
        .run(1)
        .unwrap_err();
    assert!(error.reason().contains("bring their own loads"), "{error}");
    let error = Simulation::fleet([(policy, Load::constant(1.0).peers(3))])
        .against(Dependency::healthy(ms(1), ms(1)))
        .for_duration(s(1))
        .run(1)
        .unwrap_err();
    assert!(error.reason().contains("add members"), "{error}");
    assert!(Simulation::fleet([]).run(1).is_err());
}

/// S1's policy hedging at p95 (or not), against S1's dependency for a minute: healthy, or with
/// a brownout 8× slower from 10 s for 30 s.
fn hedging(hedge: bool, budget: bool, brownout: bool) -> SimulationReport {
    let policy = s1_policy(budget, s(1))
        .to_builder()
        .hedge(hedge.then(nresilience_core::Hedge::default))
        .build()
        .unwrap();
    let dependency = Dependency::healthy(ms(20), ms(200));
    let dependency = if brownout {
        dependency.brownout(s(10), 8.0, s(30))
    } else {
        dependency
    };
    Simulation::policy(policy)
        .against(dependency)
        .under(Load::constant(500.0))
        .for_duration(s(60))
        .run(42)
        .unwrap()
}

#[test]
fn hg1_hedging_at_p95_halves_the_healthy_p99_9_for_at_most_6_percent_more_load() {
    let (plain, hedged) = (hedging(false, true, false), hedging(true, true, false));
    let (before, after) = (plain.latency(0.999), hedged.latency(0.999));
    assert!(after * 2 <= before, "p99.9 {before:?} → {after:?}");
    assert!(hedged.latency(0.99) < plain.latency(0.99));
    let extra = hedged.load_multiplier() - plain.load_multiplier();
    assert!(extra > 0.01 && extra <= 0.06, "{extra}");
}

#[test]
fn hg2_through_a_brownout_the_budget_holds_hedges_to_its_bound() {
    let budgeted = hedging(true, true, true);
    assert!(budgeted.amplification <= 1.17, "{}", budgeted.amplification);
    // Unpaid for, the same hedges are the storm.
    let unbudgeted = hedging(true, false, true);
    assert!(
        unbudgeted.amplification > 1.5,
        "{}",
        unbudgeted.amplification
    );
}
