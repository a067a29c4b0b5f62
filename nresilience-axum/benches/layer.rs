//! One `oneshot` through a hello-world axum `Router`, with and without `NestedRetryLayer`,
//! marker absent and present.
//!
//! Rows: the bare router; `Router::layer` with a layer that does nothing (axum boxes every
//! layered route again: the cost of any layer there); with `NestedRetryLayer`, as the one-line
//! registration and ignoring inbound; and `NestedRetry` wrapped around the whole router, which
//! shows the layer's own cost without axum's re-boxing.
//!
//! ```text
//! cargo bench -p nresilience-axum --bench layer
//! ```

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::convert::Infallible;
use std::hint::black_box;

use axum::body::Body;
use axum::http::Request;
use axum::routing::get;
use axum::Router;
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion};
use nresilience_axum::{nesting, NestedRetryLayer};
use tokio::runtime::Runtime;
use tower::layer::util::Identity;
use tower::{Layer, Service, ServiceExt};

fn hello() -> Router {
    Router::new().route("/", get(|| async { "Hello, World!" }))
}

fn request(marked: bool) -> Request<Body> {
    let mut request = Request::get("/");
    if marked {
        request = request.header(nesting::MARKER_HEADER, nesting::MARKER_VALUE);
    }
    request.body(Body::empty()).expect("a valid request")
}

/// One request through a clone of `subject`, as a server hands each request to a clone.
fn bench<S>(group: &mut BenchmarkGroup<'_, WallTime>, runtime: &Runtime, name: &str, subject: S)
where
    S: Service<Request<Body>, Error = Infallible> + Clone,
{
    for marked in [false, true] {
        let marker = if marked {
            "marker present"
        } else {
            "marker absent"
        };
        group.bench_function(format!("{name}, {marker}"), |b| {
            b.to_async(runtime).iter_batched(
                || (subject.clone(), request(marked)),
                |(subject, request)| async move {
                    black_box(subject.oneshot(request).await.expect("infallible"))
                },
                BatchSize::SmallInput,
            );
        });
    }
}

fn oneshot(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("oneshot");
    bench(&mut group, &runtime, "without layer", hello());
    bench(
        &mut group,
        &runtime,
        "identity layer",
        hello().layer(Identity::new()),
    );
    bench(
        &mut group,
        &runtime,
        "with layer",
        hello().layer(NestedRetryLayer::new()),
    );
    let edge = NestedRetryLayer::new().ignore_inbound();
    bench(
        &mut group,
        &runtime,
        "with layer ignoring inbound",
        hello().layer(edge),
    );
    let around = NestedRetryLayer::new().layer(hello());
    bench(&mut group, &runtime, "layer around the router", around);
    group.finish();
}

criterion_group!(benches, oneshot);
criterion_main!(benches);
