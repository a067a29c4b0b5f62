use std::time::Duration;

use nresilience_core::{RetryBudget, RetryPolicy};

use crate::{Dependency, Load, Simulation, SimulationReport};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One attempt per call, cut after `timeout`, no ceiling of its own and no overload control:
/// the dependency's model alone.
fn impatient(timeout: Duration) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(1)
        .budget(RetryBudget::None)
        .attempt_timeout(Some(timeout))
        .attempt_ceiling(None)
        .overload_control(None)
        .build()
        .expect("a valid policy")
}

fn run(policy: RetryPolicy, dependency: Dependency, rate: f64) -> SimulationReport {
    Simulation::policy(policy)
        .against(dependency)
        .under(Load::constant(rate))
        .for_duration(Duration::from_secs(10))
        .run(5)
        .expect("a valid simulation")
}

fn peak_queue(report: &SimulationReport) -> u64 {
    report.seconds.iter().map(|s| s.queue).max().unwrap_or(0)
}

#[test]
fn d3_abandoned_work_stays_queued_after_its_callers_left() {
    // One worker at 40 ms serves 25 attempts a second; 30 arrive, and each caller leaves
    // after 50 ms. Fewer than two callers wait at any instant, yet the queue keeps every
    // request they left behind: it grows by about 5 a second, whoever still waits.
    let report = run(
        impatient(ms(50)),
        Dependency::healthy(ms(40), ms(40)).workers(1, 1_000),
        30.0,
    );
    assert!(peak_queue(&report) > 20, "{:?}", report.seconds);
    // Once the queue is longer than a caller's patience, nobody is served in time.
    let last = report.seconds[9];
    assert_eq!(last.failed, last.calls, "{:?}", report.seconds);
    assert_eq!(report.seconds.iter().map(|s| s.shed).sum::<u64>(), 0);
}

#[test]
fn d3_a_full_queue_answers_at_once() {
    // The same overload with a queue of 2: the surplus is refused at the door, at once,
    // and what is admitted waits at most two services, so most calls still succeed.
    let report = run(
        impatient(ms(200)),
        Dependency::healthy(ms(40), ms(40)).workers(1, 2),
        30.0,
    );
    assert!(peak_queue(&report) <= 2);
    let shed: u64 = report.seconds.iter().map(|s| s.shed).sum();
    assert!(shed > 0);
    assert_eq!(report.failed(), shed, "{report}");
    // A refused call fails in no time: the fastest failure is as fast as the fastest call.
    assert_eq!(report.latency(0.0), Duration::ZERO);
    assert!(report.availability() > 0.7, "{report}");
}

#[test]
fn d3_capacity_frees_a_cut_attempt_at_once_and_workers_do_not() {
    // The same load and patience against the two models: capacity forgets a caller that
    // left, so it recovers between bursts; workers serve the abandoned work first.
    let capacity = run(
        impatient(ms(50)),
        Dependency::healthy(ms(40), ms(40)).capacity(1),
        30.0,
    );
    let workers = run(
        impatient(ms(50)),
        Dependency::healthy(ms(40), ms(40)).workers(1, 1_000),
        30.0,
    );
    assert_eq!(capacity.calls, workers.calls, "the same calls offered");
    assert!(
        capacity.availability() > workers.availability() + 0.2,
        "capacity {capacity}\nworkers {workers}"
    );
    assert!(capacity.seconds.iter().all(|s| s.queue == 0 && s.shed == 0));
}

#[test]
fn s2_a_pool_is_deterministic() {
    let dependency = Dependency::healthy(ms(20), ms(200))
        .brownout(Duration::from_secs(3), 5.0, Duration::from_secs(2))
        .workers(4, 50);
    let policy = RetryPolicy::builder().build().expect("a valid policy");
    let first = run(policy.clone(), dependency.clone(), 100.0);
    let again = run(policy, dependency, 100.0);
    assert_eq!(format!("{first:?}"), format!("{again:?}"));
    assert_eq!(first.seconds, again.seconds);
}
