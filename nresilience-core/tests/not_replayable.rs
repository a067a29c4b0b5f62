//! A call dropped to one attempt because its request could not be sent again (SPEC H7): it
//! says so when that attempt fails in a way a retry could fix, and only then. The clock is an
//! argument: no timer runs.

#![allow(clippy::unwrap_used)]

use std::time::Instant;

use nresilience_core::call::{Call, CallOptions, Step};
use nresilience_core::{RetryPolicy, StopReason, Verdict};

/// Why a call of `options`, dropped to one attempt before it, stops on `verdict`: as its
/// error says, or as the attempts behind its answer say.
fn ends(options: CallOptions<'_>, verdict: Verdict) -> StopReason {
    let policy = RetryPolicy::builder()
        .attempt_ceiling(None)
        .build()
        .unwrap();
    let now = Instant::now();
    let mut call: Call<&str> = Call::start(&policy, now, options);
    call.single_attempt();
    assert!(!call.may_retry());
    let Step::Run(attempt) = call.next::<u16>(now) else {
        unreachable!("a first attempt always runs")
    };
    let value = if verdict == Verdict::Success {
        Ok(200)
    } else {
        Err("failed")
    };
    let Step::Done(result) = call.attempted(attempt, value, verdict, now) else {
        unreachable!("a single attempt ends the call")
    };
    match result {
        Ok(_) => call.answered_after().unwrap().reason(),
        Err(error) => error.reason(),
    }
}

#[test]
fn h7_a_retryable_failure_of_an_unreplayable_request_says_why_it_was_not_retried() {
    for verdict in [Verdict::TRANSIENT, Verdict::THROTTLED, Verdict::Unreachable] {
        let reason = ends(CallOptions::new(), verdict);
        assert_eq!(reason, StopReason::NotReplayable, "{verdict:?}");
    }
}

#[test]
fn h7_an_unreplayable_request_that_succeeds_or_fails_for_good_ends_as_any_other() {
    assert_eq!(
        ends(CallOptions::new(), Verdict::Success),
        StopReason::Succeeded
    );
    assert_eq!(
        ends(CallOptions::new(), Verdict::Permanent),
        StopReason::Permanent
    );
}

#[test]
fn h7_a_call_that_could_not_retry_anyway_is_not_blamed_on_its_body() {
    let reason = ends(CallOptions::new().may_retry(false), Verdict::TRANSIENT);
    assert_eq!(reason, StopReason::AttemptsExhausted);
}

#[test]
fn h7_the_outcome_is_named_for_metrics_and_spans() {
    assert_eq!(StopReason::NotReplayable.as_str(), "not_replayable");
    assert_eq!(StopReason::NotReplayable.signal(1), None);
}
