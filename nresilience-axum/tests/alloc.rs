//! The layer's per-request cost in allocations, counted by an instrumented global allocator
//! (its own test binary, one test, so nothing else allocates meanwhile).

use std::alloc::System;
use std::convert::Infallible;
use std::future::{ready, Future};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http::{Request, Response};
use nresilience_axum::{wire, NestedRetryLayer};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use tower::{service_fn, Layer, Service};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations made by `call` and by polling its future to completion.
fn allocations<S: Service<Request<()>>>(service: &mut S, request: Request<()>) -> usize {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(service.poll_ready(&mut cx).is_ready());
    let region = Region::new(GLOBAL);
    {
        let mut future = pin!(service.call(request));
        assert!(matches!(future.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
    }
    region.change().allocations
}

#[test]
fn n4_unmarked_request_costs_no_allocation_and_a_marked_one_only_its_extension() {
    let inner = service_fn(|_: Request<()>| ready(Ok::<_, Infallible>(Response::new(()))));
    let unmarked = || {
        Request::get("/")
            .header("accept", "*/*")
            .header("user-agent", "wrk")
            .body(())
            .unwrap()
    };
    let marked = || {
        let mut request = unmarked();
        request.headers_mut().insert(wire::MARKER, wire::MARKED);
        request
    };

    let mut layered = NestedRetryLayer::new().layer(inner);
    let mut edge = NestedRetryLayer::new().ignore_inbound().layer(inner);
    assert_eq!(allocations(&mut layered, unmarked()), 0);
    assert_eq!(allocations(&mut edge, unmarked()), 0);
    assert_eq!(allocations(&mut edge, marked()), 0);
    // The extension map (the task-local scope itself allocates nothing).
    let marked = allocations(&mut layered, marked());
    assert!((1..=3).contains(&marked), "{marked} allocations");
}
