use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::criticality::Criticality;
use crate::overload::OverloadControl;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A service whose limit binds from the start at 20 requests in its handlers.
fn bound(now: Instant) -> ServerAdmission {
    let control = OverloadControl::new().floor(10).initial(20);
    ServerAdmission::with_control(control, now).expect("valid")
}

/// `count` normal first attempts admitted at `now`.
fn admitted(service: &ServerAdmission, count: usize, now: Instant) -> Vec<Admitted> {
    (0..count)
        .map(|_| {
            service
                .admit(false, Criticality::Normal, None, now)
                .unwrap()
        })
        .collect()
}

#[test]
fn f4_retries_are_refused_before_first_attempts_and_sheddable_before_critical() {
    let now = Instant::now();
    let service = bound(now);
    let held = admitted(&service, 9, now);
    // Nine of twenty held: a normal retry may fill 9 (half of 18), a first attempt 18.
    let refused = service
        .admit(true, Criticality::Normal, None, now)
        .unwrap_err();
    assert_eq!(refused.cause, Refusal::Limit);
    let critical_retry = service.admit(true, Criticality::Critical, None, now);
    assert!(critical_retry.is_ok(), "a critical retry may fill 10");
    // Ten held: a sheddable first attempt may fill 10, a critical one all 20.
    let refused = service
        .admit(false, Criticality::Sheddable, None, now)
        .unwrap_err();
    assert_eq!(refused.cause, Refusal::Limit);
    assert!(service
        .admit(false, Criticality::Critical, None, now)
        .is_ok());
    assert!(service.admit(false, Criticality::Normal, None, now).is_ok());
    // For a slot after a first attempt was refused, retries give way to first attempts.
    for admitted in held {
        service.finished(admitted, now + ms(10));
    }
    let refused = service
        .admit(true, Criticality::Critical, None, now + ms(10))
        .unwrap_err();
    assert_eq!(refused.cause, Refusal::Shed);
    // A slot later, the handlers' room is the retry's again.
    assert!(service
        .admit(true, Criticality::Normal, None, now + ms(110))
        .is_ok());
}

#[test]
fn f4_a_request_with_less_time_left_than_the_typical_handling_time_is_refused_at_once() {
    let start = Instant::now();
    let service = ServerAdmission::new(start);
    // Before any handler has finished, the service knows no typical time: nothing refused.
    let first = service
        .admit(false, Criticality::Normal, Some(ms(1)), start)
        .unwrap();
    service.finished(first, start + ms(40));
    let second = service
        .admit(false, Criticality::Normal, None, start + ms(40))
        .unwrap();
    service.finished(second, start + ms(100));
    // Handlers take 50 ms on average: a caller waiting 49 ms more is refused, 51 ms is served.
    let at = start + ms(100);
    let refused = service
        .admit(false, Criticality::Critical, Some(ms(49)), at)
        .unwrap_err();
    assert_eq!(refused.cause, Refusal::Deadline);
    assert_eq!(refused.retry_after, ms(50));
    assert!(service
        .admit(false, Criticality::Normal, Some(ms(51)), at)
        .is_ok());
}

#[test]
fn f4_a_cancelled_handler_frees_its_place_and_teaches_no_handling_time() {
    let start = Instant::now();
    let service = bound(start);
    let held = admitted(&service, 18, start);
    assert!(service
        .admit(false, Criticality::Normal, None, start)
        .is_err());
    for admitted in held {
        service.cancelled(admitted, start + ms(500));
    }
    // No handler finished: no typical time, so even a short deadline is admitted.
    assert!(service
        .admit(false, Criticality::Normal, Some(ms(1)), start + ms(500))
        .is_ok());
}

#[test]
fn f4_invalid_settings_are_refused_with_the_reason() {
    let error =
        ServerAdmission::with_control(OverloadControl::new().floor(0), Instant::now()).unwrap_err();
    assert!(error.to_string().contains("floor"), "{error}");
}

#[derive(Debug, Clone)]
enum Op {
    Admit {
        retry: bool,
        criticality: u8,
        left_ms: Option<u64>,
    },
    Finish {
        which: usize,
        cancelled: bool,
    },
    Wait {
        ms: u64,
    },
}

