//! Hedging under a paused tokio clock (SPEC HG1, HG2, B5, B9, B13, E5, H3).

#![allow(clippy::unwrap_used)]

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nresilience_core::call::{Call, CallOptions, Step};
use nresilience_core::chain::{self, Inbound};
use nresilience_core::{
    clock, Attempt, Backoff, BudgetOptions, Criticality, Hedge, RetryBudget, RetryPolicy,
    RetryPolicyBuilder, StopReason, Verdict,
};
use support::Capture;
use tokio::time::{sleep, Instant};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Hedging after 50 ms, no measured ceiling, no backoff.
fn hedging() -> RetryPolicyBuilder {
    RetryPolicy::builder()
        .backoff(Backoff::none())
        .attempt_ceiling(None)
        .hedge(Some(Hedge::after(ms(50))))
}

/// A bucket that only successes refill (no floor), holding `capacity` tokens.
fn tokens(capacity: f64) -> RetryBudget {
    let options = BudgetOptions::default()
        .minimum_per_second(0.0)
        .capacity(capacity);
    RetryBudget::automatic().with_options(options)
}

type Answer = Pin<Box<dyn Future<Output = Result<u32, ()>>>>;

/// Attempt `n` answers `Ok(n)` after `latencies[n - 1]`, or never when that is `None`;
/// returns when each attempt started, after the call's start.
async fn run(
    policy: &RetryPolicy,
    latencies: &[Option<Duration>],
) -> (Result<u32, StopReason>, Vec<Duration>, Duration) {
    let start = Instant::now();
    let started = Mutex::new(Vec::new());
    let result = policy
        .execute(|attempt: Attempt| {
            started.lock().unwrap().push(start.elapsed());
            let n = attempt.number();
            let latency = latencies.get(n as usize - 1).copied().flatten();
            let answer: Answer = Box::pin(async move {
                match latency {
                    Some(latency) => {
                        sleep(latency).await;
                        Ok(n)
                    }
                    None => std::future::pending().await,
                }
            });
            answer
        })
        .await
        .map_err(|e| e.reason());
    (result, started.into_inner().unwrap(), start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn hg1_a_hedge_starts_exactly_at_its_delay_and_the_first_answer_wins() {
    let policy = hedging().build().unwrap();
    let (result, started, elapsed) = run(&policy, &[Some(ms(200)), Some(ms(10))]).await;
    assert_eq!(started, [ms(0), ms(50)]);
    assert_eq!(result, Ok(2), "the hedge answered first");
    assert_eq!(elapsed, ms(60));

    // An attempt that answers before the delay is never hedged.
    let (result, started, elapsed) = run(&policy, &[Some(ms(49)), Some(ms(1))]).await;
    assert_eq!((result, started, elapsed), (Ok(1), vec![ms(0)], ms(49)));
}

#[tokio::test(start_paused = true)]
async fn hg1_the_losing_attempt_is_dropped_when_the_winner_answers() {
    let policy = hedging().build().unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let mut call = Box::pin(policy.execute(|attempt: Attempt| {
        let flag = (attempt.number() == 1).then(|| Flag(Arc::clone(&dropped)));
        let answer: Answer = Box::pin(async move {
            let _flag = flag;
            if attempt.number() == 1 {
                std::future::pending::<()>().await;
            }
            sleep(ms(10)).await;
            Ok(attempt.number())
        });
        answer
    }));
    assert_eq!((&mut call).await.unwrap(), 2);
    // Dropped by the call when the hedge won, while the call's future still lives.
    assert!(dropped.load(Ordering::SeqCst));
    drop(call);
}

#[tokio::test(start_paused = true)]
async fn hg1_max_attempts_bounds_the_attempts_in_flight_and_in_all() {
    let policy = hedging()
        .attempt_timeout(None)
        .deadline(Some(ms(1_000)))
        .build()
        .unwrap();
    let (result, started, elapsed) = run(&policy, &[None, None, None, None]).await;
    assert_eq!(started, [ms(0), ms(50), ms(100)], "three attempts, no more");
    // All three are cut at the deadline.
    assert_eq!(elapsed, ms(1_000));
    assert!(result.is_err());
}

#[tokio::test(start_paused = true)]
async fn hg1_retries_after_failures_still_work_when_hedging_is_on() {
    let policy = hedging()
        .backoff(Backoff::constant(ms(100)).with_jitter(nresilience_core::Jitter::None))
        .build()
        .unwrap();
    let start = Instant::now();
    let started = Mutex::new(Vec::new());
    let result = policy
        .execute(|attempt: Attempt| {
            started.lock().unwrap().push(start.elapsed());
            async move {
                sleep(ms(10)).await;
                if attempt.number() == 1 {
                    Err(())
                } else {
                    Ok(attempt.number())
                }
            }
        })
        .await;
    assert_eq!(result.unwrap(), 2);
    // Failed at 10 ms, before the hedge was due; retried after the backoff.
    assert_eq!(started.into_inner().unwrap(), [ms(0), ms(110)]);
}

#[tokio::test(start_paused = true)]
async fn hg1_a_failure_beside_a_hedge_leaves_the_hedge_running() {
    let policy = hedging().build().unwrap();
    let start = Instant::now();
    let result = policy
        .execute(|attempt: Attempt| async move {
            match attempt.number() {
                // The first fails at 80 ms, after the hedge went out at 50.
                1 => {
                    sleep(ms(80)).await;
                    Err(())
                }
                n => {
                    sleep(ms(40)).await;
                    Ok(n)
                }
            }
        })
        .await;
    assert_eq!(result.unwrap(), 2);
    assert_eq!(start.elapsed(), ms(90));
}

#[tokio::test(start_paused = true)]
async fn hg2_b5_hedges_spend_tokens_and_a_refused_hedge_leaves_the_first_running() {
    let capture = Capture::install();
    let policy = hedging().budget(tokens(1.0)).build().unwrap();
    let bucket = Arc::clone(policy.bucket(clock::now()).unwrap());
    assert_eq!(bucket.balance(clock::now()), 1.0);

    let (result, started, _) = run(&policy, &[Some(ms(200)), Some(ms(10))]).await;
    assert_eq!((result, started.len()), (Ok(2), 2));
    // The hedge spent the token; the call's success put a tenth back (B2).
    let balance = bucket.balance(clock::now());
    assert!(balance < 0.2, "{balance}");
    assert!(capture.events_named("HedgeSuppressed").is_empty());

    // Not enough for another: the first attempt goes on alone and answers.
    let (result, started, elapsed) = run(&policy, &[Some(ms(200)), Some(ms(10))]).await;
    assert_eq!((result, started, elapsed), (Ok(1), vec![ms(0)], ms(200)));
    let suppressed = capture.events_named("HedgeSuppressed");
    assert_eq!(suppressed.len(), 1, "recorded once, when the hedge was due");
}

#[tokio::test(start_paused = true)]
async fn hg2_b13_a_hedge_refused_a_connection_returns_its_token() {
    let policy = hedging().budget(tokens(1.0)).build().unwrap();
    let bucket = Arc::clone(policy.bucket(clock::now()).unwrap());
    let start = Instant::now();
    let started = Mutex::new(Vec::new());
    // The first attempt answers at 200 ms; every hedge finds nothing listening, at once.
    let classify = |result: &Result<u32, ()>| match result {
        Ok(_) => Verdict::Success,
        Err(()) => Verdict::Unreachable,
    };
    let result = policy
        .execute_with(&classify, |attempt: Attempt| {
            started.lock().unwrap().push(start.elapsed());
            let n = attempt.number();
            async move {
                if n == 1 {
                    sleep(ms(200)).await;
                    Ok(n)
                } else {
                    Err(())
                }
            }
        })
        .await;
    assert_eq!(result.unwrap(), 1);
    // The one token paid for each hedge in turn: each gave it back when refused.
    assert_eq!(started.into_inner().unwrap(), [ms(0), ms(50), ms(100)]);
    assert_eq!(bucket.balance(clock::now()), 1.0);
}

#[tokio::test(start_paused = true)]
async fn hg2_b9_sheddable_calls_never_hedge_and_raise_no_event() {
    let capture = Capture::install();
    let refused = hedging().criticality(Criticality::Sheddable).build();
    assert!(refused.unwrap_err().to_string().contains("Sheddable"));

    // A policy taking its criticality from the request: a sheddable request never hedges,
    // a normal one does.
    let policy = hedging().ambient_criticality(true).build().unwrap();
    for (criticality, attempts) in [(Criticality::Sheddable, 1), (Criticality::Normal, 2)] {
        let inbound = Inbound::new().criticality(Some(criticality));
        let (result, started, _) =
            chain::serving(inbound, run(&policy, &[Some(ms(200)), Some(ms(10))])).await;
        assert_eq!(started.len(), attempts, "{criticality:?}");
        assert!(result.is_ok());
    }
    assert!(capture.events_named("HedgeSuppressed").is_empty());
}

#[tokio::test(start_paused = true)]
async fn hg1_e5_a_quantile_trigger_waits_for_its_samples() {
    let policy = RetryPolicy::builder()
        .backoff(Backoff::none())
        .attempt_ceiling(None)
        .hedge(Some(Hedge::default()))
        .build()
        .unwrap();
    // 19 answers of 20 ms: one short of the window's 20 samples.
    for _ in 0..19 {
        assert_eq!(run(&policy, &[Some(ms(20))]).await.1.len(), 1);
    }
    // No hedge yet, however slow the attempt.
    let (result, started, elapsed) = run(&policy, &[Some(ms(300)), Some(ms(5))]).await;
    assert_eq!((result, started, elapsed), (Ok(1), vec![ms(0)], ms(300)));
    // Twenty samples: the next slow attempt is hedged at about the p95, 20 ms.
    let (result, started, _) = run(&policy, &[Some(ms(300)), Some(ms(5))]).await;
    assert_eq!(result, Ok(2));
    assert_eq!(started.len(), 2);
    assert!(started[1] >= ms(19) && started[1] <= ms(24), "{started:?}");
}

#[test]
fn hg1_h3_a_call_that_may_not_retry_never_hedges() {
    let policy = hedging().build().unwrap();
    let now = std::time::Instant::now();
    let mut call = Call::<()>::start(&policy, now, CallOptions::new().may_retry(false));
    let Step::<(), ()>::Run(first) = call.next(now) else {
        panic!("the first attempt runs")
    };
    assert_eq!(call.hedge_at(), None);
    assert!(matches!(call.next::<()>(now + ms(500)), Step::KeepWaiting));
    assert!(matches!(
        call.attempted(first, Ok(()), Verdict::Success, now + ms(600)),
        Step::Done(Ok(()))
    ));

    // The same policy, a call that may retry: due at the delay, one hedge per delay.
    let mut call = Call::<()>::start(&policy, now, CallOptions::new());
    let Step::<(), ()>::Run(first) = call.next(now) else {
        panic!("the first attempt runs")
    };
    assert_eq!(call.hedge_at(), Some(now + ms(50)));
    assert!(matches!(call.next::<()>(now + ms(49)), Step::KeepWaiting));
    let Step::<(), ()>::Hedge(second) = call.next(now + ms(50)) else {
        panic!("hedged at the delay")
    };
    assert!(second.is_hedge() && second.is_retry());
    assert_eq!((second.number(), call.in_flight()), (2, 2));
    assert_eq!(call.hedge_at(), Some(now + ms(100)));
    // A transient failure beside the hedge: the hedge goes on.
    assert!(matches!(
        call.attempted::<()>(first, Err(()), Verdict::TRANSIENT, now + ms(60)),
        Step::KeepWaiting
    ));
    assert!(matches!(
        call.attempted(second, Ok(()), Verdict::Success, now + ms(70)),
        Step::Done(Ok(()))
    ));
    assert_eq!(call.attempts(), 2);
}

#[test]
fn hg1_k13_a_throttle_beside_a_hedge_sets_the_wait_before_the_retry() {
    let policy = hedging()
        .backoff(Backoff::none().with_maximum_delay(Some(Duration::from_secs(30))))
        .build()
        .unwrap();
    let now = std::time::Instant::now();
    let mut call = Call::<()>::start(&policy, now, CallOptions::new());
    let Step::<(), ()>::Run(first) = call.next(now) else {
        panic!("the first attempt runs")
    };
    let Step::<(), ()>::Hedge(second) = call.next(now + ms(50)) else {
        panic!("hedged at the delay")
    };
    // The first is throttled with a 10 s hint while the hedge runs: no more hedges.
    let throttled = Verdict::Throttled {
        self_imposed: false,
        retry_after: Some(Duration::from_secs(10)),
    };
    assert!(matches!(
        call.attempted::<()>(first, Err(()), throttled, now + ms(60)),
        Step::KeepWaiting
    ));
    assert_eq!(call.hedge_at(), None);
    // The hedge then fails transiently: the retry still waits out the server's hint.
    let Step::<(), ()>::Sleep(until) =
        call.attempted(second, Err(()), Verdict::TRANSIENT, now + ms(70))
    else {
        panic!("a retry after the hint")
    };
    assert_eq!(until, now + ms(70) + Duration::from_secs(10));
}
