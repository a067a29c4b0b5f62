//! Success-path latency of one GET against a hello-world axum server on loopback, through
//! each client in the same run.
//!
//! Rows: hyper-util's legacy client alone (the anchor); `nresilience_client::Client` with the
//! default policy; `RetryLayer` over the same hyper-util client; reqwest alone; reqwest
//! through an empty `reqwest_middleware` chain (the chain's own cost); reqwest with
//! reqwest-retry's `RetryTransientMiddleware` (`ExponentialBackoff` defaults, 2 retries);
//! reqwest with our `RetryMiddleware` (default policy). Every row reads the whole response
//! body, so its keep-alive connection goes back to the pool.
//!
//! A second group, `overhead/get`, takes the network out (an inner service or a last
//! middleware that answers at once) to show the retry machinery's own cost per call.
//!
//! On a shared 2-core machine wall times move by ±10 % from run to run, more than the
//! differences measured here, so every row can also be counted in instructions, which other
//! work on the machine does not move. Only the client's thread is counted (callgrind's
//! toggle is per thread): on the loopback rows the server's work for the extra headers a
//! retrying client sends is not in the figures, nor is kernel time:
//!
//! ```text
//! cargo bench -p nresilience-client --features reqwest --bench client --no-run
//! NRESILIENCE_COUNT='reqwest + RetryMiddleware' valgrind --tool=callgrind \
//!     --collect-atstart=no --toggle-collect=client::counted \
//!     --callgrind-out-file=/dev/null target/release/deps/client-<hash>
//! ```
//!
//! valgrind's `Collected` line, divided by the 1,000 calls printed, is instructions per call.
//!
//! The server runs on its own current-thread runtime on its own thread; the clients run on
//! another current-thread runtime: one core each on a 2-core machine.
//!
//! ```text
//! cargo bench -p nresilience-client --features reqwest --bench client
//! ```

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, Criterion};
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use nresilience_client::reqwest::RetryMiddleware;
use nresilience_client::{Client, RetryBody, RetryLayer};
use nresilience_core::RetryPolicy;
use reqwest_retry::policies::ExponentialBackoff;
use reqwest_retry::RetryTransientMiddleware;
use tokio::runtime::Runtime;
use tower::{Layer, ServiceExt};

/// Serves `Hello, World!` on a loopback port from a runtime of its own.
fn serve() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.set_nonblocking(true).expect("non-blocking");
    let addr = listener.local_addr().expect("bound");
    let app = Router::new().route("/", get(|| async { "Hello, World!" }));
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the server runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
            axum::serve(listener, app).await.expect("serving");
        });
    });
    addr
}

/// hyper-util's client as `nresilience_client::Client` builds it: TCP_NODELAY, HTTP/1.1.
fn hyper_client<B>() -> HyperClient<HttpConnector, B>
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
{
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    HyperClient::builder(TokioExecutor::new()).build(connector)
}

fn reqwest_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .build()
        .expect("a reqwest client")
}

fn success_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("client/get");
    group.measurement_time(Duration::from_secs(8));
    success_path_rows(&mut Rows::Timed(group));
}

fn success_path_rows(rows: &mut Rows<'_>) {
    let addr = serve();
    let uri: Uri = format!("http://{addr}/").parse().expect("a uri");
    let url = uri.to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the client runtime");

    let bare = hyper_client::<Empty<Bytes>>();
    rows.row(&runtime, "hyper-util", || async {
        let request = Request::get(uri.clone())
            .body(Empty::<Bytes>::new())
            .expect("a request");
        let response = bare.request(request).await.expect("a response");
        response.into_body().collect().await.expect("a body")
    });

    let client = Client::new(RetryPolicy::default());
    rows.row(&runtime, "nresilience Client", || async {
        let response = client.get(uri.clone()).await.expect("a response");
        response.into_body().collect().await.expect("a body")
    });

    let layered = RetryLayer::new(RetryPolicy::default()).layer(hyper_client::<RetryBody>());
    rows.row(&runtime, "RetryLayer + hyper-util", || async {
        let request = Request::get(uri.clone())
            .body(Empty::<Bytes>::new())
            .expect("a request");
        let response = layered.clone().oneshot(request).await.expect("a response");
        response.into_body().collect().await.expect("a body")
    });

    let plain = reqwest_client();
    rows.row(&runtime, "reqwest", || async {
        let response = plain.get(&url).send().await.expect("a response");
        response.bytes().await.expect("a body")
    });

    let chains = [
        ("reqwest-middleware, no middleware", None),
        ("reqwest + reqwest-retry", Some(reqwest_retry())),
        ("reqwest + RetryMiddleware", Some(ours())),
    ];
    for (name, middleware) in chains {
        let client = chain(middleware).build();
        rows.row(&runtime, name, || async {
            let response = client.get(&url).send().await.expect("a response");
            response.bytes().await.expect("a body")
        });
    }
}

