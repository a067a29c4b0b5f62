//! What every HTTP driver does alike, against real axum servers on loopback (SPEC H1–H5, K13, K16,
//! E1, E5, N1, N5, B1, B7), written once: [`behaviour_suite!`] makes each function a test of a
//! driver.
//!
//! Servers run on their own runtime in real time; the client runs on a paused clock with no
//! attempt timeout or deadline, so the only timers are the delays under test and virtual
//! time measures them exactly. The tests that need a timer armed during an attempt run in
//! real time: a paused clock would jump to it while the request is on the wire.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use nresilience_core::nesting::{self, NestingSource};
use nresilience_core::overload::OverloadControl;
use nresilience_core::{
    Backoff, BudgetOptions, Hedge, Jitter, RetryBudget, RetryPolicy, RetryPolicyBuilder, StopReason,
};
use tokio::time::Instant;

use super::driver::{inbound, Driver, NestingProbe, Outbound, Setup};
use super::spans::Spans;
use super::{marked, policy, server, signalling_server, slow_server, unmarked, Script};

/// One `#[tokio::test]` per behaviour of the suite, each run by `$driver`.
macro_rules! behaviour_suite {
    ($driver:ty) => {
        $crate::support::suite::behaviour_suite!(@each $driver, tokio::test(start_paused = true);
            n1_marker_is_on_the_first_attempt_and_every_retry,
            n1_h3_post_without_opt_in_is_sent_once_unmarked_and_its_answer_returned,
            h3_retry_non_idempotent_opts_every_post_in_with_its_body_replayed,
            h3_a_per_request_choice_wins_both_ways,
            n1_a_request_already_marked_is_not_stamped_twice,
            n1_a_policy_of_one_attempt_does_not_stamp,
            k13_retry_after_seconds_is_obeyed_exactly,
            k13_retry_after_ms_is_obeyed_exactly_before_retry_after,
            k16_a_clamped_policy_keeps_a_server_s_hour_within_its_margin,
            h2_retry_after_http_date_is_obeyed,
            h2_garbage_or_past_retry_after_falls_back_to_the_curve,
            h4_attempts_exhausted_on_a_retryable_status_return_the_last_response,
            b7_budget_refusal_end_to_end_is_call_rejected_with_a_hint,
            h5_a_storm_against_one_host_cannot_throttle_retries_to_another,
            b1_a_single_attempt_post_still_deposits,
            n5_a_retrying_call_runs_in_a_retrying_context_and_a_single_attempt_does_not,
            n5_a_retrying_call_inside_a_retrying_context_is_reported_once,
            n5_a_request_already_marked_is_reported_once_as_nested_from_the_header,
            c1_an_overloaded_answer_is_returned_at_once,
            c6_a_5xx_retried_below_is_returned_at_once,
            c1_c6_a_repeated_or_garbled_signal_is_no_signal,
            f1_every_attempt_says_which_of_its_call_it_is,
            f3_the_dependency_s_advice_holds_the_host_s_budget,
            f3_advice_that_does_not_parse_leaves_the_budget_alone,
            h8_every_answer_says_the_attempts_behind_it,
        );
        $crate::support::suite::behaviour_suite!(@each $driver, tokio::test;
            hg1_hg3_a_slow_get_is_hedged_marked_and_the_first_answer_wins,
            hg3_a_post_is_never_hedged,
            hg3_a_post_opted_into_retries_is_not_hedged_without_its_own_opt_in,
            hg1_each_attempt_s_answer_is_on_its_own_span,
            h2_retry_after_past_the_deadline_stops_at_once,
            e1_connection_refused_is_transient_retried_and_the_last_error_kept,
            e5_an_attempt_cut_by_its_timeout_is_retried,
            o2_h5_a_call_over_its_hosts_limit_is_refused_at_once_and_another_host_is_not,
        );
    };
    (@each $driver:ty, $test:meta; $($name:ident,)+) => {
        $(
            #[$test]
            async fn $name() {
                $crate::support::suite::$name::<$driver>().await;
            }
        )+
    };
}

pub(crate) use behaviour_suite;

