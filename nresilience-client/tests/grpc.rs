//! gRPC calls through `grpc::layer` in front of a tonic `Channel`, against a real tonic server
//! on loopback (SPEC H6, N2, K13, K15), and the metrics gRFC A96 names.
//!
//! The server is a hand-built service (no protoc) over a codec of raw bytes, on its own
//! runtime in real time; the client runs on a paused clock with no attempt timeout or
//! deadline, so the only timers are the delays under test and virtual time measures them
//! exactly. Tests that need a real timer run in real time.

#![cfg(feature = "grpc")]
#![allow(clippy::unwrap_used)]

// The behaviour suite is not run here.
#[allow(unused_macros, unused_imports)]
mod support;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use nresilience_client::grpc::{self, GrpcRetry};
use nresilience_client::{wire, Attempts, TransportError};
use nresilience_core::{Hedge, RetryError, RetryPolicyBuilder, StopReason};
use support::{one_token, policy};
use tokio::time::Instant;
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder, Streaming};
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};
use tower::ServiceBuilder;

// ===== a codec of raw bytes =====

/// gRPC messages as raw bytes: no protobuf, no codegen.
#[derive(Clone, Copy, Debug, Default)]
struct RawCodec;

#[derive(Debug)]
struct RawEncoder;

#[derive(Debug)]
struct RawDecoder;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

// ===== the server =====

/// A scripted failure: its code and an optional `grpc-retry-pushback-ms`.
type Answer = (Code, Option<&'static str>);

/// What the server answers, one scripted failure per call, then OK; and what it saw.
#[derive(Clone, Default)]
struct Script {
    answers: Arc<Mutex<VecDeque<Answer>>>,
    markers: Arc<Mutex<Vec<Vec<String>>>>,
    /// Each call's `grpc-previous-rpc-attempts` and `x-nresilience-attempt`, `-` for none.
    attempts: Arc<Mutex<Vec<(String, String)>>>,
    /// How long `Say` waits before answering, one per call in order, then not at all.
    delays: Arc<Mutex<VecDeque<Duration>>>,
    /// The `google.rpc.RetryInfo` delay every scripted failure carries, if any.
    retry_info: Arc<Mutex<Option<Duration>>>,
}

impl Script {
    /// The marker metadata values of every call, in order.
    fn markers(&self) -> Vec<Vec<String>> {
        self.markers.lock().unwrap().clone()
    }

    fn answer(&self, metadata: &MetadataMap) -> Result<(), Status> {
        let markers = metadata
            .get_all(wire::MARKER.as_str())
            .iter()
            .map(|value| value.to_str().unwrap_or("?").to_owned())
            .collect();
        self.markers.lock().unwrap().push(markers);
        let value = |name: &str| {
            metadata
                .get(name)
                .map_or("-", |value| value.to_str().unwrap_or("?"))
                .to_owned()
        };
        let seen = (
            value("grpc-previous-rpc-attempts"),
            value("x-nresilience-attempt"),
        );
        self.attempts.lock().unwrap().push(seen);
        let next = self.answers.lock().unwrap().pop_front();
        match next {
            None => Ok(()),
            Some((code, pushback)) => {
                let mut metadata = MetadataMap::new();
                if let Some(pushback) = pushback {
                    metadata.insert("grpc-retry-pushback-ms", pushback.parse().unwrap());
                }
                Err(match *self.retry_info.lock().unwrap() {
                    Some(delay) => Status::with_error_details_and_metadata(
                        code,
                        "scripted",
                        ErrorDetails::with_retry_info(Some(delay)),
                        metadata,
                    ),
                    None => Status::with_metadata(code, "scripted", metadata),
                })
            }
        }
    }
}

/// `nresilience.test.Echo`: unary `Say` and bidirectional `Chat` echo what they are sent.
#[derive(Clone)]
struct Echo(Script);

impl NamedService for Echo {
    const NAME: &'static str = "nresilience.test.Echo";
}

impl tower::Service<http::Request<Body>> for Echo {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let script = self.0.clone();
        Box::pin(async move {
            let mut server = tonic::server::Grpc::new(RawCodec);
            let response = match request.uri().path() {
                "/nresilience.test.Echo/Say" => {
                    let say = tower::service_fn(move |request: Request<Bytes>| {
                        let answer = script.answer(request.metadata());
                        let delay = script.delays.lock().unwrap().pop_front();
                        async move {
                            tokio::time::sleep(delay.unwrap_or_default()).await;
                            answer.map(|()| Response::new(request.into_inner()))
                        }
                    });
                    server.unary(say, request).await
                }
                "/nresilience.test.Echo/Chat" => {
                    let chat = tower::service_fn(move |request: Request<Streaming<Bytes>>| {
                        let answer = script.answer(request.metadata());
                        async move { answer.map(|()| Response::new(request.into_inner())) }
                    });
                    server.streaming(chat, request).await
                }
                _ => Status::unimplemented("no such method").into_http(),
            };
            Ok(response)
        })
    }
}

