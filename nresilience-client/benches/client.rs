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
//! The server runs on its own current-thread runtime on its own thread; the clients run on
//! another current-thread runtime: one core each on a 2-core machine.
//!
//! ```text
//! cargo bench -p nresilience-client --features reqwest --bench client
//! ```

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::convert::Infallible;
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
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
    let addr = serve();
    let uri: Uri = format!("http://{addr}/").parse().expect("a uri");
    let url = uri.to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the client runtime");

    let mut group = c.benchmark_group("client/get");
    group.measurement_time(Duration::from_secs(8));

    let bare = hyper_client::<Empty<Bytes>>();
    group.bench_function("hyper-util", |b| {
        b.to_async(&runtime).iter(|| async {
            let request = Request::get(uri.clone())
                .body(Empty::<Bytes>::new())
                .expect("a request");
            let response = bare.request(request).await.expect("a response");
            black_box(response.into_body().collect().await.expect("a body"))
        });
    });

    let client = Client::new(RetryPolicy::default());
    group.bench_function("nresilience Client", |b| {
        b.to_async(&runtime).iter(|| async {
            let response = client.get(uri.clone()).await.expect("a response");
            black_box(response.into_body().collect().await.expect("a body"))
        });
    });

    let layered = RetryLayer::new(RetryPolicy::default()).layer(hyper_client::<RetryBody>());
    group.bench_function("RetryLayer + hyper-util", |b| {
        b.to_async(&runtime).iter(|| async {
            let request = Request::get(uri.clone())
                .body(Empty::<Bytes>::new())
                .expect("a request");
            let response = layered.clone().oneshot(request).await.expect("a response");
            black_box(response.into_body().collect().await.expect("a body"))
        });
    });

    let plain = reqwest_client();
    group.bench_function("reqwest", |b| {
        b.to_async(&runtime).iter(|| async {
            let response = plain.get(&url).send().await.expect("a response");
            black_box(response.bytes().await.expect("a body"))
        });
    });

    let chain = reqwest_middleware::ClientBuilder::new(reqwest_client()).build();
    group.bench_function("reqwest-middleware, no middleware", |b| {
        b.to_async(&runtime).iter(|| async {
            let response = chain.get(&url).send().await.expect("a response");
            black_box(response.bytes().await.expect("a body"))
        });
    });

    let theirs = reqwest_middleware::ClientBuilder::new(reqwest_client())
        .with(RetryTransientMiddleware::new_with_policy(
            ExponentialBackoff::builder().build_with_max_retries(2),
        ))
        .build();
    group.bench_function("reqwest + reqwest-retry", |b| {
        b.to_async(&runtime).iter(|| async {
            let response = theirs.get(&url).send().await.expect("a response");
            black_box(response.bytes().await.expect("a body"))
        });
    });

    let ours = reqwest_middleware::ClientBuilder::new(reqwest_client())
        .with(RetryMiddleware::new(RetryPolicy::default()))
        .build();
    group.bench_function("reqwest + RetryMiddleware", |b| {
        b.to_async(&runtime).iter(|| async {
            let response = ours.get(&url).send().await.expect("a response");
            black_box(response.bytes().await.expect("a body"))
        });
    });

    group.finish();
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
/// machinery's own success-path cost, free of the loopback round trip's noise.
fn overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the client runtime");
    let uri: Uri = "http://127.0.0.1:8080/".parse().expect("a uri");
    let url = uri.to_string();

    let mut group = c.benchmark_group("overhead/get");
    group.measurement_time(Duration::from_secs(5));

    let answer = tower::service_fn(|_: Request<RetryBody>| async {
        Ok::<_, Infallible>(http::Response::new(Empty::<Bytes>::new()))
    });
    group.bench_function("tower service", |b| {
        b.to_async(&runtime).iter(|| async {
            let request = Request::get(uri.clone())
                .body(RetryBody::empty())
                .expect("a request");
            black_box(answer.oneshot(request).await.expect("infallible"))
        });
    });

    let layered = RetryLayer::new(RetryPolicy::default()).layer(answer);
    group.bench_function("RetryLayer + tower service", |b| {
        b.to_async(&runtime).iter(|| async {
            let request = Request::get(uri.clone())
                .body(Empty::<Bytes>::new())
                .expect("a request");
            let response = layered.clone().oneshot(request).await;
            black_box(response.expect("a response"))
        });
    });

    let chains = [
        ("reqwest-middleware", None),
        (
            "reqwest-retry",
            Some(Arc::new(RetryTransientMiddleware::new_with_policy(
                ExponentialBackoff::builder().build_with_max_retries(2),
            )) as Arc<dyn reqwest_middleware::Middleware>),
        ),
        (
            "RetryMiddleware",
            Some(Arc::new(RetryMiddleware::new(RetryPolicy::default())) as _),
        ),
    ];
    for (name, middleware) in chains {
        let mut builder = reqwest_middleware::ClientBuilder::new(reqwest_client());
        if let Some(middleware) = middleware {
            builder = builder.with_arc(middleware);
        }
        let client = builder.with(Canned).build();
        group.bench_function(name, |b| {
            b.to_async(&runtime)
                .iter(|| async { black_box(client.get(&url).send().await.expect("a response")) });
        });
    }

    group.finish();
}

criterion_group!(benches, success_path, overhead);
criterion_main!(benches);