/// A driver that retries non-idempotent methods too.
fn every_method() -> Setup {
    Setup {
        retry_non_idempotent: true,
        ..Setup::default()
    }
}

/// Retries at once, on a budget of `capacity` tokens refilled at `minimum_per_second` (and by
/// successes).
fn budgeted(minimum_per_second: f64, capacity: f64) -> RetryPolicyBuilder {
    let options = BudgetOptions::default()
        .minimum_per_second(minimum_per_second)
        .capacity(capacity);
    policy()
        .backoff(Backoff::none())
        .budget(RetryBudget::automatic().with_options(options))
}

/// How long a GET waited, on the paused clock, to reach the 200 after `answers`.
async fn waited_through<D: Driver>(answers: &[(u16, Option<&str>)]) -> (Duration, Script) {
    let (addr, script) = server(answers);
    let start = Instant::now();
    let reply = D::new(policy()).send(Outbound::get(addr)).await.unwrap();
    assert_eq!(reply.status, 200);
    (start.elapsed(), script)
}

/// The marker as a request forwarded from a retrying sender carries it.
fn forwarded(request: Outbound) -> Outbound {
    request.headers(&inbound(&[("x-nresilience-retrying", "1")]))
}

pub async fn n1_marker_is_on_the_first_attempt_and_every_retry<D: Driver>() {
    let (addr, script) = server(&[(503, None), (500, None)]);
    let reply = D::new(policy()).send(Outbound::get(addr)).await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "ok");
    assert_eq!(script.markers(), marked(3));
}

pub async fn f1_every_attempt_says_which_of_its_call_it_is<D: Driver>() {
    let (addr, script) = server(&[(503, None), (500, None)]);
    let driver = D::new(policy());
    driver.send(Outbound::get(addr)).await.unwrap();
    driver.send(Outbound::get(addr)).await.unwrap();
    // The first attempt says nothing: its absence is the number 1, as in gRPC (A6).
    assert_eq!(script.attempts(), ["-", "2", "3", "-"]);
}

/// Two calls to a host always answering 503 with `fleet` on every answer: the requests the
/// host saw.
async fn calls_told<D: Driver>(fleet: &'static str) -> usize {
    let told = vec![("x-nresilience-fleet", fleet)];
    let (addr, script) = signalling_server(&vec![(503, told); 6]);
    let driver = D::new(policy().backoff(Backoff::none()));
    for _ in 0..2 {
        let _ = driver.send(Outbound::get(addr)).await;
    }
    script.requests()
}

pub async fn f3_the_dependency_s_advice_holds_the_host_s_budget<D: Driver>() {
    // Told to use none of its budget, the host's bucket keeps the one token the fraction alone
    // could bank: one retry, then none; the first attempts all go.
    let held = calls_told::<D>("retries=1.000, accepted=0.100, allowance=0.000").await;
    assert_eq!(held, 2 + 1);
    // Told the fleet is within its share, the budget is whole: three attempts a call.
    let whole = calls_told::<D>("retries=0.050, accepted=0.100, allowance=1.000").await;
    assert_eq!(whole, 3 + 3);
}

pub async fn f3_advice_that_does_not_parse_leaves_the_budget_alone<D: Driver>() {
    let garbled = calls_told::<D>("retries=1, accepted=0.1, allowance=0").await;
    assert_eq!(garbled, 3 + 3);
}

pub async fn n1_h3_post_without_opt_in_is_sent_once_unmarked_and_its_answer_returned<D: Driver>() {
    let (addr, script) = server(&[(503, None)]);
    let reply = D::new(policy())
        .send(Outbound::post(addr, "order"))
        .await
        .unwrap();
    assert_eq!(reply.status, 503, "the answer, not an error");
    assert_eq!(script.markers(), unmarked());
}

pub async fn h3_retry_non_idempotent_opts_every_post_in_with_its_body_replayed<D: Driver>() {
    let (addr, script) = server(&[(503, None), (502, None)]);
    let reply = D::with(policy(), every_method())
        .send(Outbound::post(addr, "order"))
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(script.markers(), marked(3));
    assert_eq!(script.received_bodies(), vec![Bytes::from("order"); 3]);
}