fn criticality(n: u8) -> Criticality {
    match n % 3 {
        0 => Criticality::Sheddable,
        1 => Criticality::Normal,
        _ => Criticality::Critical,
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), any::<u8>(), proptest::option::of(0u64..2_000))
            .prop_map(|(retry, criticality, left_ms)| Op::Admit { retry, criticality, left_ms }),
        3 => (any::<usize>(), any::<bool>())
            .prop_map(|(which, cancelled)| Op::Finish { which, cancelled }),
        2 => (0u64..300).prop_map(|ms| Op::Wait { ms }),
    ]
}

proptest! {
    /// F4 over any history: with no request in a handler and no deadline, a request is
    /// admitted; a first attempt refused by the limit means its retry is refused too, and a
    /// critical request refused means a sheddable one is refused too.
    #[test]
    fn f4_admission_orders_retries_and_criticality_after_any_history(
        ops in proptest::collection::vec(op(), 1..300),
        initial in 10u32..60,
    ) {
        let mut now = Instant::now();
        let control = OverloadControl::new().floor(10).initial(initial).max(60);
        let service = ServerAdmission::with_control(control, now).expect("valid");
        let mut held: Vec<Admitted> = Vec::new();
        for op in ops {
            match op {
                Op::Admit { retry, criticality: c, left_ms } => {
                    let c = criticality(c);
                    let left = left_ms.map(Duration::from_millis);
                    match service.admit(retry, c, left, now) {
                        Ok(admitted) => held.push(admitted),
                        Err(refused) => {
                            prop_assert!(!held.is_empty() || left.is_some(), "refused with nothing held");
                            if refused.cause == Refusal::Limit && !retry {
                                prop_assert!(service.admit(true, c, left, now).is_err());
                            }
                            if refused.cause == Refusal::Limit && c == Criticality::Critical {
                                prop_assert!(service.admit(retry, Criticality::Sheddable, left, now).is_err());
                            }
                        }
                    }
                }
                Op::Finish { which, cancelled } if !held.is_empty() => {
                    let admitted = held.swap_remove(which % held.len());
                    if cancelled {
                        service.cancelled(admitted, now);
                    } else {
                        service.finished(admitted, now);
                    }
                }
                Op::Finish { .. } => {}
                Op::Wait { ms: wait } => now += ms(wait),
            }
            prop_assert!(service.limit(now) >= 10);
        }
    }
}

#[test]
fn f4_a_service_under_its_capacity_refuses_no_retry() {
    // Four handlers of 20 ms each, sent one request every 10 ms, one in five a retry: half
    // the capacity, for ten seconds.
    let start = Instant::now();
    let service = ServerAdmission::new(start);
    let mut held = std::collections::VecDeque::new();
    for tick in 0..1_000u32 {
        let now = start + ms(10) * tick;
        while held.front().is_some_and(|&(done, _)| done <= now) {
            let (done, admitted) = held.pop_front().unwrap();
            service.finished(admitted, done);
        }
        let retry = tick % 5 == 4;
        let admitted = service.admit(retry, Criticality::Normal, Some(ms(300)), now);
        held.push_back((now + ms(20), admitted.unwrap()));
    }
}

#[test]
fn f4_while_callers_leave_unanswered_retries_give_way_before_any_first_attempt_is_refused() {
    // Each 10 ms, two first attempts and a retry arrive and the handlers finish one request;
    // a caller leaves once 30 requests are ahead of its own.
    let start = Instant::now();
    let service = ServerAdmission::new(start);
    let mut held = std::collections::VecDeque::new();
    let (mut first_refused, mut retry_admitted_last) = (None, 0);
    for tick in 0..500u32 {
        let now = start + ms(10) * tick;
        if let Some(admitted) = held.pop_front() {
            service.finished(admitted, now);
        }
        while held.len() > 30 {
            service.cancelled(held.pop_front().unwrap(), now);
        }
        for _ in 0..2 {
            match service.admit(false, Criticality::Normal, None, now) {
                Ok(admitted) => held.push_back(admitted),
                Err(_) => first_refused = first_refused.or(Some(tick)),
            }
        }
        match service.admit(true, Criticality::Normal, None, now) {
            Ok(admitted) => {
                retry_admitted_last = tick;
                held.push_back(admitted);
            }
            Err(refused) => assert_eq!(refused.cause, Refusal::Shed),
        }
    }
    let first_refused = first_refused.expect("the limit binds, in time");
    assert!(
        retry_admitted_last < first_refused,
        "a retry admitted at tick {retry_admitted_last}, a first attempt refused at {first_refused}"
    );
}
