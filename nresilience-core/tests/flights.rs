//! `Flights`, the attempts in flight that every driver polls: which lands first, a cut
//! before a hedge due at the same instant, a hedge never asked for before it is due, and the
//! end of a sleep (SPEC E5, HG1). On tokio's paused clock, so every instant is exact.

#![allow(clippy::unwrap_used)]

use std::future::{pending, poll_fn, ready, Future};
use std::pin::{pin, Pin};
use std::time::Duration;

use nresilience_core::call::{Call, CallOptions, FlightEvent, Flights, Step};
use nresilience_core::{clock, Hedge, RetryPolicy};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Three attempts, each cut after `timeout`, hedged after `hedge`; nothing measured.
fn policy(timeout: u64, hedge: u64) -> RetryPolicy {
    RetryPolicy::builder()
        .attempt_timeout(Some(ms(timeout)))
        .attempt_ceiling(None)
        .deadline(None)
        .hedge(Some(Hedge::after(ms(hedge))))
        .build()
        .unwrap()
}

type Answer = Pin<Box<dyn Future<Output = u32>>>;

async fn landed(flights: Pin<&mut Flights<Answer>>, call: &Call<()>) -> FlightEvent<u32> {
    let mut flights = flights;
    poll_fn(|cx| flights.as_mut().poll_landed(cx, call.hedge_at())).await
}

#[tokio::test(start_paused = true)]
async fn hg1_e5_a_cut_due_with_the_hedge_comes_first() {
    let start = clock::now();
    let mut call = Call::<()>::start(&policy(100, 100), start, CallOptions::new());
    let mut flights = pin!(Flights::<Answer>::new());
    let Step::Run(first) = call.next::<u32>(start) else {
        panic!("the first attempt runs")
    };
    assert_eq!(first.cut_at(), call.hedge_at());
    flights.as_mut().run(first, (), Box::pin(pending()));
    let FlightEvent::Cut { attempt, .. } = landed(flights.as_mut(), &call).await else {
        panic!("the cut lands first")
    };
    assert_eq!(attempt, first);
    assert_eq!(clock::now() - start, ms(100));
    assert!(flights.is_empty());
}

#[tokio::test(start_paused = true)]
async fn hg1_a_hedge_is_due_at_its_instant_and_runs_beside_the_first() {
    let start = clock::now();
    let mut call = Call::<()>::start(&policy(100, 30), start, CallOptions::new());
    let mut flights = pin!(Flights::<Answer>::new());
    let Step::Run(first) = call.next::<u32>(start) else {
        panic!("the first attempt runs")
    };
    flights.as_mut().run(first, (), Box::pin(pending()));
    let FlightEvent::HedgeDue(at) = landed(flights.as_mut(), &call).await else {
        panic!("the hedge is due before the cut")
    };
    assert_eq!(at - start, ms(30));
    assert!(at >= clock::now(), "never asked for before it is due");
    let Step::Hedge(hedge) = call.next::<u32>(at) else {
        panic!("the budget pays for the hedge")
    };
    // The hedge answers at once; the first still runs, and is not the one that lands.
    flights.as_mut().hedge(hedge, (), Box::pin(ready(7)));
    let FlightEvent::Answered {
        attempt, output, ..
    } = landed(flights.as_mut(), &call).await
    else {
        panic!("the hedge answers")
    };
    assert_eq!((attempt, output), (hedge, 7));
    assert!(!flights.is_empty(), "the first attempt is still in flight");
    flights.as_mut().clear();
    assert!(flights.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_attempt_a_run_started_lands_before_a_hedge_answering_in_the_same_poll() {
    let start = clock::now();
    let mut call = Call::<()>::start(&policy(100, 30), start, CallOptions::new());
    let mut flights = pin!(Flights::<Answer>::new());
    let Step::Run(first) = call.next::<u32>(start) else {
        panic!("the first attempt runs")
    };
    // Both answer by the time the hedge goes out: the first is polled first.
    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    flights
        .as_mut()
        .run(first, (), Box::pin(async move { rx.await.unwrap() }));
    let FlightEvent::HedgeDue(at) = landed(flights.as_mut(), &call).await else {
        panic!("the hedge is due")
    };
    let Step::Hedge(hedge) = call.next::<u32>(at) else {
        panic!("the budget pays for the hedge")
    };
    flights.as_mut().hedge(hedge, (), Box::pin(ready(2)));
    tx.send(1).unwrap();
    let FlightEvent::Answered {
        attempt, output, ..
    } = landed(flights.as_mut(), &call).await
    else {
        panic!("an attempt answers")
    };
    assert_eq!((attempt, output), (first, 1));
}

#[tokio::test(start_paused = true)]
async fn with_nothing_in_flight_the_sleep_ends_in_woke() {
    let start = clock::now();
    let call = Call::<()>::start(&policy(100, 30), start, CallOptions::new());
    let mut flights = pin!(Flights::<Answer>::new());
    flights.as_mut().sleep(start + ms(250));
    assert!(matches!(
        landed(flights.as_mut(), &call).await,
        FlightEvent::Woke
    ));
    assert_eq!(clock::now() - start, ms(250));
}