pub async fn h3_a_per_request_choice_wins_both_ways<D: Driver>() {
    let (addr, script) = server(&[(503, None), (503, None)]);
    let reply = D::new(policy())
        .send(Outbound::post(addr, "order").retryable(true))
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(script.markers(), marked(3));

    // A GET kept to one attempt, by default and against the opt-in of every method.
    for driver in [D::new(policy()), D::with(policy(), every_method())] {
        let (addr, script) = server(&[(503, None)]);
        let reply = driver
            .send(Outbound::get(addr).retryable(false))
            .await
            .unwrap();
        assert_eq!(reply.status, 503);
        assert_eq!(script.markers(), unmarked());
    }
}

pub async fn n1_a_request_already_marked_is_not_stamped_twice<D: Driver>() {
    let (addr, script) = server(&[(503, None)]);
    D::new(policy())
        .send(forwarded(Outbound::get(addr)))
        .await
        .unwrap();
    assert_eq!(script.markers(), marked(2));
}

pub async fn n1_a_policy_of_one_attempt_does_not_stamp<D: Driver>() {
    let (addr, script) = server(&[(503, None)]);
    let reply = D::new(policy().max_attempts(1))
        .send(Outbound::get(addr))
        .await
        .unwrap();
    assert_eq!(reply.status, 503);
    assert_eq!(script.markers(), unmarked());
}

pub async fn k13_retry_after_seconds_is_obeyed_exactly<D: Driver>() {
    let (waited, script) = waited_through::<D>(&[(429, Some("2")), (503, Some("1"))]).await;
    assert_eq!(waited, Duration::from_secs(3));
    assert_eq!(script.requests(), 3);
}

pub async fn k13_retry_after_ms_is_obeyed_exactly_before_retry_after<D: Driver>() {
    // A 429 with both (the OpenAI and Anthropic APIs send both), then a 503 with a fraction
    // (tokio's timers round a wait up to the next millisecond).
    let (addr, script) = signalling_server(&[
        (429, vec![("retry-after-ms", "1500"), ("retry-after", "2")]),
        (503, vec![("retry-after-ms", "249.5")]),
    ]);
    let start = Instant::now();
    let reply = D::new(policy()).send(Outbound::get(addr)).await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(start.elapsed(), Duration::from_millis(1_750));
    assert_eq!(script.requests(), 3);
}

pub async fn k16_a_clamped_policy_keeps_a_server_s_hour_within_its_margin<D: Driver>() {
    // A 429 computes the throttled base, 1 s; the hour is kept within 5 s of it.
    let (addr, script) = server(&[(429, Some("3600"))]);
    let clamped = Backoff::default()
        .with_jitter(Jitter::None)
        .with_pushback_margin(Some(Duration::from_secs(5)));
    let start = Instant::now();
    let reply = D::new(policy().backoff(clamped))
        .send(Outbound::get(addr))
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(start.elapsed(), Duration::from_secs(6));
    assert_eq!(script.requests(), 2);
}

pub async fn h2_retry_after_http_date_is_obeyed<D: Driver>() {
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3));
    let (waited, _) = waited_through::<D>(&[(503, Some(&date))]).await;
    // The date has whole seconds: the wait is what was left of them when it was read.
    assert!(
        waited > Duration::from_secs(1) && waited <= Duration::from_secs(3),
        "{waited:?}"
    );
}

pub async fn h2_garbage_or_past_retry_after_falls_back_to_the_curve<D: Driver>() {
    let (waited, _) = waited_through::<D>(&[(503, Some("soon")), (503, Some("-5"))]).await;
    // The transient curve without jitter: 100 ms, then 200 ms.
    assert_eq!(waited, Duration::from_millis(300));

    let past = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(60));
    let (waited, _) = waited_through::<D>(&[(429, Some(&past))]).await;
    assert_eq!(waited, Duration::ZERO, "a past date means now");
}

