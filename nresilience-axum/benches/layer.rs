//! One `oneshot` through a hello-world axum `Router`, with and without `NestedRetryLayer`,
//! marker absent and present.
//!
//! Rows: the bare router; `Router::layer` with a layer that does nothing (axum boxes every
//! layered route again: the cost of any layer there); with `NestedRetryLayer`, as the one-line
//! registration and ignoring inbound; and `NestedRetry` wrapped around the whole router, which
//! shows the layer's own cost without axum's re-boxing. Every router is finalized with
//! `with_state(())`, as `axum::serve` does: a router called without it rebuilds its routes,
//! with their layers, for every request.
//!
//! ```text
//! cargo bench -p nresilience-axum --bench layer
//! ```
//!
//! On a shared 2-core machine wall times move by more than the differences measured here, so
//! each row can also be counted in instructions, which other work on the machine does not move.
//! The rows are `bare`, `identity`, `layer` (the one-line
//! `hello().layer(NestedRetryLayer::new())`), `ignoring inbound` and `around`, each followed by
//! `, unmarked` or `, marked` (the request carries `x-nresilience-retrying: 1`):
//!
//! ```text
//! cargo bench -p nresilience-axum --bench layer --no-run
//! NRESILIENCE_COUNT='layer, marked' valgrind --tool=callgrind --collect-atstart=no \
//!     --toggle-collect=layer::counted --callgrind-out-file=/dev/null \
//!     target/release/deps/layer-<hash>
//! ```
//!
//! valgrind's `Collected` line, divided by the 10,000 calls printed, is instructions per call.
//! `bash scripts/instructions` counts every row of the three benches and checks them against
//! the committed baseline.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;

use axum::body::Body;
use axum::http::Request;
use axum::routing::get;
use axum::Router;
use criterion::measurement::WallTime;
use criterion::{criterion_group, BatchSize, BenchmarkGroup, Criterion};
use nresilience_axum::{wire, NestedRetryLayer};
use tokio::runtime::Runtime;
use tower::layer::util::Identity;
use tower::{Layer, Service, ServiceExt};

fn hello() -> Router {
    Router::new().route("/", get(|| async { "Hello, World!" }))
}

fn request(marked: bool) -> Request<Body> {
    let mut request = Request::get("/");
    if marked {
        request = request.header(wire::MARKER, wire::MARKED);
    }
    request.body(Body::empty()).expect("a valid request")
}

/// Calls in a counted run.
const COUNTED: u32 = 10_000;

/// Runs each row as criterion does, or counts one row's calls.
enum Rows<'a> {
    Timed(BenchmarkGroup<'a, WallTime>),
    /// `NRESILIENCE_COUNT=<row>`: run that row's call [`COUNTED`] times inside [`counted`],
    /// for valgrind to count the instructions of (see the module docs).
    Counted(String),
}

impl Rows<'_> {
    /// Both markers through `subject`: criterion names the rows `{timed_name}, marker
    /// absent|present` (the names earlier runs were saved under), a count `{counted_name},
    /// unmarked|marked`.
    fn form<S>(&mut self, runtime: &Runtime, timed_name: &str, counted_name: &str, subject: &S)
    where
        S: Service<Request<Body>, Error = Infallible> + Clone,
    {
        for marked in [false, true] {
            match self {
                Rows::Timed(group) => {
                    let marker = if marked {
                        "marker present"
                    } else {
                        "marker absent"
                    };
                    group.bench_function(format!("{timed_name}, {marker}"), |b| {
                        b.to_async(runtime).iter_batched(
                            || (subject.clone(), request(marked)),
                            |(subject, request)| async move {
                                black_box(subject.oneshot(request).await.expect("infallible"))
                            },
                            BatchSize::SmallInput,
                        );
                    });
                }
                Rows::Counted(row) => {
                    let marker = if marked { "marked" } else { "unmarked" };
                    let name = format!("{counted_name}, {marker}");
                    if *row != name {
                        continue;
                    }
                    // One request through a clone of `subject`, as a server hands each request
                    // to a clone. The request is built here in every row alike, so the
                    // difference between rows is the layer's own cost.
                    let call = || {
                        let subject = subject.clone();
                        async move { subject.oneshot(request(marked)).await.expect("infallible") }
                    };
                    // Warm: one-time work (callsite registration, buffers that grow once) stays
                    // out of the count.
                    for _ in 0..COUNTED / 10 {
                        black_box(runtime.block_on(call()));
                    }
                    counted(runtime, &call);
                    println!("{name}\t{COUNTED} calls");
                }
            }
        }
    }
}

/// The only function valgrind counts in (`--toggle-collect=layer::counted`).
#[inline(never)]
fn counted<F, Fut>(runtime: &Runtime, call: &F)
where
    F: Fn() -> Fut,
    Fut: Future,
{
    runtime.block_on(async {
        for _ in 0..COUNTED {
            black_box(call().await);
        }
    });
}

fn forms(rows: &mut Rows<'_>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    rows.form(&runtime, "without layer", "bare", &hello().with_state(()));
    rows.form(
        &runtime,
        "identity layer",
        "identity",
        &hello().layer(Identity::new()).with_state(()),
    );
    rows.form(
        &runtime,
        "with layer",
        "layer",
        &hello().layer(NestedRetryLayer::new()).with_state(()),
    );
    let edge = NestedRetryLayer::new().ignore_inbound();
    rows.form(
        &runtime,
        "with layer ignoring inbound",
        "ignoring inbound",
        &hello().layer(edge).with_state(()),
    );
    let around = NestedRetryLayer::new().layer(hello().with_state(()));
    rows.form(&runtime, "layer around the router", "around", &around);
}

fn oneshot(c: &mut Criterion) {
    let mut rows = Rows::Timed(c.benchmark_group("oneshot"));
    forms(&mut rows);
    if let Rows::Timed(group) = rows {
        group.finish();
    }
}

criterion_group!(benches, oneshot);

fn main() {
    if let Ok(row) = std::env::var("NRESILIENCE_COUNT") {
        forms(&mut Rows::Counted(row))
    } else {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
}