/// reqwest-retry as its README sets it up: `ExponentialBackoff` defaults, at most 2 retries
/// (3 attempts, as our default policy).
fn reqwest_retry() -> Arc<dyn reqwest_middleware::Middleware> {
    Arc::new(RetryTransientMiddleware::new_with_policy(
        ExponentialBackoff::builder().build_with_max_retries(2),
    ))
}

/// Our middleware with the default policy.
fn ours() -> Arc<dyn reqwest_middleware::Middleware> {
    Arc::new(RetryMiddleware::new(RetryPolicy::default()))
}

fn chain(
    middleware: Option<Arc<dyn reqwest_middleware::Middleware>>,
) -> reqwest_middleware::ClientBuilder {
    let builder = reqwest_middleware::ClientBuilder::new(reqwest_client());
    match middleware {
        Some(middleware) => builder.with_arc(middleware),
        None => builder,
    }
}

/// Answers every request at once with an empty `200`, in place of the network: what is
/// left of a row is the middleware's own cost.
#[derive(Debug, Clone, Copy)]
struct Canned;

#[async_trait::async_trait]
impl reqwest_middleware::Middleware for Canned {
    async fn handle(
        &self,
        _: reqwest::Request,
        _: &mut http::Extensions,
        _: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        Ok(reqwest::Response::from(http::Response::new(
            Vec::<u8>::new(),
        )))
    }
}

/// The same clients with the network taken out: an inner service (tower) or a last
/// middleware (reqwest) that answers at once. The difference between rows is the retry
/// machinery's own success-path cost, free of the loopback round trip.
fn overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("overhead/get");
    group.measurement_time(Duration::from_secs(5));
    overhead_rows(&mut Rows::Timed(group));
}

/// Runs each row as criterion does, or counts one row's calls.
enum Rows<'a> {
    Timed(BenchmarkGroup<'a, WallTime>),
    /// `NRESILIENCE_COUNT=<row>`: run that row's call 1,000 times inside [`counted`], for
    /// valgrind to count the instructions of (see the module docs). Only the client's
    /// thread is counted, never the server's.
    Counted(String),
}

impl Rows<'_> {
    fn row<F, Fut>(&mut self, runtime: &Runtime, name: &str, call: F)
    where
        F: Fn() -> Fut,
        Fut: Future,
    {
        match self {
            Rows::Timed(group) => {
                group.bench_function(name, |b| b.to_async(runtime).iter(&call));
            }
            Rows::Counted(row) if row == name => {
                // Warm: the first calls make per-host buckets, the propagator and the pools.
                for _ in 0..COUNTED / 10 {
                    black_box(runtime.block_on(call()));
                }
                counted(runtime, &call);
                println!("{name}\t{COUNTED} calls");
            }
            Rows::Counted(_) => {}
        }
    }
}

/// Calls in a counted run.
const COUNTED: u32 = 1000;

/// The only function valgrind counts in (`--toggle-collect=client::counted`).
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

fn overhead_rows(rows: &mut Rows<'_>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the client runtime");
    let uri: Uri = "http://127.0.0.1:8080/".parse().expect("a uri");
    let url = uri.to_string();

    let answer = tower::service_fn(|_: Request<RetryBody>| async {
        Ok::<_, Infallible>(http::Response::new(Empty::<Bytes>::new()))
    });
    rows.row(&runtime, "tower service", || async {
        let request = Request::get(uri.clone())
            .body(RetryBody::empty())
            .expect("a request");
        answer.oneshot(request).await.expect("infallible")
    });

    let layered = RetryLayer::new(RetryPolicy::default()).layer(answer);
    rows.row(&runtime, "RetryLayer + tower service", || async {
        let request = Request::get(uri.clone())
            .body(Empty::<Bytes>::new())
            .expect("a request");
        layered.clone().oneshot(request).await.expect("a response")
    });

    let chains = [
        ("reqwest-middleware", None),
        ("reqwest-retry", Some(reqwest_retry())),
        ("RetryMiddleware", Some(ours())),
    ];
    for (name, middleware) in chains {
        let client = chain(middleware).with(Canned).build();
        rows.row(&runtime, name, || async {
            client.get(&url).send().await.expect("a response")
        });
    }
}

criterion_group!(benches, success_path, overhead);

fn main() {
    if let Ok(row) = std::env::var("NRESILIENCE_COUNT") {
        success_path_rows(&mut Rows::Counted(row.clone()));
        overhead_rows(&mut Rows::Counted(row));
    } else {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
}