pub async fn h2_retry_after_past_the_deadline_stops_at_once<D: Driver>() {
    let (addr, script) = server(&[(503, Some("60"))]);
    let start = std::time::Instant::now();
    let error = D::new(policy().deadline(Some(Duration::from_secs(10))))
        .send(Outbound::get(addr))
        .await
        .unwrap_err();
    assert_eq!(error.reason(), StopReason::DeadlineExceeded);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(script.requests(), 1);
}

pub async fn h4_attempts_exhausted_on_a_retryable_status_return_the_last_response<D: Driver>() {
    let (addr, script) = server(&[(502, None), (500, None), (503, Some("7"))]);
    let reply = D::new(policy()).send(Outbound::get(addr)).await.unwrap();
    assert_eq!(reply.status, 503);
    assert_eq!(
        reply.headers["retry-after"], "7",
        "the last response, whole"
    );
    assert_eq!(script.requests(), 3);
}

pub async fn b7_budget_refusal_end_to_end_is_call_rejected_with_a_hint<D: Driver>() {
    let (addr, script) = server(&[(503, None); 10]);
    let driver = D::new(budgeted(4.0, 1.0));
    let start = Instant::now();
    let error = driver.send(Outbound::get(addr)).await.unwrap_err();
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(error.attempts(), 2);
    assert_eq!(
        script.requests(),
        2,
        "the refused retry never reached the server"
    );
    assert_eq!(start.elapsed(), Duration::from_millis(100), "the pause");
    let rejected = error.rejection().unwrap();
    assert_eq!(rejected.retry_after, Some(Duration::from_millis(150)));
}

pub async fn h5_a_storm_against_one_host_cannot_throttle_retries_to_another<D: Driver>() {
    let (stormy, stormy_script) = server(&[(503, None); 20]);
    let (calm, calm_script) = server(&[(503, None)]);
    let driver = D::new(budgeted(0.0, 2.0).max_attempts(10));
    let error = driver.send(Outbound::get(stormy)).await.unwrap_err();
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(stormy_script.requests(), 3, "two tokens, two retries");
    let reply = driver.send(Outbound::get(calm)).await.unwrap();
    assert_eq!(reply.status, 200, "the calm host has its own bucket");
    assert_eq!(calm_script.requests(), 2);
}

pub async fn b1_a_single_attempt_post_still_deposits<D: Driver>() {
    let (addr, script) = server(&[(503, None)]);
    let driver = D::new(budgeted(0.0, 1.0));
    // Spend the one token.
    driver.send(Outbound::get(addr)).await.unwrap();
    assert_eq!(script.requests(), 2);
    for _ in 0..10 {
        let reply = driver.send(Outbound::post(addr, "x")).await.unwrap();
        assert_eq!(reply.status, 200);
    }
    // Ten successful POSTs funded exactly one retry; the next retry is refused.
    script.then(&[(503, None), (503, None)]);
    let error = driver.send(Outbound::get(addr)).await.unwrap_err();
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(error.attempts(), 2);
    assert_eq!(script.requests(), 2 + 10 + 2);
}

pub async fn e1_connection_refused_is_transient_retried_and_the_last_error_kept<D: Driver>() {
    // A port nobody listens on: bind, read the address, close.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let driver = D::new(
        RetryPolicy::builder()
            .backoff(Backoff::constant(Duration::from_millis(1)))
            .attempt_ceiling(None),
    );
    let error = driver.send(Outbound::get(addr)).await.unwrap_err();
    assert_eq!(error.reason(), StopReason::AttemptsExhausted);
    assert_eq!(error.attempts(), 3);
    match error.last_error() {
        Some(last) => assert!(D::is_connect(last), "{last:?}"),
        None => panic!("expected the connect error, got {error:?}"),
    }
}

pub async fn o2_h5_a_call_over_its_hosts_limit_is_refused_at_once_and_another_host_is_not<
    D: Driver,