/// Starts a server answering `answers` in order (then OK) on its own real-time runtime.
fn server(answers: &[Answer]) -> (SocketAddr, Script) {
    let script = Script::default();
    script
        .answers
        .lock()
        .unwrap()
        .extend(answers.iter().copied());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let echo = Echo(script.clone());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            Server::builder()
                .add_routes(Routes::new(echo))
                .serve_with_incoming(TcpIncoming::from(listener))
                .await
                .unwrap();
        });
    });
    (addr, script)
}

// ===== the client =====

/// A channel to `addr` with the retry layer in front: the one line a user writes.
fn channel(addr: SocketAddr, policy: RetryPolicyBuilder) -> GrpcRetry<Channel> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    ServiceBuilder::new()
        .layer(grpc::layer(policy.build().unwrap()))
        .service(channel)
}

async fn say(channel: GrpcRetry<Channel>, message: Bytes) -> Result<Response<Bytes>, Status> {
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await?;
    let path = PathAndQuery::from_static("/nresilience.test.Echo/Say");
    client.unary(Request::new(message), path, RawCodec).await
}

fn hello() -> Bytes {
    Bytes::from_static(b"hello")
}

/// The retry error a failed call's status carries as its source.
fn retry_error(status: &Status) -> &RetryError<TransportError> {
    std::error::Error::source(status)
        .and_then(|source| source.downcast_ref())
        .unwrap()
}

// ===== the tests =====

#[test]
fn n2_the_wrapped_channel_is_a_send_grpc_service_for_generated_clients() {
    fn generated_client_accepts<T>()
    where
        T: tonic::client::GrpcService<Body> + Clone + Send + 'static,
        T::Future: Send,
        T::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    {
    }
    generated_client_accepts::<GrpcRetry<Channel>>();
}

#[tokio::test(start_paused = true)]
async fn n2_grpc_calls_carry_the_marker_metadata() {
    let (addr, script) = server(&[]);
    let response = say(channel(addr, policy()), hello()).await.unwrap();
    assert_eq!(response.into_inner(), "hello");
    assert_eq!(script.markers(), vec![vec!["1".to_owned()]]);
}

#[tokio::test]
async fn hg1_hg3_a_slow_call_is_hedged_with_the_marker_and_the_first_answer_wins() {
    let (addr, script) = server(&[]);
    let slow = Duration::from_secs(5);
    script.delays.lock().unwrap().push_back(slow);
    let hedging = policy().hedge(Some(Hedge::after(Duration::from_millis(50))));
    let start = std::time::Instant::now();
    let response = say(channel(addr, hedging), hello()).await.unwrap();
    assert_eq!(response.into_inner(), "hello", "the message was replayed");
    assert!(start.elapsed() < slow, "{:?}", start.elapsed());
    assert_eq!(script.markers(), vec![vec!["1".to_owned()]; 2]);
}

#[tokio::test(start_paused = true)]
async fn n2_h6_unavailable_twice_then_ok_succeeds_on_the_third_attempt_marked_each_time() {
    let (addr, script) = server(&[(Code::Unavailable, None), (Code::Unavailable, None)]);
    let response = say(channel(addr, policy()), hello()).await.unwrap();
    // H8: the tonic response carries the attempts behind it, as every client's does.
    let made = response.extensions().get::<Attempts>().map(Attempts::made);
    assert_eq!(made, Some(3));
    assert_eq!(response.into_inner(), "hello", "the message was replayed");
    assert_eq!(script.markers(), vec![vec!["1".to_owned()]; 3]);
    // F1: gRFC A6's count of the attempts before this one, on every attempt but the first.
    let attempts: Vec<(String, String)> = script.attempts.lock().unwrap().clone();
    let expected = [("-", "-"), ("1", "2"), ("2", "3")]
        .map(|(previous, ours)| (previous.to_owned(), ours.to_owned()));
    assert_eq!(attempts, expected);
}

