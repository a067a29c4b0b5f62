//! The tower retry layer, as `Client` runs it, against real axum servers on loopback: the
//! behaviour suite every HTTP driver runs, then what only the layer does — it buffers a body
//! for replay up to a cap, reading one of unknown length as far as it is ready (SPEC N1).
//!
//! Servers run on their own runtime in real time; the client runs on a paused clock with no
//! attempt timeout or deadline, so the only timers are the delays under test and virtual
//! time measures them exactly.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use axum::http::{Method, Request, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{self, Client as HyperClient};
use hyper_util::rt::TokioExecutor;
use nresilience_client::{
    Client, Hedgeable, Retry, RetryBody, RetryLayer, Retryable, TransportError,
};
use nresilience_core::{RetryError, RetryPolicyBuilder};
use support::driver::{Driver, NestingProbe, Outbound, Reply, Setup};
use support::{marked, one_token, policy, server, unmarked};
use tower::{Layer, Service, ServiceExt};

support::suite::behaviour_suite!(Tower);

/// The layer as `Client` wraps it around its pool or, to watch each attempt go out, around a
/// hyper client behind a probe.
enum Tower {
    Client(Client),
    Probed(Retry<Probed>),
}

impl Driver for Tower {
    type Error = TransportError;

    fn with(policy: RetryPolicyBuilder, setup: Setup) -> Self {
        let policy = policy.build().unwrap();
        let configure = |layer: RetryLayer| layer.retry_non_idempotent(setup.retry_non_idempotent);
        match setup.probe {
            None => Self::Client(Client::builder(policy).layer(configure).build()),
            Some(probe) => {
                let inner = HyperClient::builder(TokioExecutor::new()).build(HttpConnector::new());
                Self::Probed(configure(RetryLayer::new(policy)).layer(Probed { inner, probe }))
            }
        }
    }

    async fn send(&self, outbound: Outbound) -> Result<Reply, RetryError<TransportError>> {
        let response = match self {
            Self::Client(client) if outbound.is_plain_get() => client.get(outbound.url()).await,
            Self::Client(client) => client.request(request(outbound)).await,
            Self::Probed(service) => service.clone().oneshot(request(outbound)).await,
        }?;
        let (parts, body) = response.into_parts();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            attempts: parts.extensions.get().copied(),
            body: body.collect().await.unwrap().to_bytes(),
        })
    }

    fn is_connect(error: &TransportError) -> bool {
        error
            .get_ref()
            .downcast_ref::<legacy::Error>()
            .is_some_and(legacy::Error::is_connect)
    }
}

fn request(outbound: Outbound) -> Request<Full<Bytes>> {
    let mut request = Request::builder()
        .method(outbound.method.clone())
        .uri(outbound.url())
        .body(Full::new(outbound.body))
        .unwrap();
    *request.headers_mut() = outbound.headers;
    if let Some(choice) = outbound.retryable {
        request.extensions_mut().insert(Retryable(choice));
    }
    if let Some(choice) = outbound.hedgeable {
        request.extensions_mut().insert(Hedgeable(choice));
    }
    request
}

/// A hyper client that notes the nesting context each request is sent in.
#[derive(Clone)]
struct Probed {
    inner: HyperClient<HttpConnector, RetryBody>,
    probe: NestingProbe,
}

impl Service<Request<RetryBody>> for Probed {
    type Response = Response<Incoming>;
    type Error = legacy::Error;
    type Future = legacy::ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), legacy::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RetryBody>) -> Self::Future {
        self.probe.see();
        self.inner.call(request)
    }
}

fn client(policy: RetryPolicyBuilder) -> Client {
    Client::new(policy.build().unwrap())
}

#[tokio::test(start_paused = true)]
async fn n1_body_too_large_to_buffer_is_sent_once_unmarked() {
    let (addr, script) = server(&[(503, None)]);
    let put = Outbound::new(Method::PUT, addr, vec![7; 70 * 1024]);
    let reply = Tower::new(policy()).send(put).await.unwrap();
    assert_eq!(reply.status, 503);
    assert_eq!(script.markers(), unmarked());

    let (addr, script) = server(&[(503, None)]);
    let put = Outbound::new(Method::PUT, addr, vec![7; 60 * 1024]);
    let reply = Tower::new(policy()).send(put).await.unwrap();
    assert_eq!(reply.status, 200, "a buffered body is replayed");
    assert_eq!(script.markers(), marked(2));
}

/// A body of unknown length, as a stream (or a tonic request) has.
struct Chunked(VecDeque<Bytes>);

impl http_body::Body for Chunked {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
    }
}

fn chunked(addr: SocketAddr, chunks: usize, chunk: usize) -> Request<Chunked> {
    let body = Chunked((0..chunks).map(|_| Bytes::from(vec![1u8; chunk])).collect());
    Request::put(format!("http://{addr}/")).body(body).unwrap()
}