>() {
    // One attempt in flight per host at most; the busy host answers its first after 1 s.
    let (busy, busy_script) = slow_server(vec![(200, None, Duration::from_secs(1))]);
    let (calm, calm_script) = server(&[]);
    let control = OverloadControl::new().floor(1).initial(1);
    let driver = D::new(policy().overload_control(Some(control)));
    let first = driver.send(Outbound::get(busy));
    let then = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let start = std::time::Instant::now();
        let refused = driver.send(Outbound::get(busy)).await.unwrap_err();
        let waited = start.elapsed();
        let other = driver.send(Outbound::get(calm)).await.unwrap();
        (refused, waited, other)
    };
    let (first, (refused, waited, other)) = tokio::join!(first, then);
    assert_eq!(first.unwrap().status, 200);
    assert_eq!(refused.reason(), StopReason::Saturated);
    assert_eq!(refused.attempts(), 0);
    assert!(waited < Duration::from_millis(500), "at once: {waited:?}");
    assert_eq!(busy_script.requests(), 1, "the refused call sent nothing");
    assert_eq!(other.status, 200, "the other host has its own load");
    assert_eq!(calm_script.requests(), 1);
}

pub async fn hg1_hg3_a_slow_get_is_hedged_marked_and_the_first_answer_wins<D: Driver>() {
    let spans = Spans::record();
    let slow = Duration::from_secs(5);
    // The first answer takes 5 s; the hedge sent at 50 ms is answered at once.
    let (addr, script) = slow_server(vec![(200, None, slow)]);
    let driver = D::new(
        policy()
            .backoff(Backoff::none())
            .hedge(Some(Hedge::after(Duration::from_millis(50)))),
    );
    let start = std::time::Instant::now();
    let reply = driver.send(Outbound::get(addr)).await.unwrap();
    assert_eq!(reply.status, 200);
    assert!(start.elapsed() < slow, "{:?}", start.elapsed());
    assert!(start.elapsed() >= Duration::from_millis(50));
    // Both carry the marker (HG3); the hedge is a resend, and says it is a hedge.
    assert_eq!(script.markers(), marked(2));
    let attempts = spans.named("HTTP");
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].field("http.request.resend_count"), None);
    assert_eq!(attempts[1].field("http.request.resend_count"), Some("1"));
    assert_eq!(attempts[1].field("nresilience.hedge"), Some("true"));
    assert_eq!(script.attempts(), ["-", "2; hedge"], "F1");
    // The hedge answered: its answer says so (H8).
    let attempts = reply.attempts.unwrap();
    assert_eq!(
        (attempts.made(), attempts.answered_by(), attempts.hedges()),
        (2, 2, 1)
    );
    assert_eq!(attempts.waited(), Duration::ZERO);
}

pub async fn h8_every_answer_says_the_attempts_behind_it<D: Driver>() {
    // A first attempt's success: one attempt, nothing waited.
    let (addr, _) = server(&[]);
    let reply = D::new(policy()).send(Outbound::get(addr)).await.unwrap();
    let attempts = reply.attempts.expect("every response carries its attempts");
    assert_eq!((attempts.made(), attempts.answered_by()), (1, 1));
    assert_eq!((attempts.retries(), attempts.hedges()), (0, 0));
    assert_eq!(attempts.waited(), Duration::ZERO);
    assert_eq!(attempts.reason(), StopReason::Succeeded);
    // A success after a retry: the 100 ms backoff and the 2 s pushback are the time waited.
    let (addr, _) = server(&[(502, None), (503, Some("2"))]);
    let reply = D::new(policy()).send(Outbound::get(addr)).await.unwrap();
    assert_eq!(reply.status, 200);
    let attempts = reply.attempts.unwrap();
    assert_eq!(
        (attempts.made(), attempts.answered_by(), attempts.retries()),
        (3, 3, 2)
    );
    assert_eq!(attempts.waited(), Duration::from_millis(2_100));
    assert!(!attempts.failed());
    // The attempts ran out on a retryable status: the answer is returned, and says the call
    // failed (H4).
    let (addr, _) = server(&[(502, None), (502, None), (503, None)]);
    let reply = D::new(policy()).send(Outbound::get(addr)).await.unwrap();
    assert_eq!(reply.status, 503);
    let attempts = reply.attempts.unwrap();
    assert_eq!((attempts.made(), attempts.answered_by()), (3, 3));
    assert_eq!(attempts.reason(), StopReason::AttemptsExhausted);
    assert!(attempts.failed());
}