#[tokio::test(start_paused = true)]
async fn h6_deadline_exceeded_from_the_server_is_retried() {
    let (addr, script) = server(&[(Code::DeadlineExceeded, None)]);
    let start = Instant::now();
    say(channel(addr, policy()), hello()).await.unwrap();
    assert_eq!(script.markers().len(), 2);
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(100),
        "transient base"
    );
}

#[tokio::test(start_paused = true)]
async fn h4_h6_attempts_exhausted_on_unavailable_return_the_servers_status() {
    let (addr, script) = server(&[(Code::Unavailable, None); 3]);
    let status = say(channel(addr, policy()), hello()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(status.message(), "scripted", "the server's own answer");
    assert_eq!(script.markers().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn k13_h6_resource_exhausted_pushback_is_waited_exactly() {
    let (addr, script) = server(&[(Code::ResourceExhausted, Some("1500"))]);
    let start = Instant::now();
    let response = say(channel(addr, policy()), hello()).await.unwrap();
    assert_eq!(response.into_inner(), "hello");
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
    assert_eq!(script.markers().len(), 2);
}

/// A server answering `answers`, each failure with a `google.rpc.RetryInfo` of `delay`.
fn server_with_retry_info(answers: &[Answer], delay: Duration) -> (SocketAddr, Script) {
    let (addr, script) = server(answers);
    *script.retry_info.lock().unwrap() = Some(delay);
    (addr, script)
}

#[tokio::test(start_paused = true)]
async fn k15_h6_resource_exhausted_with_retry_info_waits_its_delay_to_the_nanosecond() {
    let delay = Duration::new(1, 234_567_891);
    let (addr, script) = server_with_retry_info(&[(Code::ResourceExhausted, None)], delay);
    let start = Instant::now();
    say(channel(addr, policy()), hello()).await.unwrap();
    // Verbatim, not the throttled curve's 1 s nor a whole millisecond below it; tokio's
    // timer wakes on the next millisecond.
    let waited = start.elapsed();
    assert!(
        delay <= waited && waited < delay + Duration::from_millis(1),
        "{waited:?}"
    );
    assert_eq!(script.markers().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn k15_retry_info_wins_over_grpc_retry_pushback_ms() {
    let answers = [(Code::Unavailable, Some("20"))];
    let (addr, _) = server_with_retry_info(&answers, Duration::from_millis(1500));
    let start = Instant::now();
    say(channel(addr, policy()), hello()).await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(1500),
        "the most precise first"
    );
}

#[tokio::test(start_paused = true)]
async fn k15_h6_a_negative_pushback_stops_even_beside_retry_info() {
    let answers = [(Code::ResourceExhausted, Some("-1"))];
    let (addr, script) = server_with_retry_info(&answers, Duration::from_millis(10));
    let status = say(channel(addr, policy()), hello()).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(script.markers().len(), 1, "not retried");
    // The server's own answer reaches the caller, its details intact.
    let retry_info = status.get_details_retry_info().unwrap();
    assert_eq!(retry_info.retry_delay, Some(Duration::from_millis(10)));
}

#[tokio::test(start_paused = true)]
async fn h6_resource_exhausted_without_pushback_waits_on_the_throttled_curve() {
    let (addr, script) = server(&[(Code::ResourceExhausted, None)]);
    let start = Instant::now();
    say(channel(addr, policy()), hello()).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(1), "throttled base");
    assert_eq!(script.markers().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn h6_negative_pushback_is_not_retried() {
    let (addr, script) = server(&[(Code::Unavailable, Some("-1"))]);
    let status = say(channel(addr, policy()), hello()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(script.markers().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn h6_garbage_pushback_is_ignored_and_the_curve_applies() {
    let (addr, script) = server(&[(Code::Unavailable, Some("soon"))]);
    let start = Instant::now();
    say(channel(addr, policy()), hello()).await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(100),
        "transient base"
    );
    assert_eq!(script.markers().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn h6_invalid_argument_is_permanent_one_attempt() {
    let (addr, script) = server(&[(Code::InvalidArgument, None)]);
    let status = say(channel(addr, policy()), hello()).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "scripted");
    assert_eq!(script.markers().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn n1_n2_a_message_too_large_to_buffer_is_sent_once_unmarked() {
    let (addr, script) = server(&[(Code::Unavailable, None)]);
    let large = Bytes::from(vec![7; 70 * 1024]);
    let status = say(channel(addr, policy()), large).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(script.markers(), vec![Vec::<String>::new()]);
}

#[tokio::test(start_paused = true)]
async fn n1_n2_a_policy_of_one_attempt_does_not_stamp() {
    let (addr, script) = server(&[(Code::Unavailable, None)]);
    let status = say(channel(addr, policy().max_attempts(1)), hello())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(script.markers(), vec![Vec::<String>::new()]);
}

/// In real time: a stream the layer waited on would hang, and the timeout says so.
#[tokio::test]
async fn n1_n2_a_stream_still_producing_is_sent_once_unmarked_not_held_back() {
    let (addr, script) = server(&[]);
    let (messages, outbox) = tokio::sync::mpsc::channel(4);
    messages.send(Bytes::from_static(b"one")).await.unwrap();
    let chat = async move {
        let mut client = tonic::client::Grpc::new(channel(addr, policy()));
        client.ready().await.unwrap();
        let path = PathAndQuery::from_static("/nresilience.test.Echo/Chat");
        let request = Request::new(ReceiverStream::new(outbox));
        let mut replies = client
            .streaming(request, path, RawCodec)
            .await
            .unwrap()
            .into_inner();
        // Each message waits on the reply to the one before.
        assert_eq!(replies.message().await.unwrap().unwrap(), "one");
        messages.send(Bytes::from_static(b"two")).await.unwrap();
        assert_eq!(replies.message().await.unwrap().unwrap(), "two");
        drop(messages);
        assert_eq!(replies.message().await.unwrap(), None);
    };
    tokio::time::timeout(Duration::from_secs(10), chat)
        .await
        .expect("the stream was not held back");
    assert_eq!(script.markers(), vec![Vec::<String>::new()]);
}

#[tokio::test(start_paused = true)]
async fn b7_a_budget_refusal_is_unavailable_with_the_retry_error_as_source() {
    let (addr, script) = server(&[(Code::Unavailable, None); 3]);
    let policy = one_token();
    let status = say(channel(addr, policy), hello()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    let error = retry_error(&status);
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(error.attempts(), 2, "one token, one retry");
    assert_eq!(script.markers().len(), 2);
}

/// In real time: the deadline is a real timer.
#[tokio::test]
async fn k14_pushback_past_the_deadline_stops_at_once_with_deadline_exceeded() {
    let (addr, script) = server(&[(Code::ResourceExhausted, Some("5000"))]);
    let start = std::time::Instant::now();
    let policy = policy().deadline(Some(Duration::from_secs(2)));
    let status = say(channel(addr, policy), hello()).await.unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(1), "no sleep");
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert_eq!(retry_error(&status).reason(), StopReason::DeadlineExceeded);
    assert_eq!(script.markers().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn h6_an_unreachable_server_is_retried_then_unavailable() {
    // A port nobody listens on: bind, read the address, close.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let status = say(channel(addr, policy()), hello()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    let error = retry_error(&status);
    assert_eq!(error.reason(), StopReason::AttemptsExhausted);
    assert_eq!(error.attempts(), 3);
}

/// A refused connection never reached the server: its retries are paid back, so a one-token
/// budget lets the call make all its attempts (O7, B13).
#[tokio::test(start_paused = true)]
async fn b13_o7_a_refused_connection_is_unreachable_and_its_retries_spend_no_token() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let policy = one_token();
    let channel = channel(addr, policy);
    for _ in 0..3 {
        let status = say(channel.clone(), hello()).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        let error = retry_error(&status);
        assert_eq!(error.reason(), StopReason::AttemptsExhausted, "{error:?}");
        assert_eq!(error.attempts(), 3, "each retry's token came back");
    }
}

// ===== gRPC's own retry metrics (gRFC A96) =====

mod a96 {
    use std::sync::OnceLock;

    use nresilience_client::grpc::metrics::{CALL_HEDGES, CALL_RETRIES, CALL_RETRY_DELAY, TARGET};
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

    use super::*;

    /// The process's meter provider, installed before the first layer of these tests is
    /// built; other tests' calls land in it too, each under its own server's target.
    fn meter() -> &'static (SdkMeterProvider, InMemoryMetricExporter) {
        static METER: OnceLock<(SdkMeterProvider, InMemoryMetricExporter)> = OnceLock::new();
        METER.get_or_init(|| {
            let exporter = InMemoryMetricExporter::default();
            let provider = SdkMeterProvider::builder()
                .with_reader(PeriodicReader::builder(exporter.clone()).build())
                .build();
            opentelemetry::global::set_meter_provider(provider.clone());
            (provider, exporter)
        })
    }

    /// The count and the sum of `histogram`'s points for calls to the server at `addr`; `None`
    /// when it has none.
    fn recorded(histogram: &str, addr: SocketAddr) -> Option<(u64, f64)> {
        let (provider, exporter) = meter();
        provider.force_flush().unwrap();
        let target = format!("http://{addr}");
        let mut found = None;
        for resource in exporter.get_finished_metrics().unwrap() {
            for scope in resource.scope_metrics() {
                for metric in scope.metrics().filter(|metric| metric.name() == histogram) {
                    let ours = |attributes: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
                        let ours = |kv: &opentelemetry::KeyValue| {
                            kv.key.as_str() == TARGET && kv.value.as_str() == target
                        };
                        attributes.filter(|kv| ours(kv)).count() > 0
                    };
                    match metric.data() {
                        AggregatedMetrics::U64(MetricData::Histogram(h)) => {
                            for point in h.data_points().filter(|p| ours(&mut p.attributes())) {
                                found = Some((point.count(), point.sum() as f64));
                            }
                        }
                        AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                            for point in h.data_points().filter(|p| ours(&mut p.attributes())) {
                                found = Some((point.count(), point.sum()));
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        found
    }

    /// A channel to `addr` whose calls are attributed to it.
    fn channel(addr: SocketAddr, policy: RetryPolicyBuilder) -> GrpcRetry<Channel> {
        let target = format!("http://{addr}");
        let channel = Endpoint::from_shared(target.clone())
            .unwrap()
            .connect_lazy();
        let layer = grpc::layer(policy.build().unwrap()).target(&target);
        ServiceBuilder::new().layer(layer).service(channel)
    }

    #[tokio::test(start_paused = true)]
    async fn a96_a_call_that_retried_twice_records_its_retries_and_the_time_between() {
        meter();
        let (addr, _) = server(&[(Code::Unavailable, None), (Code::Unavailable, None)]);
        say(channel(addr, policy()), hello()).await.unwrap();
        assert_eq!(recorded(CALL_RETRIES, addr), Some((1, 2.0)));
        assert_eq!(
            recorded(CALL_HEDGES, addr),
            None,
            "no hedge, nothing recorded"
        );
        let (count, seconds) = recorded(CALL_RETRY_DELAY, addr).unwrap();
        assert_eq!(count, 1);
        assert!(
            (seconds - 0.3).abs() < 1e-9,
            "100 ms, then 200 ms: {seconds}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a96_a_call_that_failed_records_its_retries_too() {
        meter();
        let (addr, _) = server(&[(Code::Unavailable, None); 3]);
        let status = say(channel(addr, policy()), hello()).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(recorded(CALL_RETRIES, addr), Some((1, 2.0)));
        assert_eq!(
            recorded(CALL_RETRY_DELAY, addr).map(|(count, _)| count),
            Some(1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a96_a_first_attempt_that_answers_records_only_a_delay_of_zero() {
        meter();
        let (addr, _) = server(&[]);
        say(channel(addr, policy()), hello()).await.unwrap();
        assert_eq!(recorded(CALL_RETRIES, addr), None);
        assert_eq!(recorded(CALL_HEDGES, addr), None);
        assert_eq!(recorded(CALL_RETRY_DELAY, addr), Some((1, 0.0)));
    }

    #[tokio::test]
    async fn a96_a_hedged_call_records_its_hedge_and_no_retry() {
        meter();
        let (addr, script) = server(&[]);
        script
            .delays
            .lock()
            .unwrap()
            .push_back(Duration::from_secs(5));
        let hedging = policy().hedge(Some(Hedge::after(Duration::from_millis(50))));
        say(channel(addr, hedging), hello()).await.unwrap();
        assert_eq!(recorded(CALL_HEDGES, addr), Some((1, 1.0)));
        assert_eq!(recorded(CALL_RETRIES, addr), None, "a hedge is not a retry");
    }
}