#[tokio::test(start_paused = true)]
async fn n1_a_short_body_of_unknown_length_is_buffered_stamped_and_replayed() {
    let (addr, script) = server(&[(503, None)]);
    let response = client(policy())
        .request(chunked(addr, 4, 1000))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(script.markers(), marked(2));
    assert_eq!(script.body_lengths(), vec![4000, 4000]);
}

#[tokio::test(start_paused = true)]
async fn n1_a_long_body_of_unknown_length_is_sent_once_whole_and_unmarked() {
    let (addr, script) = server(&[(503, None)]);
    let response = client(policy())
        .request(chunked(addr, 100, 1000))
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(script.markers(), unmarked());
    assert_eq!(script.body_lengths(), vec![100_000], "nothing lost");
}

/// A hedge waits for a service that takes one request at a time, and never stalls the call.
#[tokio::test]
async fn hg1_a_hedge_waits_for_a_busy_service_and_the_call_still_ends() {
    use std::time::Duration;

    use nresilience_core::{Backoff, Hedge};
    use support::slow_server;

    let busy = Duration::from_millis(200);
    let (addr, script) = slow_server(vec![(503, None, busy); 3]);
    let inner = tower::limit::ConcurrencyLimit::new(
        HyperClient::builder(TokioExecutor::new()).build(HttpConnector::new()),
        1,
    );
    let policy = policy()
        .backoff(Backoff::none())
        .hedge(Some(Hedge::after(Duration::from_millis(50))))
        .build()
        .unwrap();
    let retry = RetryLayer::new(policy).layer(inner);
    let call = retry.oneshot(request(Outbound::get(addr)));
    let response = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call ends")
        .unwrap();
    // Each hedge waited for the one request in flight, which answered first: three attempts,
    // one after another, and the last answer returned (H4).
    assert_eq!(response.status(), 503);
    assert_eq!(script.requests(), 3);
}

/// A retry waiting for a service busy with another call, dropped by its caller there, never
/// went out: its token goes back, and pays for the next call's retry (B13).
#[tokio::test]
async fn b13_a_retry_dropped_while_its_service_is_not_ready_returns_its_token() {
    use std::time::Duration;

    use support::slow_server;

    let ms = Duration::from_millis;
    // A's first attempt, B's call (held while A's retry waits), C's failure; then 200s.
    let (addr, script) = slow_server(vec![
        (503, None, ms(300)),
        (200, None, ms(1_000)),
        (503, None, Duration::ZERO),
    ]);
    let inner = tower::limit::ConcurrencyLimit::new(
        HyperClient::builder(TokioExecutor::new()).build(HttpConnector::new()),
        1,
    );
    let policy = one_token().build().unwrap();
    let retry = RetryLayer::new(policy).layer(inner);
    let a = tokio::time::timeout(ms(700), retry.clone().oneshot(request(Outbound::get(addr))));
    // B asks for the service while A's first attempt holds it, so it has it next: A's retry
    // waits for it.
    let b = async {
        tokio::time::sleep(ms(100)).await;
        retry.clone().oneshot(request(Outbound::get(addr))).await
    };
    let (a, b) = tokio::join!(a, b);
    assert!(a.is_err(), "A's caller gave up while its retry waited");
    assert_eq!(b.unwrap().status(), 200);
    let c = retry
        .oneshot(request(Outbound::get(addr)))
        .await
        .expect("C's retry was paid with A's token, not refused by the budget");
    assert_eq!(c.status(), 200);
    assert_eq!(script.requests(), 4, "A's retry never reached the server");
}

/// A retry whose service fails to get ready — tower's `Buffer` once its worker has stopped —
/// was never sent: it gets its token back, and the retries after it go on (B13, O7).
#[tokio::test]
async fn b13_o7_a_retry_its_service_failed_to_get_ready_for_returns_its_token() {
    use std::time::Duration;

    use nresilience_core::StopReason;
    use support::slow_server;

    let (addr, script) = slow_server(vec![(503, None, Duration::from_millis(300))]);
    let client = HyperClient::builder(TokioExecutor::new()).build(HttpConnector::new());
    let (buffer, worker) = tower::buffer::Buffer::pair(client, 8);
    let worker = tokio::spawn(worker);
    let policy = one_token().build().unwrap();
    let retry = RetryLayer::new(policy).layer(buffer);
    let call = retry.oneshot(request(Outbound::get(addr)));
    // The worker stops while the first attempt is out: every retry finds the buffer closed.
    let stop = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        worker.abort();
    };
    let (error, ()) = tokio::join!(call, stop);
    let error = error.unwrap_err();
    assert_eq!(
        error.reason(),
        StopReason::AttemptsExhausted,
        "each retry's token came back: {error:?}"
    );
    assert_eq!(error.attempts(), 3);
    assert_eq!(script.requests(), 1, "no retry reached the server");
}