pub async fn hg1_each_attempt_s_answer_is_on_its_own_span<D: Driver>() {
    let spans = Spans::record();
    // The first answers 200 after 300 ms; the hedge sent at 50 ms fails at once.
    let (addr, _) = slow_server(vec![
        (200, None, Duration::from_millis(300)),
        (503, None, Duration::ZERO),
    ]);
    let hedging = Hedge::after(Duration::from_millis(50));
    let driver = D::new(policy().max_attempts(2).hedge(Some(hedging)));
    let reply = driver.send(Outbound::get(addr)).await.unwrap();
    assert_eq!(
        reply.status, 200,
        "the failed hedge left the first attempt running"
    );
    let attempts = spans.named("HTTP");
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].field("http.response.status_code"), Some("200"));
    assert_eq!(attempts[1].field("http.response.status_code"), Some("503"));
}

pub async fn hg3_a_post_is_never_hedged<D: Driver>() {
    let wait = Duration::from_millis(300);
    let (addr, script) = slow_server(vec![(200, None, wait)]);
    let driver = D::new(policy().hedge(Some(Hedge::after(Duration::from_millis(50)))));
    let start = std::time::Instant::now();
    let reply = driver.send(Outbound::post(addr, "order")).await.unwrap();
    assert_eq!(reply.status, 200);
    assert!(start.elapsed() >= wait);
    assert_eq!(script.requests(), 1);
    assert_eq!(script.markers(), unmarked());
}

pub async fn hg3_a_post_opted_into_retries_is_not_hedged_without_its_own_opt_in<D: Driver>() {
    let wait = Duration::from_millis(300);
    let hedging = || policy().hedge(Some(Hedge::after(Duration::from_millis(50))));
    // Retryable: sent again after a failure, never twice at once.
    for driver in [D::new(hedging()), D::with(hedging(), every_method())] {
        let (addr, script) = slow_server(vec![(200, None, wait)]);
        let order = Outbound::post(addr, "order").retryable(true);
        let reply = driver.send(order).await.unwrap();
        assert_eq!(reply.status, 200);
        assert_eq!(script.requests(), 1, "one POST reached the server");
        assert_eq!(script.markers(), marked(1), "it may be retried: marked");
    }
    // Hedgeable too: the second attempt goes beside the first.
    let (addr, script) = slow_server(vec![(200, None, wait), (200, None, Duration::ZERO)]);
    let order = Outbound::post(addr, "order")
        .retryable(true)
        .hedgeable(true);
    let reply = D::new(hedging()).send(order).await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(script.requests(), 2, "the POST was hedged");
    assert_eq!(script.received_bodies(), vec![Bytes::from("order"); 2]);
    // And a GET kept to one attempt at a time.
    let (addr, script) = slow_server(vec![(200, None, wait)]);
    let reply = D::new(hedging())
        .send(Outbound::get(addr).hedgeable(false))
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(script.requests(), 1);
}

pub async fn e5_an_attempt_cut_by_its_timeout_is_retried<D: Driver>() {
    let slow = Duration::from_secs(5);
    let (addr, script) = slow_server(vec![(200, None, slow), (200, None, slow)]);
    let driver = D::new(
        policy()
            .backoff(Backoff::none())
            .attempt_timeout(Some(Duration::from_millis(100))),
    );
    let start = std::time::Instant::now();
    let reply = driver.send(Outbound::get(addr)).await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(script.requests(), 3);
    assert!(start.elapsed() < slow, "{:?}", start.elapsed());

    let (addr, _) = slow_server(vec![(200, None, slow); 3]);
    let error = driver.send(Outbound::get(addr)).await.unwrap_err();
    assert_eq!(error.reason(), StopReason::AttemptsExhausted);
    assert!(error.is_timeout());
}

pub async fn n5_a_retrying_call_runs_in_a_retrying_context_and_a_single_attempt_does_not<
    D: Driver,
>() {
    let (addr, _) = server(&[(503, None)]);
    let probe = NestingProbe::default();
    let setup = Setup {
        probe: Some(probe.clone()),
        ..Setup::default()
    };
    let driver = D::with(policy(), setup);
    driver.send(Outbound::get(addr)).await.unwrap();
    driver.send(Outbound::post(addr, "")).await.unwrap();
    assert_eq!(
        probe.seen(),
        vec![
            Some(NestingSource::InProcess),
            Some(NestingSource::InProcess),
            None
        ]
    );
    assert_eq!(nesting::current(), None, "restored afterwards");
}

pub async fn n5_a_retrying_call_inside_a_retrying_context_is_reported_once<D: Driver>() {
    let spans = Spans::record();
    let (addr, _) = server(&[(503, None), (503, None)]);
    let driver = D::new(policy());

    driver.send(Outbound::get(addr)).await.unwrap();
    assert_eq!(spans.count("NestedRetry"), 0, "not nested");
    assert_eq!(spans.count("HTTP"), 3, "one span per attempt");

    nesting::scope(NestingSource::Header, async {
        driver.send(Outbound::get(addr)).await.unwrap();
        assert_eq!(spans.count("NestedRetry"), 1);
        driver.send(Outbound::get(addr)).await.unwrap();
        driver.send(Outbound::post(addr, "")).await.unwrap();
    })
    .await;
    assert_eq!(
        spans.count("NestedRetry"),
        2,
        "once per retrying call, never for a single attempt"
    );
}

pub async fn n5_a_request_already_marked_is_reported_once_as_nested_from_the_header<D: Driver>() {
    let spans = Spans::record();
    let (addr, script) = server(&[(503, None), (503, None)]);
    let driver = D::new(policy());

    driver.send(Outbound::get(addr)).await.unwrap();
    assert_eq!(
        spans.count("NestedRetry"),
        0,
        "unmarked, outside any retrying context"
    );

    // Outside any retrying context too: only the marker says the sender retries.
    driver.send(forwarded(Outbound::get(addr))).await.unwrap();
    let nested = spans.named("NestedRetry");
    assert_eq!(nested.len(), 1, "once for its two attempts: {nested:?}");
    assert_eq!(nested[0].field("nresilience.source"), Some("header"));
    assert_eq!(nested[0].field("nresilience.method"), Some("GET"));
    let target = addr.to_string();
    assert_eq!(nested[0].field("nresilience.target"), Some(target.as_str()));
    assert_eq!(script.markers(), marked(4), "never stamped twice");
}

pub async fn c1_an_overloaded_answer_is_returned_at_once<D: Driver>() {
    let overloaded = vec![("x-nresilience-overloaded", "1"), ("retry-after", "2")];
    let (addr, script) = signalling_server(&[(503, overloaded)]);
    let reply = D::new(policy()).send(Outbound::get(addr)).await.unwrap();
    assert_eq!(reply.status, 503);
    assert_eq!(reply.headers["x-nresilience-overloaded"], "1");
    assert_eq!(
        script.requests(),
        1,
        "not retried, not even after Retry-After"
    );
}

pub async fn c6_a_5xx_retried_below_is_returned_at_once<D: Driver>() {
    let (addr, script) = signalling_server(&[(502, vec![("x-nresilience-retried", "4")])]);
    let reply = D::new(policy()).send(Outbound::get(addr)).await.unwrap();
    assert_eq!(reply.status, 502);
    assert_eq!(script.requests(), 1);
}

pub async fn c1_c6_a_repeated_or_garbled_signal_is_no_signal<D: Driver>() {
    let twice = vec![
        ("x-nresilience-overloaded", "1"),
        ("x-nresilience-overloaded", "1"),
    ];
    let garbled = vec![("x-nresilience-retried", "-4")];
    let (addr, script) = signalling_server(&[(503, twice), (502, garbled)]);
    let reply = D::new(policy()).send(Outbound::get(addr)).await.unwrap();
    assert_eq!(
        reply.status, 200,
        "both retried as plain 5xx, then answered"
    );
    assert_eq!(script.requests(), 3);
}
